// The reference interpreter: runs any verified Graph on the CPU.
//
// It is the oracle every GPU kernel is tested against and the CPU path of
// training for tiny models. Each node is computed in full, in f32 or f64, and
// stored in the layout its type gives (row-major in type.axes order); operands
// are matched to the output by axis name, never by position.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "tensor.h"

namespace llmc {

enum class Precision { F32, F64 };

struct InterpreterOptions {
  // The arithmetic every node is computed and stored in.
  Precision precision = Precision::F64;
  // Round the values of bf16 and f16 nodes (inputs included) to that format,
  // ties to even, as storing them would.
  bool roundLowPrecision = true;
  // Values rounded to bf16 after they are computed, as a run that stores them
  // in bf16 would (the kernel boundaries of a GPU run with bf16 storage).
  std::set<NodeId> storedAsBf16 = {};
  // Float comparisons of operands rounded to bf16 first, as the generated
  // code compares them under bf16 storage (codegen/cuda_writer.cpp, Compare).
  bool compareAtBf16 = false;
  // Values of these nodes, besides the outputs, are kept to the end and
  // returned by interpretNodes (a GPU run's intermediate buffers checked
  // one by one).
  std::set<NodeId> keep = {};
  // Each float value (inputs included) moved after it is computed by a random
  // relative amount up to `perturb` (up to bf16's 2^-8 where it is bf16 or
  // stored as bf16), a sum's or contraction's relative to its terms'
  // magnitudes, whose rounding it carries (a copy of an operand's values, a
  // maximum or a view, is not moved: it rounds nothing): what roundings anywhere in the
  // graph can do to the outputs (the fuzzer's measure of how ill-conditioned
  // a diagram is). 0: none.
  double perturb = 0;
  uint64_t perturbSeed = 0;
};

// Runs g on the given inputs, keyed by input name, and returns its outputs in
// g.outputs order. An input may come in any axis order; it must otherwise have
// exactly the input's type. Inputs the graph does not have are ignored.
// Throws std::runtime_error on a missing or mistyped input and on values an
// operation cannot take (a gather index out of range, an integer division by
// zero), naming the node's source location.
std::vector<HostTensor> interpret(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                  const InterpreterOptions& options = {});

// Runs g as interpret does and returns the value of every node in
// options.keep, keyed by node.
std::map<NodeId, HostTensor> interpretNodes(const Graph& g, const std::map<std::string, HostTensor>& inputs,
                                            const InterpreterOptions& options);

}  // namespace llmc
