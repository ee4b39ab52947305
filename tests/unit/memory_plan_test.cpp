// The device memory plan (compiler/planning/memory_plan.h): arrays whose lifetimes
// overlap never share bytes, the arena is no smaller than the most bytes alive
// at one launch, and arrays the caller places stay out of it.
#include "planning/memory_plan.h"

#include <catch2/catch.hpp>
#include <algorithm>
#include <random>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "lowering/lowering.h"
#include "planning/target.h"
#include "report/pseudocode.h"
#include "test_support.h"

using namespace llmc;

namespace {

// A module of `launches` launches over arrays of the given sizes; launch i
// touches the arrays listed for it.
CudaModule syntheticModule(const std::vector<int64_t>& bytes, const std::vector<std::vector<int>>& touches) {
  CudaModule m;
  for (size_t b = 0; b < bytes.size(); ++b) {
    BufferDesc d;
    d.name = "a" + std::to_string(b);
    d.bytes = bytes[b];
    m.buffers.push_back(d);
  }
  for (size_t i = 0; i < touches.size(); ++i) {
    KernelLaunch l;
    l.name = "k" + std::to_string(i);
    for (int b : touches[i]) l.params.push_back({b, true});
    m.launches.push_back(l);
  }
  return m;
}

// A diagram of the repository emitted for sm_90a with f32 storage (as
// llmc-train emits its optimizer).
CudaModule f32Module(const std::string& path, const std::string& entry, const SizeBindings& sizes) {
  const Target target = loadTarget("sm_90a");
  PipelineOptions p;
  p.path = testing::repoPath(path);
  p.entry = entry;
  p.sizes = sizes;
  p.target = &target;
  const Graph g = compileToIR(p);
  EmitOptions e;
  e.storage = StorageType::F32;
  return emitCuda(g, planKernels(g, target, p.cost), target, e);
}

// Every pair of arrays alive at the same launch occupies disjoint bytes, but
// for an output written in place over an input: the same offset, and alive
// together only at the launch that is the input's last and the output's first,
// which declared the pair (KernelLaunch::inPlace).
void requireSound(const CudaModule& m, const MemoryPlan& plan) {
  for (const auto& [output, input] : plan.inPlace) {
    const size_t o = static_cast<size_t>(output), i = static_cast<size_t>(input);
    REQUIRE(plan.offsets[o] == plan.offsets[i]);
    REQUIRE(m.buffers[o].bytes == m.buffers[i].bytes);
    const int64_t at = plan.lifetimes[o].first;
    REQUIRE(at == plan.lifetimes[i].second);
    const std::vector<std::pair<int, int>>& declared = m.launches.at(static_cast<size_t>(at)).inPlace;
    REQUIRE(std::find(declared.begin(), declared.end(), std::pair<int, int>{output, input}) != declared.end());
  }
  auto inPlace = [&](size_t a, size_t b) {
    for (const auto& [output, input] : plan.inPlace)
      if ((output == static_cast<int>(a) && input == static_cast<int>(b)) ||
          (output == static_cast<int>(b) && input == static_cast<int>(a)))
        return true;
    return false;
  };
  for (size_t a = 0; a < m.buffers.size(); ++a)
    for (size_t b = a + 1; b < m.buffers.size(); ++b) {
      if (plan.offsets[a] == MemoryPlan::kOutside || plan.offsets[b] == MemoryPlan::kOutside) continue;
      const auto [fa, la] = plan.lifetimes[a];
      const auto [fb, lb] = plan.lifetimes[b];
      if (fa > lb || fb > la || inPlace(a, b)) continue;  // never alive together, or checked above
      const bool disjoint = plan.offsets[a] + m.buffers[a].bytes <= plan.offsets[b] ||
                            plan.offsets[b] + m.buffers[b].bytes <= plan.offsets[a];
      INFO(m.buffers[a].name << " and " << m.buffers[b].name);
      REQUIRE(disjoint);
    }
  for (size_t b = 0; b < m.buffers.size(); ++b) {
    if (plan.offsets[b] == MemoryPlan::kOutside) continue;
    REQUIRE(plan.offsets[b] % 256 == 0);
    REQUIRE(plan.offsets[b] + m.buffers[b].bytes <= plan.arenaBytes);
  }
  REQUIRE(plan.arenaBytes >= plan.peakLiveBytes);
  REQUIRE(plan.arenaBytes <= plan.separateBytes);
}

}  // namespace

TEST_CASE("arrays alive at different times share bytes; those alive together never do", "[memory_plan]") {
  // a0 lives over launches 0-1, a1 over 1-2, a2 over 3-4: a2 can reuse a0's bytes, a1 cannot.
  const CudaModule m = syntheticModule({1024, 1024, 1024}, {{0}, {0, 1}, {1}, {2}, {2}});
  const MemoryPlan plan = planMemory(m, {false, false, false});
  requireSound(m, plan);
  CHECK(plan.arenaBytes == 2048);
  CHECK(plan.separateBytes == 3072);
  CHECK(plan.offsets[2] == plan.offsets[0]);
}

TEST_CASE("arrays the caller places stay out of the arena; inputs and outputs live throughout", "[memory_plan]") {
  CudaModule m = syntheticModule({4096, 512, 512}, {{0, 1}, {1, 2}});
  m.buffers[0].graphInput = true;
  m.buffers[2].graphOutputs = {"out"};
  const MemoryPlan placed = planMemory(m, {true, false, false});
  CHECK(placed.offsets[0] == MemoryPlan::kOutside);
  requireSound(m, placed);
  CHECK(placed.lifetimes[2].second == 2);  // after the last launch: the caller reads it
  const MemoryPlan all = planMemory(m, {false, false, false});
  CHECK(all.lifetimes[0].first == -1);  // filled before the first launch
  requireSound(m, all);
}

TEST_CASE("random lifetimes plan soundly", "[memory_plan]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    const int arrays = 2 + static_cast<int>(rng() % 30), launches = 1 + static_cast<int>(rng() % 20);
    std::vector<int64_t> bytes;
    for (int b = 0; b < arrays; ++b) bytes.push_back(1 + static_cast<int64_t>(rng() % 100000));
    std::vector<std::vector<int>> touches(static_cast<size_t>(launches));
    for (int b = 0; b < arrays; ++b) {
      const int from = static_cast<int>(rng() % static_cast<unsigned>(launches));
      const int to = from + static_cast<int>(rng() % static_cast<unsigned>(launches - from));
      touches[static_cast<size_t>(from)].push_back(b);
      touches[static_cast<size_t>(to)].push_back(b);
    }
    const CudaModule m = syntheticModule(bytes, touches);
    requireSound(m, planMemory(m, std::vector<bool>(static_cast<size_t>(arrays), false)));
  }
}

TEST_CASE("an output written in place takes its input's bytes only where the launch declared it", "[memory_plan]") {
  // a0 made by k0, read last by k1, which makes a1 (read by k2); a2 is alive throughout.
  CudaModule m = syntheticModule({4096, 4096, 1024}, {{0, 2}, {0, 1, 2}, {1, 2}});
  SECTION("declared: the same bytes, and the arena holds one of the two") {
    m.launches[1].inPlace = {{1, 0}};
    const MemoryPlan plan = planMemory(m, std::vector<bool>(3, false));
    requireSound(m, plan);
    CHECK(plan.offsets[1] == plan.offsets[0]);
    CHECK(plan.arenaBytes == 4096 + 1024);
    REQUIRE(plan.inPlace == std::vector<std::pair<int, int>>{{1, 0}});
  }
  SECTION("not declared: apart") {
    const MemoryPlan plan = planMemory(m, std::vector<bool>(3, false));
    requireSound(m, plan);
    CHECK(plan.arenaBytes == 2 * 4096 + 1024);
    CHECK(plan.inPlace.empty());
  }
  SECTION("declared, but the input is read after the launch: apart") {
    m.launches[2].params.push_back({0, false});
    m.launches[1].inPlace = {{1, 0}};
    const MemoryPlan plan = planMemory(m, std::vector<bool>(3, false));
    requireSound(m, plan);
    CHECK(plan.offsets[1] != plan.offsets[0]);
    CHECK(plan.inPlace.empty());
  }
  SECTION("declared, but the caller places the output: apart") {
    m.launches[1].inPlace = {{1, 0}};
    const MemoryPlan plan = planMemory(m, {false, true, false});
    requireSound(m, plan);
    CHECK(plan.offsets[1] == MemoryPlan::kOutside);
    CHECK(plan.inPlace.empty());
    CHECK(plan.callerInPlace.empty());
  }
  SECTION("declared, the caller places both: the caller may share them") {
    m.launches[1].inPlace = {{1, 0}};
    const MemoryPlan plan = planMemory(m, {true, true, false});
    CHECK(plan.inPlace.empty());
    REQUIRE(plan.callerInPlace == std::vector<std::pair<int, int>>{{1, 0}});
  }
  SECTION("declared, the caller places both, but the input is read after the launch: apart") {
    m.launches[2].params.push_back({0, false});
    m.launches[1].inPlace = {{1, 0}};
    const MemoryPlan plan = planMemory(m, {true, true, false});
    CHECK(plan.callerInPlace.empty());
  }
}

TEST_CASE("an optimizer's next state may take the present state's memory", "[memory_plan]") {
  // A diagram GPT-2 does not use: SGD with momentum, two outputs from one
  // elementwise launch, the weights' made from the velocity's too.
  const CudaModule m = f32Module("tests/lit/memory/momentum_sgd.dg", "", {{"N", 1 << 20}});
  const MemoryPlan plan = planMemory(m, graphInputsAndOutputs(m));
  auto shares = [&](const std::string& output, const std::string& input) { return callerMayShare(m, plan, output, input); };
  CHECK(shares("w_next", "w"));
  CHECK(shares("velocity_next", "velocity"));
  // The gradient is read by the same launch but the caller keeps it: no pair
  // can name an output the launch does not write.
  for (const auto& [output, input] : plan.callerInPlace) CHECK(m.buffers[static_cast<size_t>(output)].name != "g");
}

TEST_CASE("a training step's arrays fit an arena far smaller than one allocation each", "[memory_plan]") {
  // A diagram GPT-2 does not use: a two-layer MLP with a residual, trained.
  const Target target = loadTarget("sm_90a");
  PipelineOptions p;
  p.path = testing::repoPath("tests/lit/memory/residual_mlp.dg");
  p.sizes = {{"N", 4096}, {"C", 256}};
  p.grad = true;
  p.target = &target;
  const Graph g = compileToIR(p);
  const CudaModule m = emitCuda(g, planKernels(g, target, p.cost), target, {});
  const MemoryPlan plan = planMemory(m, std::vector<bool>(m.buffers.size(), false));
  requireSound(m, plan);
  CHECK(plan.arenaBytes < plan.separateBytes);
  // Lifetimes nest here (the forward's activations outlive the backward's
  // temporaries): the placement reaches the least any plan needs.
  CHECK(plan.arenaBytes == plan.peakLiveBytes);
}

TEST_CASE("where placing the largest first leaves gaps, another order is taken", "[memory_plan]") {
  // A gated MLP trained at sizes no tile divides: its operands are staged
  // into aligned rows for the tensor cores, arrays whose lifetimes chain
  // between the larger ones. Largest first left the arena 36.2 MiB where 32.2
  // are alive at once; the longest-lived first packs them to that.
  const Target target = loadTarget("sm_90a");
  PipelineOptions p;
  p.path = testing::repoPath("benchmarks/diagrams/gated_mlp.dg");
  p.entry = "gated_mlp_loss";
  p.sizes = {{"N", 1000}, {"C", 771}, {"F", 2051}};
  p.grad = true;
  p.target = &target;
  const Graph g = compileToIR(p);
  const CudaModule m = emitCuda(g, lowerKernels(g, target, p.cost, {}), target, {});
  const MemoryPlan plan = planMemory(m, std::vector<bool>(m.buffers.size(), false));
  requireSound(m, plan);
  CHECK(plan.arenaBytes == plan.peakLiveBytes);
}

TEST_CASE("GPT-2's optimizer may update its master weights and moments in place", "[memory_plan]") {
  // llmc-train keeps one copy of them when so (1.4 GiB at d12); both the
  // whole optimizer step and ZeRO-1's clipped half.
  for (const char* entry : {"optimizer_step", "clipped_adamw"}) {
    const CudaModule m = f32Module("diagrams/gpt2/optimizer.dg", entry, {{"N", 1 << 20}});
    const MemoryPlan plan = planMemory(m, graphInputsAndOutputs(m));
    INFO(entry);
    CHECK(callerMayShare(m, plan, "w_next", "w"));
    CHECK(callerMayShare(m, plan, "m_next", "m"));
    CHECK(callerMayShare(m, plan, "v_next", "v"));
    CHECK_FALSE(callerMayShare(m, plan, "w", "w_next"));  // an input is never written over an output
  }
}

TEST_CASE("a part that lies within another buffer is placed with it and keeps it alive", "[memory_plan]") {
  // Buffer 0 holds parts 1 and 2 (written by launches 1 and 3); buffer 3 is
  // alive at launches 0 and 1 only, buffer 4 at launch 2 only.
  CudaModule m = syntheticModule({4096, 2048, 2048, 4096, 4096}, {{3}, {3, 1}, {4}, {2}});
  m.buffers[1].within = 0, m.buffers[1].withinOffset = 0;
  m.buffers[2].within = 0, m.buffers[2].withinOffset = 512;
  for (BufferDesc& d : m.buffers) d.elements = d.bytes / 4;
  const MemoryPlan plan = planMemory(m, std::vector<bool>(m.buffers.size(), false));
  CHECK(plan.offsets[1] == MemoryPlan::kOutside);
  CHECK(plan.offsets[2] == MemoryPlan::kOutside);
  REQUIRE(plan.offsets[0] != MemoryPlan::kOutside);
  // Buffer 0 lives from its first part's write (launch 1) to the last (launch 3).
  CHECK(plan.lifetimes[0] == std::pair<int64_t, int64_t>{1, 3});
  CHECK(plan.lifetimes[2] == plan.lifetimes[0]);
  // So it shares no byte with 3 (launch 1) or 4 (launch 2); 3 and 4 may share.
  auto apart = [&](size_t a, size_t b) {
    return plan.offsets[a] + m.buffers[a].bytes <= plan.offsets[b] || plan.offsets[b] + m.buffers[b].bytes <= plan.offsets[a];
  };
  CHECK(apart(0, 3));
  CHECK(apart(0, 4));
  CHECK(plan.arenaBytes == 8192);
  CHECK(plan.separateBytes == 3 * 4096);
}
