#include "ir/json_export.h"

#include <cmath>

namespace llmc {

namespace {

nlohmann::json typeToJson(const Type& t) {
  nlohmann::json axes = nlohmann::json::array();
  for (const auto& a : t.axes) axes.push_back({{"name", a.name}, {"size", a.size}});
  return {{"dtype", dtypeName(t.dtype)}, {"axes", axes}};
}

nlohmann::json nodeToJson(const Node& n) {
  nlohmann::json j = {{"id", n.id}, {"op", opName(n.op)}, {"type", typeToJson(n.type)}, {"operands", n.operands}};
  if (!n.name.empty()) j["name"] = n.name;
  switch (n.op) {
    case Op::Input: j["param"] = n.isParam; break;
    case Op::Constant:
      // JSON has no infinity: write it as a string.
      if (std::isinf(n.value)) j["value"] = n.value > 0 ? "inf" : "-inf";
      else j["value"] = n.value;
      break;
    case Op::Unary: j["fn"] = unaryName(n.unary); break;
    case Op::Binary: j["fn"] = binaryName(n.binary); break;
    case Op::Compare: j["fn"] = compareSymbol(n.compare); break;
    case Op::Reduce: j["fn"] = reduceName(n.reduce); break;
    case Op::Scan:
      j["fn"] = scanOperatorName(n);
      if (isLinearScan(n)) j["lagged"] = n.lagged;
      j["exclusive"] = n.lo != 0;
      j["reverse"] = n.hi != 0;
      if (n.combine && n.lo) {
        if (std::isinf(n.value)) j["first"] = n.value > 0 ? "inf" : "-inf";
        else j["first"] = n.value;
      }
      break;
    case Op::Slice: j["lo"] = n.lo; j["hi"] = n.hi; break;
    case Op::Index: j["position"] = n.lo; break;
    default: break;
  }
  if (!n.axes.empty()) j["axes"] = n.axes;
  if (!n.newAxes.empty()) j["new_axes"] = n.newAxes;
  j["woven"] = n.wovenAxes();
  if (n.loc.valid()) j["loc"] = n.loc.str();
  if (!n.origin.empty()) j["origin"] = n.origin;
  return j;
}

}  // namespace

nlohmann::json graphToJson(const Graph& graph) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const auto& n : graph.nodes) nodes.push_back(nodeToJson(n));
  nlohmann::json outputs = nlohmann::json::array();
  for (const auto& o : graph.outputs) outputs.push_back({{"name", o.name}, {"node", o.node}});
  return {{"diagram", graph.name}, {"inputs", graph.inputs}, {"outputs", outputs}, {"nodes", nodes}};
}

}  // namespace llmc
