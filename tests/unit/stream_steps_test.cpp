// A tensor-core stream's steps (lowering.cpp, addStreamStepLatency): a block
// steps through its positions one step after another, so a small grid is
// bound by its longest block's steps, a full one by its work as before.
#include <catch2/catch.hpp>

#include "driver/backend.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

std::vector<PlannedKernel> planned(const std::string& file, const std::string& entry, const SizeBindings& sizes,
                                   const Target& target) {
  const Graph g = testing::compileFor(file, entry, sizes, false, target);
  BackendOptions options;
  options.until = "unfuse";
  return compileBackend(g, target, options).kernels;
}

const PlannedKernel* streamKernel(const std::vector<PlannedKernel>& kernels) {
  for (const PlannedKernel& k : kernels)
    if (k.cost.engine.find("stream") != std::string::npos) return &k;
  return nullptr;
}

}  // namespace

TEST_CASE("a small attention grid is bound by its blocks' steps", "[cost][stream]") {
  const Target target = loadTarget("sm_90a");
  // 16 heads of 1000 causal positions: 256 blocks, the last rows' blocks
  // stepping through all 16 steps of 64 keys.
  const auto kernels = planned("benchmarks/diagrams/rotary_attention.dg", "rotary_attention",
                               {{"B", 2}, {"H", 8}, {"T", 1000}, {"D", 64}}, target);
  const PlannedKernel* k = streamKernel(kernels);
  REQUIRE(k != nullptr);
  CHECK(k->cost.bottleneck == "steps");
  CHECK(k->cost.predicted >= 16 * target.tensorStreamStepSeconds);
}

TEST_CASE("a full attention grid stays bound by its work", "[cost][stream]") {
  const Target target = loadTarget("sm_90a");
  const auto kernels = planned("diagrams/gpt2/model.dg", "gpt2",
                               {{"B", 8}, {"T", 1024}, {"maxT", 1024}, {"L", 1}, {"C", 768}, {"H", 12}, {"V", 50257},
                                {"Vp", 50304}},
                               target);
  const PlannedKernel* k = streamKernel(kernels);
  REQUIRE(k != nullptr);
  CHECK(k->cost.bottleneck != "steps");
  CHECK(k->cost.seconds.at("steps") < k->cost.predicted);
}

TEST_CASE("a window's stream is bound by the steps its width spans", "[cost][stream]") {
  const Target target = loadTarget("sm_90a");
  // The same 256 blocks as the causal stream above, but each block of 64
  // queries sees only the 256 keys before it: 5 steps, not the last rows' 16.
  const auto window = planned("benchmarks/diagrams/window_attention.dg", "window_attention",
                              {{"B", 2}, {"H", 8}, {"T", 1000}, {"D", 64}, {"W", 256}}, target);
  const auto causal = planned("benchmarks/diagrams/rotary_attention.dg", "rotary_attention",
                              {{"B", 2}, {"H", 8}, {"T", 1000}, {"D", 64}}, target);
  const PlannedKernel* w = streamKernel(window);
  const PlannedKernel* c = streamKernel(causal);
  REQUIRE(w != nullptr);
  REQUIRE(c != nullptr);
  CHECK(w->shape.longestSteps == 5);
  CHECK(c->shape.longestSteps == 16);
  const double fill = target.tileFillSeconds;
  CHECK(w->cost.seconds.at("steps") - fill == Approx((c->cost.seconds.at("steps") - fill) * 5.0 / 16.0).epsilon(0.01));
}
