// Helpers shared by the unit tests: compile a diagram file of the repository
// and run it in the reference interpreter.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "frontend/program.h"
#include "interpreter.h"
#include "ir/ir.h"
#include "planning/fusion.h"
#include "tensor.h"

namespace llmc {
struct Target;
}

namespace llmc::testing {

// A path inside the repository.
std::string repoPath(const std::string& relative);

// Compiles `relative` (a repository path) with the given sizes.
Graph compileFile(const std::string& relative, const SizeBindings& sizes, const std::string& entry = "");

// Compiles the diagram `entry` of `relative` for `target` (the recompute
// pass included, as llmc-compile runs it), with its backward where `grad`.
Graph compileFor(const std::string& relative, const std::string& entry, const SizeBindings& sizes, bool grad,
                 const Target& target);

// That graph for sm_90a and the kernels fusion makes of it.
struct FusedGraph {
  Graph graph;
  std::vector<Kernel> kernels;
};
FusedGraph fusedFor(const std::string& relative, const std::string& entry, const SizeBindings& sizes, bool grad = false);

// Appends an input (a trainable parameter where `param`) to g's signature.
NodeId addInput(Graph& g, const std::string& name, const Type& type, bool param = false);

// Random inputs for every input of g: normal floats, integers uniform in
// [0, intHigh). Each input gets its own seed derived from `seed`.
std::map<std::string, HostTensor> randomInputs(const Graph& g, uint64_t seed, double intHigh = 2);

// The largest difference between the outputs of two graphs of the same
// outputs (a pass's input and its result) on randomInputs(plain, seed,
// intHigh), each relative to 1 + |plain's value|, outputs matched in order
// and laid out as plain's.
double largestRelativeDifference(const Graph& plain, const Graph& rewritten, uint64_t seed, double intHigh = 2);

}  // namespace llmc::testing
