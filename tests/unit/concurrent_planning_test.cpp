// Planning is a pure function of a diagram, its sizes and the target: the
// trainer plans its modules at once, a thread each (runtime/train/gpu_trainer.cpp),
// and must get what planning them one after another gives. Each module here is
// planned alone, then all at once on threads, several times; the CUDA source and
// the launch descriptions must be the same byte for byte.
#include <catch2/catch.hpp>

#include <future>
#include <string>
#include <vector>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "lowering/lowering.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

struct ModuleToPlan {
  std::string file, entry;
  SizeBindings sizes;
  bool grad;
};

std::string plan(const ModuleToPlan& m, const Target& target) {
  PipelineOptions p;
  p.path = testing::repoPath(m.file);
  p.entry = m.entry;
  p.sizes = m.sizes;
  p.grad = m.grad;
  p.target = &target;
  const Graph graph = compileToIR(p);
  EmitOptions e;
  e.storage = StorageType::BF16;
  const CudaModule module = emitCuda(graph, lowerKernels(graph, target, {}, e), target, e);
  return module.source + launchesToJson(module).dump();
}

}  // namespace

TEST_CASE("modules planned at once on threads are those planned one by one", "[planning]") {
  const Target target = loadTarget("sm_90a");
  const SizeBindings gpt2 = {{"B", 3}, {"T", 37}, {"L", 2}, {"C", 40}, {"H", 5}, {"V", 101}, {"Vp", 104}, {"maxT", 40}};
  const std::vector<ModuleToPlan> modules = {
      {"diagrams/gpt2/model.dg", "gpt2", gpt2, true},
      {"diagrams/gpt2/model.dg", "gpt2", gpt2, false},
      {"diagrams/gpt2/model.dg", "gpt2_logits", gpt2, false},
      {"diagrams/gpt2/optimizer.dg", "optimizer_step", {{"N", 1000}}, false},
      {"benchmarks/diagrams/gated_mlp.dg", "gated_mlp_loss", {{"N", 100}, {"C", 77}, {"F", 205}}, true},
  };
  std::vector<std::string> alone;
  for (const ModuleToPlan& m : modules) alone.push_back(plan(m, target));
  for (int round = 0; round < 3; ++round) {
    std::vector<std::future<std::string>> together;
    for (const ModuleToPlan& m : modules)
      together.push_back(std::async(std::launch::async, [&, m] { return plan(m, target); }));
    for (size_t i = 0; i < modules.size(); ++i) {
      INFO(modules[i].file << " " << modules[i].entry << (modules[i].grad ? " --grad" : "") << ", round " << round);
      CHECK(together[i].get() == alone[i]);
    }
  }
}
