#include "test_support.h"

#include <cmath>
#include <stdexcept>

#include "driver/pipeline.h"
#include "planning/fusion.h"
#include "planning/target.h"

namespace llmc::testing {

std::string repoPath(const std::string& relative) { return std::string(LLMC_SOURCE_DIR) + "/" + relative; }

Graph compileFile(const std::string& relative, const SizeBindings& sizes, const std::string& entry) {
  PipelineOptions options;
  options.path = repoPath(relative);
  options.sizes = sizes;
  options.entry = entry;
  return compileToIR(options);
}

Graph compileFor(const std::string& relative, const std::string& entry, const SizeBindings& sizes, bool grad,
                 const Target& target) {
  PipelineOptions options;
  options.path = repoPath(relative);
  options.entry = entry;
  options.sizes = sizes;
  options.grad = grad;
  options.target = &target;
  return compileToIR(options);
}

FusedGraph fusedFor(const std::string& relative, const std::string& entry, const SizeBindings& sizes, bool grad) {
  FusedGraph f{compileFor(relative, entry, sizes, grad, loadTarget("sm_90a")), {}};
  f.kernels = formKernels(f.graph);
  return f;
}

NodeId addInput(Graph& g, const std::string& name, const Type& type, bool param) {
  Node n;
  n.op = Op::Input;
  n.name = name;
  n.type = type;
  n.isParam = param;
  const NodeId id = g.add(std::move(n));
  g.inputs.push_back(id);
  return id;
}

std::map<std::string, HostTensor> randomInputs(const Graph& g, uint64_t seed, double intHigh) {
  std::map<std::string, HostTensor> inputs;
  for (NodeId id : g.inputs) {
    const Node& n = g.node(id);
    ++seed;
    inputs[n.name] = isFloat(n.type.dtype) ? randomNormal(n.type, seed) : randomUniform(n.type, seed, 0, intHigh);
  }
  return inputs;
}

double largestRelativeDifference(const Graph& plain, const Graph& rewritten, uint64_t seed, double intHigh) {
  const auto inputs = randomInputs(plain, seed, intHigh);
  const std::vector<HostTensor> expected = interpret(plain, inputs), got = interpret(rewritten, inputs);
  if (got.size() != expected.size()) throw std::runtime_error("the graphs have different outputs");
  double largest = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const HostTensor value = permuteTo(got[i], expected[i].type);
    for (size_t e = 0; e < value.data.size(); ++e) {
      const double d = std::abs(value.data[e] - expected[i].data[e]) / (1 + std::abs(expected[i].data[e]));
      if (std::isnan(d)) return d;  // a NaN on either side: no comparison may pass
      largest = std::max(largest, d);
    }
  }
  return largest;
}

}  // namespace llmc::testing
