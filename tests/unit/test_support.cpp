#include "test_support.h"

#include "driver/pipeline.h"

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

std::map<std::string, HostTensor> randomInputs(const Graph& g, uint64_t seed, double intHigh) {
  std::map<std::string, HostTensor> inputs;
  for (NodeId id : g.inputs) {
    const Node& n = g.node(id);
    ++seed;
    inputs[n.name] = isFloat(n.type.dtype) ? randomNormal(n.type, seed) : randomUniform(n.type, seed, 0, intHigh);
  }
  return inputs;
}

}  // namespace llmc::testing
