// The reference interpreter's internals shared by its files: errors, array
// layouts and the operand view (interpreter.h is the interface).
#pragma once

#include <fmt/format.h>

#include <array>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "strided_loop.h"

namespace llmc::interpreter_detail {

// ---------------------------------------------------------------------------
// Errors and layouts

[[noreturn]] inline void fail(const Node& node, const std::string& message) {
  const std::string what =
      node.name.empty() ? opName(node.op) : fmt::format("{} '{}'", opName(node.op), node.name);
  throw std::runtime_error(
      fmt::format("{}: {} (node {}): {}", node.loc.str(), what, node.id, message));
}

inline std::vector<int64_t> shapeOf(const Type& type) {
  std::vector<int64_t> shape;
  for (const Axis& axis : type.axes) shape.push_back(axis.size);
  return shape;
}

// The strides of `array` (row-major in its own layout) when walked over the
// index space of `space`: for each axis of space, the array's stride along it,
// or 0 where the array lacks the axis (it is broadcast). Every axis of the
// array but those in `skipped` must be in space with the same size; anything
// else is a malformed graph.
inline std::vector<int64_t> stridesOver(const Node& node, const Type& array, const Type& space,
                                 const std::vector<std::string>& skipped = {}) {
  const std::vector<int64_t> own = rowMajorStrides(array);
  for (const Axis& axis : array.axes) {
    if (std::find(skipped.begin(), skipped.end(), axis.name) != skipped.end()) continue;
    const Axis* there = space.find(axis.name);
    if (!there || there->size != axis.size)
      fail(node,
           fmt::format("operand {} does not fit the index space {}", array.str(), space.str()));
  }
  std::vector<int64_t> strides;
  for (const Axis& axis : space.axes) strides.push_back(strideOf(array, own, axis.name));
  return strides;
}

inline const Axis& axisOf(const Node& node, const Type& type, const std::string& name) {
  const Axis* axis = type.find(name);
  if (!axis) fail(node, fmt::format("{} has no axis '{}'", type.str(), name));
  return *axis;
}

// `type` with its axis `from` replaced, in place, by the axes `to`.
inline Type replaceAxis(const Type& type, const std::string& from, const std::vector<Axis>& to) {
  Type out{type.dtype, {}};
  for (const Axis& axis : type.axes) {
    if (axis.name == from)
      out.axes.insert(out.axes.end(), to.begin(), to.end());
    else
      out.axes.push_back(axis);
  }
  return out;
}

// An operand as the kernels see it: its type and values.
template <class T>
struct Arg {
  const Type* type;
  const T* data;
};

// Copies src into dst laid out as dstType; both hold the same axes (names and
// sizes, dtypes aside), matched by name.
template <class T>
void copyByName(const Node& node, const Arg<T>& src, const Type& dstType, T* dst) {
  if (src.type->axes.size() != dstType.axes.size())
    fail(node, fmt::format("cannot lay out {} as {}", src.type->str(), dstType.str()));
  stridedCopy(shapeOf(dstType), dst, rowMajorStrides(dstType), src.data,
              stridesOver(node, *src.type, dstType));
}

inline int64_t product(const std::vector<Axis>& axes) {
  int64_t n = 1;
  for (const Axis& axis : axes) n *= axis.size;
  return n;
}

// Elementwise maps, broadcasting operands by axis name.
template <class T, size_t N, class F>
std::vector<T> mapElementwise(const Node& node, const std::array<Arg<T>, N>& args, F f) {
  const Type& out = node.type;
  std::vector<T> result(static_cast<size_t>(out.elementCount()));
  std::array<std::vector<int64_t>, N + 1> strides;
  strides[0] = rowMajorStrides(out);
  for (size_t k = 0; k < N; ++k) strides[k + 1] = stridesOver(node, *args[k].type, out);
  T* base = result.data();
  // The output is walked in its own layout, so its rows are contiguous.
  forEachRow<N + 1>(shapeOf(out), strides,
                    [&](const Offsets<N + 1>& at, int64_t n, const Offsets<N + 1>& step) {
                      T* o = base + at[0];
                      const T* x = args[0].data + at[1];
                      if constexpr (N == 1) {
                        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i * step[1]]);
                      } else if constexpr (N == 2) {
                        const T* y = args[1].data + at[2];
                        for (int64_t i = 0; i < n; ++i) o[i] = f(x[i * step[1]], y[i * step[2]]);
                      } else {
                        static_assert(N == 3);
                        const T* y = args[1].data + at[2];
                        const T* z = args[2].data + at[3];
                        for (int64_t i = 0; i < n; ++i)
                          o[i] = f(x[i * step[1]], y[i * step[2]], z[i * step[3]]);
                      }
                    });
  return result;
}

}  // namespace llmc::interpreter_detail
