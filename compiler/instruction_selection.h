// Instruction selection: what a launch's computation is, read from the IR's
// structure (never from node or composite names), so that the emitter can pick
// the instructions that suit it. Today every launch is emitted with plain
// loads and fp32 FMAs; a launch recognised as a matmul-like contraction is
// where the tensor-core tile library (mma.sync / wgmma) is to be instantiated.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir.h"

namespace llmc {

struct InstructionChoice {
  enum class Kind {
    Elementwise,  // no reduction: plain loads, FMAs, stores
    Reduction,    // sums or maxima (with a stream accumulator or loops), on CUDA cores
    MatmulLike,   // one floating-point contraction of two stored arrays, with elementwise work around it
  } kind = Kind::Elementwise;
  NodeId contraction = -1;         // MatmulLike: the contraction
  std::vector<std::string> batch;  // MatmulLike: axes of both operands and the result
  std::vector<std::string> m;      // axes of the first operand only (rows of A)
  std::vector<std::string> n;      // axes of the second operand only (columns of B)
  std::vector<std::string> k;      // contracted axes
  bool lowPrecisionOperands = false;  // the operands are stored as bf16: a bf16 tensor-core candidate

  std::string describe() const;  // one line, for the generated source and the JSON
};

// `computed`: the nodes the launch computes; `stored`: whether a value is read
// from GMEM (not recomputed) by the launch.
InstructionChoice selectInstructions(const Graph& graph, const std::set<NodeId>& computed,
                                     const std::set<NodeId>& stored, bool bf16Storage);

}  // namespace llmc
