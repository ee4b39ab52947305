// Instruction selection: what a launch's computation is, read from the IR's
// structure (never from node or composite names), so that the emitter can pick
// the instructions that suit it: a launch recognised as a bf16 matmul-like
// contraction instantiates the tensor-core tile library (tensor_core_gemm.h)
// where it can; every other launch uses plain loads and fp32 FMAs.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

struct InstructionChoice {
  enum class Kind {
    Elementwise,  // no reduction: plain loads, FMAs, stores
    Reduction,    // sums or maxima (with a stream accumulator or loops), on CUDA cores
    MatmulLike,   // one floating-point contraction of two stored arrays, with elementwise work around it
    Scan,         // a running sum or maximum (Op::Scan) with its prologue: planning/scan_layout.h
  } kind = Kind::Elementwise;
  NodeId contraction = -1;         // MatmulLike: the contraction
  std::vector<std::string> batch;  // MatmulLike: axes of both operands and the result
  std::vector<std::string> m;      // axes of the first operand only (rows of A)
  std::vector<std::string> n;      // axes of the second operand only (columns of B)
  std::vector<std::string> k;      // contracted axes
  bool lowPrecisionOperands = false;  // the operands are stored as bf16: a bf16 tensor-core candidate
  // Set by the emitter: the tensor-core tiles it instantiated (a GEMM for
  // MatmulLike, a streamed pair of products for a Reduction; empty: none), or
  // why the launch stays on CUDA cores (also set here for a single contraction
  // with a prologue).
  std::string tensorCores;
  std::string scalarReason;

  std::string describe() const;  // one line, for the generated source and the JSON
};

// `computed`: the nodes the launch computes; `stored`: whether a value is read
// from GMEM (not recomputed) by the launch.
InstructionChoice selectInstructions(const Graph& graph, const std::set<NodeId>& computed,
                                     const std::set<NodeId>& stored, bool bf16Storage);

}  // namespace llmc
