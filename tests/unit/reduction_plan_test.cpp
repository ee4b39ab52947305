// planReduction (runtime/train/reduction_plan.h): which gradient arrays
// a data-parallel step averages when, derived from the step's launches. On a
// diagram GPT-2 does not use: a stack of tanh layers whose per-layer
// gradients autodiff stacks back over the layer axis.
#include "reduction_plan.h"

#include <catch2/catch.hpp>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

CudaModule layerStackStep(int64_t layers, const EmitOptions& emit = {}) {
  static const Target target = loadTarget("sm_90a");
  PipelineOptions p;
  p.path = testing::repoPath("tests/diagrams/layer_stack.dg");
  p.sizes = {{"N", 256}, {"C", 64}, {"L", layers}};
  p.grad = true;
  p.target = &target;
  const Graph g = compileToIR(p);
  return emitCuda(g, planKernels(g, target, p.cost), target, emit);
}

int bufferNamed(const CudaModule& m, const std::string& name) {
  for (size_t b = 0; b < m.buffers.size(); ++b)
    if (m.buffers[b].name == name) return static_cast<int>(b);
  FAIL("no buffer " << name);
  return -1;
}

// Every rule the runtime relies on: each array averaged once after its last
// writer, every later launch that touches it waiting, every gradient value
// covered (elements: a per-layer source may be stored wider than its output).
void requireSound(const CudaModule& m, const ReductionPlan& plan, int64_t gradientElements) {
  std::map<int, size_t> startOf;
  int64_t bytes = 0, elements = 0;
  for (size_t k = 0; k < plan.buckets.size(); ++k) {
    if (k > 0) REQUIRE(plan.buckets[k].afterLaunch >= plan.buckets[k - 1].afterLaunch);
    for (int b : plan.buckets[k].buffers) {
      REQUIRE(startOf.count(b) == 0);
      startOf[b] = plan.buckets[k].afterLaunch;
      bytes += m.buffers[static_cast<size_t>(b)].bytes;
      elements += m.buffers[static_cast<size_t>(b)].elements;
    }
  }
  CHECK(bytes == plan.bytes);
  CHECK(elements == gradientElements);
  for (size_t i = 0; i < m.launches.size(); ++i)
    for (const LaunchParam& p : m.launches[i].params) {
      auto it = startOf.find(p.buffer);
      if (it == startOf.end()) continue;
      if (p.written) REQUIRE(i <= it->second);  // nothing writes an array once its average has started
      if (i > it->second) {
        bool waits = false;
        for (int k : plan.waits[i])
          for (int b : plan.buckets[static_cast<size_t>(k)].buffers) waits |= b == p.buffer;
        INFO("launch " << m.launches[i].name << " touches " << m.buffers[static_cast<size_t>(p.buffer)].name);
        REQUIRE(waits);
      }
    }
}

}  // namespace

TEST_CASE("per-layer gradients are averaged as each layer's backward ends, the stacking copies wait",
          "[overlapped_reduction]") {
  const CudaModule m = layerStackStep(3);
  const int64_t gradientElements = m.buffers[static_cast<size_t>(bufferNamed(m, "grad_w"))].elements +
                                   m.buffers[static_cast<size_t>(bufferNamed(m, "grad_b"))].elements;
  // Small buckets: one per launch that finishes arrays.
  const ReductionPlan plan = planReduction(m, {"grad_w", "grad_b"}, 1);
  requireSound(m, plan, gradientElements);
  // Three layers: a bucket starts after each launch that finishes a layer's
  // weight or bias gradient (one launch or two per layer, as fusion made
  // them), all before the copies that stack them.
  std::set<size_t> starts;
  for (const ReductionPlan::Bucket& bucket : plan.buckets) starts.insert(bucket.afterLaunch);
  CHECK(starts.size() >= 3);
  CHECK(starts.size() <= 6);
  CHECK(plan.overlappedBytes == plan.bytes);
  // The outputs themselves are not averaged: their per-layer sources are.
  for (const ReductionPlan::Bucket& bucket : plan.buckets)
    for (int b : bucket.buffers) CHECK(m.buffers[static_cast<size_t>(b)].graphOutputs.empty());
  // The first layer's gradients (the last the backward makes) start before
  // the copies, and the stacking copy of each output waits.
  for (const char* output : {"grad_w", "grad_b"}) {
    const int g = bufferNamed(m, output);
    for (size_t i = 0; i < m.launches.size(); ++i)
      for (const LaunchParam& p : m.launches[i].params)
        if (p.buffer == g && p.written) CHECK(!plan.waits[i].empty());
  }
}

TEST_CASE("one large bucket starts when the last gradient is final", "[overlapped_reduction]") {
  const CudaModule m = layerStackStep(2);
  const ReductionPlan plan = planReduction(m, {"grad_w", "grad_b", "grad_s"}, int64_t{1} << 40);
  REQUIRE(plan.buckets.size() == 1);
  requireSound(m, plan,
               m.buffers[static_cast<size_t>(bufferNamed(m, "grad_w"))].elements +
                   m.buffers[static_cast<size_t>(bufferNamed(m, "grad_b"))].elements +
                   m.buffers[static_cast<size_t>(bufferNamed(m, "grad_s"))].elements);
}

TEST_CASE("a gradient output without stacked sources is averaged whole after its writer", "[overlapped_reduction]") {
  // The loss weight's gradient: written by a kernel of the backward, no copy.
  const CudaModule m = layerStackStep(2);
  const ReductionPlan plan = planReduction(m, {"grad_s"}, 1);
  const int s = bufferNamed(m, "grad_s");
  REQUIRE(plan.buckets.size() == 1);
  CHECK(plan.buckets[0].buffers == std::vector<int>{s});
  requireSound(m, plan, m.buffers[static_cast<size_t>(s)].elements);
}

TEST_CASE("per-layer gradients that lie in their stacked output are averaged where they lie", "[overlapped_reduction]") {
  // As llmc-train emits its step: the gradients kept in f32, so that every
  // layer's (a matmul's, a sum's) is stored as its output is and written
  // where it lies there (BufferDesc::within), with no copy.
  EmitOptions emit;
  emit.f32Values = {"grad_w", "grad_b"};
  const CudaModule m = layerStackStep(3, emit);
  for (const KernelLaunch& l : m.launches) CHECK(l.role != "copy");
  const int w = bufferNamed(m, "grad_w"), b = bufferNamed(m, "grad_b");
  const ReductionPlan plan = planReduction(m, {"grad_w", "grad_b"}, 1);
  requireSound(m, plan, m.buffers[static_cast<size_t>(w)].elements + m.buffers[static_cast<size_t>(b)].elements);
  // Three parts of each, averaged one by one as the backward finishes them.
  std::map<int, int> parts;
  for (const ReductionPlan::Bucket& bucket : plan.buckets)
    for (int p : bucket.buffers) ++parts[m.buffers[static_cast<size_t>(p)].within];
  CHECK(parts == std::map<int, int>{{w, 3}, {b, 3}});
  // The first layer's are final with the step's last launch; the others before.
  CHECK(plan.overlappedBytes > 0);
  CHECK(plan.overlappedBytes < plan.bytes);
}
