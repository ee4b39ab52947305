#include "graph_inputs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "low_precision.h"

namespace llmc {

namespace {

// "input x (f32[n:100 c:77], declared at gated_mlp.dg:4:20)"
std::string describeInput(const Node& n) {
  return fmt::format("input {} ({}{})", n.name, n.type.str(), n.loc.valid() ? ", declared at " + n.loc.str() : "");
}

// "(100, 77)": the shape a .npy file of the input holds.
std::string declaredShape(const Type& type) {
  std::string out = "(";
  for (size_t i = 0; i < type.axes.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", type.axes[i].size);
  return out + (type.axes.size() == 1 ? ",)" : ")");
}

// Where in an array of `type` the row-major element `flat` lies: "[2, 7]".
std::string position(const Type& type, int64_t flat) {
  std::vector<int64_t> index(type.axes.size());
  for (size_t a = type.axes.size(); a-- > 0;) {
    index[a] = flat % type.axes[a].size;
    flat /= type.axes[a].size;
  }
  std::string out = "[";
  for (size_t i = 0; i < index.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", index[i]);
  return out + "]";
}

// The whole numbers an integer or bool dtype holds.
std::pair<double, double> integerRange(DType dtype) {
  if (dtype == DType::Bool) return {0, 1};
  if (dtype == DType::U16) return {0, 65535};
  return {-2147483648.0, 2147483647.0};
}

}  // namespace

int64_t indexBound(const Graph& graph, NodeId input) {
  int64_t bound = 0;
  for (const Node& n : graph.nodes) {
    if (n.operands.size() < 2 || n.operands[1] != input) continue;
    const Axis* axis = n.op == Op::Gather       ? graph.node(n.operands[0]).type.find(n.axes.at(0))
                       : n.op == Op::ScatterAdd ? n.type.find(n.newAxes.at(0))
                                                : nullptr;
    if (axis) bound = bound == 0 ? axis->size : std::min(bound, axis->size);
  }
  return bound;
}

HostTensor randomInput(const Graph& graph, NodeId input, uint64_t seed) {
  const Node& n = graph.node(input);
  const uint64_t s = seed * 1000003 + static_cast<uint64_t>(input);
  if (isFloat(n.type.dtype)) return randomNormal(n.type, s, 0, 1);
  if (n.type.dtype == DType::Bool) return randomUniform(n.type, s, 0, 2);
  return randomUniform(n.type, s, 0, static_cast<double>(std::max<int64_t>(indexBound(graph, input), 1)));
}

HostTensor inputFromNpy(const Graph& graph, NodeId input, const NpyArray& array, const std::string& path) {
  const Node& n = graph.node(input);
  std::vector<int64_t> declared;
  for (const Axis& a : n.type.axes) declared.push_back(a.size);
  if (array.shape != declared)
    throw InputFileError(fmt::format("{}: shape {} does not fit {}: it needs shape {}, its axes in declared order",
                                     path, array.shapeText(), describeInput(n), declaredShape(n.type)));
  const bool floatInput = isFloat(n.type.dtype);
  if (floatInput == array.isInteger())
    throw InputFileError(fmt::format("{}: {} elements do not fit {}: give {}", path, array.dtype, describeInput(n),
                                     floatInput ? "float32 or float64" : "int32 or int64"));
  if (!floatInput) {
    const auto [lo, hi] = integerRange(n.type.dtype);
    const int64_t bound = indexBound(graph, input);
    for (size_t i = 0; i < array.values.size(); ++i) {
      const double v = array.values[i];
      if (v < lo || v > hi)
        throw InputFileError(fmt::format("{}: element {} is {}, which {} cannot hold", path,
                                         position(n.type, static_cast<int64_t>(i)), v, describeInput(n)));
      if (bound > 0 && (v < 0 || v >= static_cast<double>(bound)))
        throw InputFileError(fmt::format("{}: element {} is {}, out of range for {}, which indexes {} positions (0 to {})",
                                         path, position(n.type, static_cast<int64_t>(i)), v, describeInput(n), bound,
                                         bound - 1));
    }
  }
  return HostTensor{n.type, array.values};
}

void roundAsStored(HostTensor& values, bool bf16Storage) {
  const DType dtype = values.type.dtype;
  if (!isFloat(dtype)) return;
  for (double& x : values.data) {
    if (isLowPrecision(dtype)) x = roundToDType(x, dtype);
    if (bf16Storage) x = roundToDType(x, DType::BF16);
    else if (dtype == DType::F32) x = static_cast<double>(static_cast<float>(x));
  }
}

}  // namespace llmc
