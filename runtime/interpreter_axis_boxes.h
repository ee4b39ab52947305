// The reference interpreter's axis operations (split, merge, rename,
// broadcast, transpose, slice, index, concat): data movement alone, by axis
// name; shared by interpreter.cpp's evaluator.
#pragma once

#include <algorithm>

#include "interpreter_arrays.h"

namespace llmc::interpreter_detail {

// ---------------------------------------------------------------------------
// Axis operations

// Split and merge keep the row-major order of the elements: the input of a
// split, read as if its axis a were the new axes in its place, already is the
// output in some axis order; likewise the output of a merge.
template <class T>
std::vector<T> split(const Node& node, const Arg<T>& x) {
  std::vector<Axis> parts;
  for (const std::string& name : node.newAxes) parts.push_back(axisOf(node, node.type, name));
  const std::string& whole = node.axes.at(0);
  if (product(parts) != axisOf(node, *x.type, whole).size)
    fail(node, fmt::format("{} cannot be split into {}", x.type->str(), node.type.str()));
  const Type view = replaceAxis(*x.type, whole, parts);
  std::vector<T> result(static_cast<size_t>(node.type.elementCount()));
  copyByName(node, Arg<T>{&view, x.data}, node.type, result.data());
  return result;
}

template <class T>
std::vector<T> merge(const Node& node, const Arg<T>& x) {
  std::vector<Axis> parts;
  for (const std::string& name : node.axes) parts.push_back(axisOf(node, *x.type, name));
  const std::string& whole = node.newAxes.at(0);
  if (product(parts) != axisOf(node, node.type, whole).size)
    fail(node, fmt::format("{} cannot be merged into {}", x.type->str(), node.type.str()));
  const Type view = replaceAxis(node.type, whole, parts);
  std::vector<T> result(static_cast<size_t>(node.type.elementCount()));
  copyByName(node, x, view, result.data());
  return result;
}

template <class T>
std::vector<T> renameAxis(const Node& node, const Arg<T>& x) {
  const std::string& from = node.axes.at(0);
  const Type view =
      replaceAxis(*x.type, from, {{node.newAxes.at(0), axisOf(node, *x.type, from).size}});
  std::vector<T> result(static_cast<size_t>(node.type.elementCount()));
  copyByName(node, Arg<T>{&view, x.data}, node.type, result.data());
  return result;
}

// The operand repeated along the output's axes it lacks.
template <class T>
std::vector<T> broadcast(const Node& node, const Arg<T>& x) {
  return mapElementwise<T, 1>(node, {x}, [](T v) { return v; });
}

template <class T>
std::vector<T> transpose(const Node& node, const Arg<T>& x) {
  std::vector<T> result(static_cast<size_t>(node.type.elementCount()));
  copyByName(node, x, node.type, result.data());
  return result;
}

// The part of x from position lo along axis `along`, as the output type:
// `along` becomes the output axis `kept` (slice), or disappears (index).
template <class T>
std::vector<T> window(const Node& node, const Arg<T>& x, const std::string& along,
                      const std::optional<Axis>& kept) {
  const Type& out = node.type;
  const Type expected =
      replaceAxis(*x.type, along, kept ? std::vector<Axis>{*kept} : std::vector<Axis>{});
  Type outAxes = out;
  outAxes.dtype = expected.dtype;
  if (!outAxes.sameAxisSet(expected))
    fail(node, fmt::format("{} does not fit the input {}", out.str(), x.type->str()));
  const std::vector<int64_t> inStrides = rowMajorStrides(*x.type);
  const int64_t alongStride = strideOf(*x.type, inStrides, along);
  std::vector<int64_t> readStrides;
  for (const Axis& axis : out.axes)
    readStrides.push_back(
        kept && axis.name == kept->name ? alongStride : strideOf(*x.type, inStrides, axis.name));
  std::vector<T> result(static_cast<size_t>(out.elementCount()));
  stridedCopy(shapeOf(out), result.data(), rowMajorStrides(out), x.data + node.lo * alongStride,
              readStrides);
  return result;
}

template <class T>
std::vector<T> slice(const Node& node, const Arg<T>& x) {
  const std::string& from = node.axes.at(0);
  const int64_t size = axisOf(node, *x.type, from).size;
  if (node.lo < 0 || node.lo > node.hi || node.hi > size)
    fail(node,
         fmt::format("slice [{}:{}] is out of range for axis {}:{}", node.lo, node.hi, from, size));
  return window(node, x, from, Axis{node.newAxes.at(0), node.hi - node.lo});
}

template <class T>
std::vector<T> indexAt(const Node& node, const Arg<T>& x) {
  const std::string& from = node.axes.at(0);
  const int64_t size = axisOf(node, *x.type, from).size;
  if (node.lo < 0 || node.lo >= size)
    fail(node, fmt::format("position {} is out of range for axis {}:{}", node.lo, from, size));
  return window(node, x, from, std::nullopt);
}

// Operand k fills positions k*size(a) .. (k+1)*size(a) of the new axis.
template <class T>
std::vector<T> concatenate(const Node& node, const std::vector<Arg<T>>& parts) {
  const std::string& from = node.axes.at(0);
  const Type& out = node.type;
  const std::string& joined = node.newAxes.at(0);
  const std::vector<int64_t> outStrides = rowMajorStrides(out);
  const int64_t joinedStride = strideOf(out, outStrides, joined);
  std::vector<T> result(static_cast<size_t>(out.elementCount()));
  int64_t start = 0;
  for (const Arg<T>& part : parts) {
    const int64_t size = axisOf(node, *part.type, from).size;
    const Type view = replaceAxis(*part.type, from, {{joined, size}});
    Type region = out;  // the output restricted to this part's positions
    for (Axis& axis : region.axes)
      if (axis.name == joined) axis.size = size;
    stridedCopy(shapeOf(region), result.data() + start * joinedStride, outStrides, part.data,
                stridesOver(node, view, region));
    start += size;
  }
  if (start != axisOf(node, out, joined).size)
    fail(node, fmt::format("the parts add up to {} positions along '{}'", start, joined));
  return result;
}

}  // namespace llmc::interpreter_detail
