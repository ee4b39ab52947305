#include "lowering/instruction_selection.h"

#include <fmt/format.h>

#include <algorithm>

namespace llmc {

namespace {

std::string joined(const std::vector<std::string>& axes) {
  std::string out;
  for (const auto& a : axes) out += (out.empty() ? "" : " ") + a;
  return out.empty() ? "-" : out;
}

// The stored array an operand reads, looking through views and casts (a
// transposed or split weight is still one GMEM array).
bool readsStoredArray(const Graph& g, NodeId id, const std::set<NodeId>& computed, const std::set<NodeId>& stored) {
  for (;;) {
    if (stored.count(id) && !computed.count(id)) return true;
    const Node& n = g.node(id);
    switch (n.op) {
      case Op::Split:
      case Op::Merge:
      case Op::Rename:
      case Op::Index:
      case Op::Slice:
      case Op::Transpose:
      case Op::Broadcast:
      case Op::StopGradient:
      case Op::Cast: id = n.operands[0]; break;
      default: return false;
    }
  }
}

}  // namespace

std::string InstructionChoice::describe() const {
  switch (kind) {
    case Kind::Elementwise: return "elementwise (CUDA cores)";
    case Kind::Scan: return "running aggregate, blocked scan (CUDA cores)";
    case Kind::Reduction:
      if (!tensorCores.empty()) return "reduction, " + tensorCores;
      return scalarReason.empty() ? "reduction (CUDA cores)" : "reduction (CUDA cores, because " + scalarReason + ")";
    case Kind::MatmulLike:
      return fmt::format("{} matmul-like contraction (batch: {}; m: {}; n: {}; k: {}): {}",
                         lowPrecisionOperands ? "bf16" : "f32", joined(batch), joined(m), joined(n), joined(k),
                         !tensorCores.empty() ? tensorCores
                         : scalarReason.empty() ? std::string("CUDA cores")
                                                : "CUDA cores, because " + scalarReason);
  }
  return "";
}

InstructionChoice selectInstructions(const Graph& g, const std::set<NodeId>& computed, const std::set<NodeId>& stored,
                                     bool bf16Storage) {
  InstructionChoice choice;
  std::vector<NodeId> contractions;
  bool reduces = false;
  for (NodeId id : computed) {
    const Node& n = g.node(id);
    if (n.op == Op::Contract && isFloat(n.type.dtype)) contractions.push_back(id);
    reduces |= n.op == Op::Contract || n.op == Op::Reduce || n.op == Op::Gather || n.op == Op::ScatterAdd;
  }
  choice.kind = reduces ? InstructionChoice::Kind::Reduction : InstructionChoice::Kind::Elementwise;
  if (std::any_of(computed.begin(), computed.end(), [&](NodeId id) { return g.node(id).op == Op::Scan; })) {
    choice.kind = InstructionChoice::Kind::Scan;
    return choice;
  }
  // One contraction whose operands are both arrays in GMEM (through views):
  // the A·B of a tile GEMM, the rest of the launch its prologue-free epilogue.
  if (contractions.size() != 1) return choice;
  const Node& c = g.node(contractions[0]);
  for (NodeId operand : c.operands)
    if (!readsStoredArray(g, operand, computed, stored)) {
      choice.scalarReason = fmt::format("its contraction's operand {} is computed in the launch (a prologue), which the "
                                        "tensor-core tile library cannot take",
                                        g.node(operand).name.empty() ? fmt::format("%{}", operand) : g.node(operand).name);
      return choice;
    }
  const Type& a = g.node(c.operands[0]).type;
  const Type& b = g.node(c.operands[1]).type;
  choice.kind = InstructionChoice::Kind::MatmulLike;
  choice.contraction = c.id;
  choice.k = c.axes;
  for (const Axis& ax : c.type.axes) {
    if (a.has(ax.name) && b.has(ax.name)) choice.batch.push_back(ax.name);
    else if (a.has(ax.name)) choice.m.push_back(ax.name);
    else choice.n.push_back(ax.name);
  }
  choice.lowPrecisionOperands = bf16Storage && isFloat(a.dtype) && isFloat(b.dtype);
  return choice;
}

}  // namespace llmc
