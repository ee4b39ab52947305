// The performance model against its closed forms (docs/performance.md,
// "Partition and cost": a matmul's H and M), and the partition search's
// legality over many shapes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <random>

#include "analysis/step_skip.h"
#include "analysis/streamability.h"
#include "codegen/module.h"
#include "lowering/lowering.h"
#include "planning/cost_model.h"
#include "planning/fusion.h"
#include "planning/recomputed_work.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

const CostOptions kF32{4};  // 4 bytes per element: transfers in elements are bytes / 4

struct SingleKernel {
  Graph graph;
  Kernel kernel;
  KernelShape shape;
};

SingleKernel single(const std::string& entry, const SizeBindings& sizes, const Target& target) {
  SingleKernel s{compileFile("tests/diagrams/cost_kernels.dg", sizes, entry), {}, {}};
  auto kernels = formKernels(s.graph);
  REQUIRE(kernels.size() == 1);
  s.kernel = kernels[0];
  s.shape = kernelShape(s.graph, s.kernel, target, kF32);
  return s;
}

// The target with `bytes` of SMEM per block and registers enough to hold an
// accumulator tile of that size (to vary M). In the closed forms M is all the
// memory of the lower level: the tests compare with the on-chip bytes (SMEM
// and registers) that the chosen tiles use.
Target withSmem(Target t, int64_t bytes) {
  t.level("SMEM").maxPerBlock = bytes;
  t.level("SMEM").capacity = bytes;
  t.level("REG").maxPerThread = std::max<int64_t>(t.level("REG").maxPerThread, bytes / 256);
  return t;
}

}  // namespace

TEST_CASE("matmul transfers are abc(1/g_a + 1/g_c) + ac for the chosen tiles", "[cost]") {
  Target target = loadTarget("sm_90a");
  const double a = 1024, b = 768, c = 2048;
  auto k = single("matmul", {{"I", 1024}, {"K", 768}, {"J", 2048}}, target);
  REQUIRE(k.shape.streamAxis == "k");
  for (auto [ga, gc, s] : {std::tuple{64, 64, 32}, {128, 256, 64}, {256, 128, 16}, {1024, 64, 128}}) {
    Partition p{{{"i", ga}, {"j", gc}}, s};
    KernelCost cost = evaluate(k.graph, k.kernel, k.shape, p, target, kF32);
    double h = cost.level("L2").movedBytes / 4;
    CHECK(h == Approx(a * b * c * (1.0 / ga + 1.0 / gc) + a * c).epsilon(1e-12));
    // M: the output tile (in registers) plus the inputs' chunks, double-buffered (in SMEM).
    CHECK(cost.onChipBytes / 4 == Approx(ga * gc + 2.0 * s * (ga + gc)).epsilon(1e-12));
    CHECK(cost.level("SMEM").memoryBytes / 4 == Approx(2.0 * s * (ga + gc)).epsilon(1e-12));
    // HBM moves every array once.
    CHECK(cost.level("GMEM").movedBytes / 4 == Approx(a * b + b * c + a * c));
  }
}

TEST_CASE("the matmul optimum approaches 2abc/sqrt(M) + ac as M grows", "[cost]") {
  // The closed form assumes the whole of M holds the output tile (g = sqrt(M));
  // the model also holds the double-buffered input chunks, 2s(g_a + g_c), and
  // tiles are multiples of the tensor-core and coalescing constraints. Those
  // take a shrinking share of M as it grows: the ratio of the optimum's
  // transfers to the closed form must fall towards 1, within 15% at 16 MiB
  // (tolerance: the chunk share, 2*2s/g with s = 32 and g ~ 2000, is ~6%, plus
  // the tile grid's steps).
  // Large matrices, so that whole tiles divide them finely even at large M.
  const double a = 65536, b = 65536, c = 65536;
  double previous = INFINITY;
  for (int64_t kib : {64, 227, 1024, 4096, 16384}) {
    Target target = withSmem(loadTarget("sm_90a"), kib * 1024);
    auto k = single("matmul", {{"I", 65536}, {"K", 65536}, {"J", 65536}}, target);
    Partition best = searchPartition(k.graph, k.kernel, k.shape, target, kF32, Objective::Transfers);
    KernelCost cost = evaluate(k.graph, k.kernel, k.shape, best, target, kF32);
    double m = cost.onChipBytes / 4;  // the on-chip memory the chosen tiles use
    double ratio = cost.level("L2").movedBytes / 4 / (2 * a * b * c / std::sqrt(m) + a * c);
    INFO(kib << " KiB: tiles " << best.groupTiles["i"] << "x" << best.groupTiles["j"] << " chunk " << best.streamChunk
             << ", H / closed form = " << ratio);
    CHECK(cost.fits);
    CHECK(ratio >= 0.99);
    CHECK(ratio <= previous + 0.02);
    previous = ratio;
  }
  CHECK(previous < 1.15);
}

TEST_CASE("a stream of contractions takes warp-level mma.sync's rate; a matmul, the target's best", "[cost]") {
  // On Hopper the GEMM library issues wgmma (800 TFLOP/s measured) while a stream whose scores are
  // contractions at each position (and its products) runs on mma.sync (352 measured); on Ampere
  // mma.sync is the best there is, the same figure.
  const Target hopper = loadTarget("sm_90a"), ampere = loadTarget("sm_80");
  const ComputeUnit& bf16 = hopper.unit("tensor_bf16");
  REQUIRE(bf16.warpMmaAttainable < 0.5 * bf16.attainable);
  REQUIRE(ampere.unit("tensor_bf16").warpMmaAttainable == ampere.unit("tensor_bf16").attainable);
  const CostOptions bf16Storage{2};
  for (const char* entry : {"attention", "matmul"}) {
    const bool attention = std::string(entry) == "attention";
    auto k = single(entry,
                    attention ? SizeBindings{{"T", 4096}, {"X", 4096}, {"D", 64}}
                              : SizeBindings{{"I", 4096}, {"K", 4096}, {"J", 4096}},
                    hopper);
    const KernelShape shape = kernelShape(k.graph, k.kernel, hopper, bf16Storage);
    const Partition best = searchPartition(k.graph, k.kernel, shape, hopper, bf16Storage, Objective::Time);
    const KernelCost cost = evaluate(k.graph, k.kernel, shape, best, hopper, bf16Storage);
    const double rate = attention ? bf16.warpMmaAttainable : bf16.attainable;
    INFO(entry);
    CHECK(cost.seconds.at("tensor_bf16") == Approx(cost.work.at("tensor_bf16") / rate));
  }
}

TEST_CASE("a CUDA-core kernel of few threads is bound by the memory's latency (Little's law)", "[cost]") {
  const Target target = loadTarget("sm_90a");
  const double latency = target.level("GMEM").latency;
  REQUIRE(latency > 0);
  // 32 x 64 x 512 f32 summed over b into [64 512]: 4 MiB read.
  auto k = single("batch_sum", {{"B", 32}, {"T", 64}, {"C", 512}}, target);
  REQUIRE(k.shape.streamAxis == "b");
  const double loaded = 32.0 * 64 * 512 * 4;
  // f32 storage: a thread loads one value at a time. Tiles of 16 x 64: 32
  // blocks, each reading 16 x 64 x 32 values (its whole stream), 8 a thread
  // for more than its 256 threads: 8192 threads with a load each in flight.
  const Partition few{{{"t", 16}, {"c", 64}}, 8};
  const KernelCost cost = evaluate(k.graph, k.kernel, k.shape, few, target, kF32);
  REQUIRE(cost.blocks == 32);
  CHECK(cost.bottleneck == "latency");
  CHECK(cost.seconds.at("latency") == Approx(loaded * latency / (32 * 256 * 4.0)).epsilon(1e-12));
  CHECK(cost.seconds.at("latency") > cost.seconds.at("GMEM") / cost.waveEfficiency);
  // Tiles of 1 x 4 read 4 x 32 values: their 32 positions dealt to 4
  // slices of 8 (CudaWriter::streamSlices), 16 threads, each with 4 loads in
  // flight; 8192 blocks, 32 resident on each SM. 4 of c's 32-value segment
  // a tile: each row read moves the whole segment, 8 times the bytes.
  const KernelCost narrow = evaluate(k.graph, k.kernel, k.shape, Partition{{{"t", 1}, {"c", 4}}, 8}, target, kF32);
  REQUIRE(narrow.blocks == 8192);
  CHECK(narrow.seconds.at("latency") ==
        Approx(8 * loaded * latency / (132 * 32 * 16 * (kPointsInFlight * 4.0))).epsilon(1e-12));
  // bf16 storage: 16 bytes (8 values) a load, a thread's 8 points; the
  // tile's 128 threads of points in 2 slices, each thread with 4 loads in flight.
  const CostOptions bf16{2};
  auto half = single("batch_sum", {{"B", 32}, {"T", 64}, {"C", 512}}, target);
  half.shape = kernelShape(half.graph, half.kernel, target, bf16);
  const KernelCost wide = evaluate(half.graph, half.kernel, half.shape, few, target, bf16);
  CHECK(wide.seconds.at("latency") == Approx(loaded / 2 * latency / (32 * 256 * (kPointsInFlight * 16.0))).epsilon(1e-12));
  // The search gives it more blocks than 32: it is not latency-bound then.
  const Partition searched = searchPartition(k.graph, k.kernel, k.shape, target, kF32);
  const KernelCost best = evaluate(k.graph, k.kernel, k.shape, searched, target, kF32);
  CHECK(best.blocks > 32);
  CHECK(best.predicted < cost.predicted);

  // A grid that fills the device with 16-byte loads keeps more bytes in
  // flight than the bandwidth needs.
  auto large = single("batch_sum", {{"B", 32}, {"T", 4096}, {"C", 4096}}, target);
  large.shape = kernelShape(large.graph, large.kernel, target, bf16);
  const KernelCost full = evaluate(large.graph, large.kernel, large.shape,
                                   searchPartition(large.graph, large.kernel, large.shape, target, bf16), target, bf16);
  CHECK(full.bottleneck == "GMEM");
  CHECK(full.seconds.at("latency") < full.seconds.at("GMEM"));

  // Without a latency in the target file there is no such term; nor on the
  // tensor cores, whose pipelines keep stages of tiles in flight.
  Target unknown = target;
  unknown.level("GMEM").latency = 0;
  CHECK(evaluate(k.graph, k.kernel, k.shape, few, unknown, kF32).seconds.count("latency") == 0);
  auto mm = single("matmul", {{"I", 256}, {"K", 256}, {"J", 256}}, target);
  const KernelCost matmul = evaluate(mm.graph, mm.kernel, mm.shape, searchPartition(mm.graph, mm.kernel, mm.shape, target, kF32),
                                     target, kF32);
  CHECK(matmul.seconds.count("latency") == 0);
}

TEST_CASE("a sliced stream's threads wait their rounds of loads one after another", "[cost]") {
  // A column sum over 333 rows of 771 channels, shared out 41 rows a block:
  // 13 x 9 = 117 blocks, each 64 channels in 4 slices of the block's threads.
  // A slice's thread takes ceil(41 / 4) = 11 rows, 4 at a time: 3 rounds of
  // the memory's latency, though the bytes over the device's threads make 2.2.
  const Target target = loadTarget("sm_90a");
  const double latency = target.level("GMEM").latency;
  auto k = single("batch_sum", {{"B", 333}, {"T", 1}, {"C", 771}}, target);
  REQUIRE(k.shape.streamAxis == "b");
  const Partition shared{{{"t", 1}, {"c", 64}}, 64, {{"b", 41}}};
  const KernelCost cost = evaluate(k.graph, k.kernel, k.shape, shared, target, kF32);
  REQUIRE(cost.blocks == 117);
  CHECK(cost.seconds.at("latency") == Approx(3 * latency).epsilon(1e-12));
  // Its 9 blocks of each column add their sums atomically, an add each per
  // channel, L2 taking each 128-byte line's 32 adds of each block one after
  // another: 9 x 32 a line.
  CHECK(cost.seconds.at("atomics") ==
        Approx(std::max(9.0 * 771 / target.atomicAddsPerSecond, 9 * 32 * target.sameAddressAtomicSeconds)));
  // 8 rows a block are too few to deal out: a thread takes all 8, 2 rounds.
  const Partition finer{{{"t", 1}, {"c", 64}}, 64, {{"b", 8}}};
  const KernelCost fine = evaluate(k.graph, k.kernel, k.shape, finer, target, kF32);
  CHECK(fine.seconds.at("latency") == Approx(2 * latency).epsilon(1e-12));
}

TEST_CASE("a stream pays for the steps a comparison of positions leaves it to run", "[cost]") {
  const Target target = loadTarget("sm_90a");
  // T = 1000: 16 blocks of 64 queries, 16 steps of 64 keys, the last of each partial. A key x >= t
  // runs the steps from the block's first query on: block i runs 16 - i steps of 16.
  auto masked = single("suffix_attention", {{"T", 1000}, {"D", 64}}, target);
  auto open = single("attention", {{"T", 1000}, {"X", 1000}, {"D", 64}}, target);
  REQUIRE(masked.shape.streamAxis == "x");
  const Partition p = searchPartition(masked.graph, masked.kernel, masked.shape, target, kF32);
  const KernelCost withMask = evaluate(masked.graph, masked.kernel, masked.shape, p, target, kF32);
  const KernelCost without = evaluate(open.graph, open.kernel, open.shape,
                                      searchPartition(open.graph, open.kernel, open.shape, target, kF32), target, kF32);
  const double run = 136.0 / 256.0;  // (16 + 15 + ... + 1) of 16 x 16
  CHECK(withMask.work.at("tensor_tf32") == Approx(without.work.at("tensor_tf32") * run).epsilon(1e-12));

  const NodeId compare = [&] {
    for (const Node& n : masked.graph.nodes)
      if (n.op == Op::Compare) return n.id;
    return NodeId{-1};
  }();
  REQUIRE(compare >= 0);
  const std::set<NodeId> members(masked.kernel.nodes.begin(), masked.kernel.nodes.end());
  const std::optional<StreamStepSkip> skip =
      findStepSkip(masked.graph, analyzeStream(masked.graph, members, "x"), "t", "x");
  REQUIRE(skip);
  REQUIRE(skip->conditions.size() == 1);
  CHECK(skip->conditions[0].node == compare);
  CHECK(stepsRun(*skip, "t", 1000, 1000, 64, 64).fraction == Approx(run));
  CHECK(stepsRun(*skip, "t", 1000, 1000, 64, 64).longest == 16);  // the last rows' block runs every step
  CHECK(stepSkipped(*skip, "t", 64, 127, 0, 63));        // keys before every query of the block
  CHECK_FALSE(stepSkipped(*skip, "t", 64, 127, 64, 127));  // the diagonal step
  CHECK_FALSE(stepSkipped(*skip, "t", 0, 63, 960, 999));   // the last, partial step
}

TEST_CASE("the attention optimum approaches 2qd + 4qxd^2/M as M grows", "[cost]") {
  // The closed form counts the Q tile and the output accumulator, 2 g_q d, as
  // all of M; the model also holds the K and V chunks (double-buffered) and
  // the score tile g_q x s, which shrink as a share of M as it grows (s stays
  // small). Within 20% at 16 MiB.
  const double q = 262144, x = 262144, d = 64;
  double previous = INFINITY;
  for (int64_t kib : {96, 227, 1024, 4096, 16384}) {
    Target target = withSmem(loadTarget("sm_90a"), kib * 1024);
    auto k = single("attention", {{"T", 262144}, {"X", 262144}, {"D", 64}}, target);
    REQUIRE(k.shape.streamAxis == "x");
    Partition best = searchPartition(k.graph, k.kernel, k.shape, target, kF32, Objective::Transfers);
    KernelCost cost = evaluate(k.graph, k.kernel, k.shape, best, target, kF32);
    double m = cost.onChipBytes / 4;  // the on-chip memory the chosen tiles use
    double ratio = cost.level("L2").movedBytes / 4 / (2 * q * d + 4 * q * x * d * d / m);
    INFO(kib << " KiB: tile " << best.groupTiles["t"] << " chunk " << best.streamChunk << ", H / closed form = "
             << ratio);
    CHECK(cost.fits);
    CHECK(ratio >= 0.99);
    CHECK(ratio <= previous + 0.03);  // the tile grid's steps (1/16 of a tile) may cost a little
    previous = ratio;
  }
  CHECK(previous < 1.2);
}

TEST_CASE("every chosen partition is legal, for many shapes", "[cost]") {
  std::mt19937 rng(2026);
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Target target = loadTarget(arch);
    for (int trial = 0; trial < 40; ++trial) {
      bool attention = trial % 2;
      auto pick = [&](int lo, int hi) { return static_cast<int64_t>(lo + rng() % static_cast<unsigned>(hi - lo)); };
      SizeBindings sizes = attention ? SizeBindings{{"T", pick(1, 3000)}, {"X", pick(1, 3000)}, {"D", pick(8, 160)}}
                                     : SizeBindings{{"I", pick(1, 5000)}, {"K", pick(1, 5000)}, {"J", pick(1, 5000)}};
      if (trial == 1) sizes = {{"T", 1000}, {"X", 1000}, {"D", 80}};  // a multiple of no tile
      auto k = single(attention ? "attention" : "matmul", sizes, target);
      Partition p = searchPartition(k.graph, k.kernel, k.shape, target, kF32);
      KernelCost cost = evaluate(k.graph, k.kernel, k.shape, p, target, kF32);
      INFO(arch << " " << (attention ? "attention" : "matmul") << " trial " << trial);
      CHECK(cost.fits);
      CHECK(cost.level("SMEM").memoryBytes <= target.level("SMEM").maxPerBlock);
      for (const auto& [axis, tile] : p.groupTiles) {
        auto m = k.shape.tileMultiple.find(axis);
        // (Tiles under a coalescing segment are priced, not refused.)
        const bool belowSegment = k.shape.segment.count(axis) && tile < k.shape.segment.at(axis);
        if (m != k.shape.tileMultiple.end()) CHECK((tile % m->second == 0 || belowSegment));
        CHECK(tile >= 1);
      }
      if (auto m = k.shape.tileMultiple.find(k.shape.streamAxis); m != k.shape.tileMultiple.end() && p.streamChunk > 0)
        CHECK(p.streamChunk % m->second == 0);
      CHECK(cost.predicted > 0);
    }
  }
}

// Extents above 2^62 made the doubling wrap, and the loop ran until memory
// ran out. The candidates are ascending multiples of the constraint ending at
// the whole axis rounded up, for any extent.
TEST_CASE("tile candidates end for every extent", "[cost_model]") {
  CHECK(tileCandidates(1000, 1, 4) == std::vector<int64_t>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1000});
  CHECK(tileCandidates(100, 64, 4) == std::vector<int64_t>{64, 128});
  CHECK(tileCandidates(8, 64, 16) == std::vector<int64_t>{64});
  CHECK(tileCandidates(640, 64, 4) == std::vector<int64_t>{64, 128, 192, 256, 320, 384, 448, 512, 640});
  for (int64_t extent : {(int64_t{1} << 62) + 1, INT64_MAX - 1, INT64_MAX})
    for (int64_t multiple : {int64_t{1}, int64_t{8}, int64_t{192}}) {
      const auto tiles = tileCandidates(extent, multiple, 4);
      REQUIRE(!tiles.empty());
      CHECK(tiles.size() < 200);
      CHECK(std::is_sorted(tiles.begin(), tiles.end()));
      CHECK(tiles.back() >= extent - multiple);
      for (int64_t t : tiles) CHECK(t % multiple == 0);
    }
}

TEST_CASE("the CUDA-core code redoes a chain's inner contractions for each point of the outer ones", "[cost]") {
  // out = ((a b) c) d held in one kernel: (a b)[i k] is computed inside the
  // loop over k of each point (i, l) of (a b) c, and that inside the loop
  // over l of each point (i, m) of out. Streamed over l, the outer sum takes
  // each position's (a b) c once.
  const Graph g = compileFile("tests/diagrams/cost_kernels.dg", {{"I", 5}, {"J", 7}, {"K", 11}, {"L", 13}, {"M", 17}},
                              "chain3");
  Kernel k;
  NodeId ab = -1, abc = -1, out = -1;
  for (const Node& n : g.nodes) {
    if (n.op == Op::Input) continue;
    k.nodes.push_back(n.id);
    if (n.op == Op::Contract) (ab < 0 ? ab : abc < 0 ? abc : out) = n.id;
  }
  REQUIRE(out >= 0);
  std::map<NodeId, double> redone = recomputationFactors(g, k);
  CHECK(redone.at(out) == 1);
  CHECK(redone.at(abc) == 17);
  CHECK(redone.at(ab) == 13 * 17);
  k.streamAxis = "l";
  redone = recomputationFactors(g, k);
  CHECK(redone.at(abc) == 1);
  CHECK(redone.at(ab) == 13);
  // Priced on the CUDA cores, the kernel's products are the redone ones.
  const Target hopper = loadTarget("sm_90a");
  CostOptions cudaCores = kF32;
  cudaCores.tensorCores = false;
  k.streamAxis = "";
  const KernelShape shape = kernelShape(g, k, hopper, cudaCores);
  const KernelCost cost = evaluate(g, k, shape, searchPartition(g, k, shape, hopper, cudaCores), hopper, cudaCores);
  const double products = 5.0 * 7 * 11 * (13 * 17) + 5.0 * 11 * 13 * 17 + 5.0 * 13 * 17;
  CHECK(cost.work.at("fp32_contraction") == Approx(2 * products));
}

TEST_CASE("a window's steps are skipped only where the mask hides every key of the block", "[cost]") {
  // pos(x) <= pos(t) and pos(x) > pos(t) - W: a step is skipped where the
  // condition is false at every (query, key) of its box, checked point by
  // point; a block runs its steps from the first unskipped to the last.
  const Target target = loadTarget("sm_90a");
  const int64_t T = 1000, W = 100;
  auto k = single("window_attention", {{"T", T}, {"D", 64}, {"W", W}}, target);
  const std::set<NodeId> members(k.kernel.nodes.begin(), k.kernel.nodes.end());
  const std::optional<StreamStepSkip> skip = findStepSkip(k.graph, analyzeStream(k.graph, members, "x"), "t", "x");
  REQUIRE(skip);
  int64_t run = 0, all = 0, longest = 0;
  for (int64_t r = 0; r < T; r += 64) {
    int64_t first = -1, last = -1;
    for (int64_t c = 0; c < T; c += 64, ++all) {
      bool hidden = true;  // the mask false at every point of the box
      for (int64_t t = r; t < std::min(r + 64, T); ++t)
        for (int64_t x = c; x < std::min(c + 64, T); ++x) hidden = hidden && !(x <= t && x > t - W);
      const bool skipped = stepSkipped(*skip, "t", r, std::min(r + 64, T) - 1, c, std::min(c + 64, T) - 1);
      INFO("rows " << r << ", step " << c);
      CHECK((!skipped || hidden));  // never skips a step with a key the mask keeps
      CHECK(skipped == hidden);     // and, for a window, skips every other
      if (!skipped) last = c / 64, first = first < 0 ? c / 64 : first;
    }
    run += first < 0 ? 0 : last - first + 1;
    longest = std::max(longest, first < 0 ? 0 : last - first + 1);
  }
  CHECK(stepsRun(*skip, "t", T, T, 64, 64).fraction == Approx(double(run) / double(all)));
  CHECK(stepsRun(*skip, "t", T, T, 64, 64).longest == longest);
  CHECK(longest == 3);  // 64 rows and the 100 keys before them span 163 positions: 3 steps
  CHECK(double(run) / double(all) < 0.2);
}

TEST_CASE("values the writer stores in f32 under bf16 storage are priced at 4 bytes", "[cost]") {
  // GELU's bias gradient named as an f32 output (as llmc-train names its
  // gradients): the kernel that writes it moves 2 bytes an element more than
  // with the output in bf16, and no other kernel's bytes change.
  const Target target = loadTarget("sm_90a");
  const Graph g = compileFor("tests/diagrams/collect_terms.dg", "gelu_loss", {{"N", 512}, {"M", 1024}}, true, target);
  auto gmemBytes = [&](const EmitOptions& emit) {
    std::map<std::string, double> bytes;
    for (const PlannedKernel& k : lowerKernels(g, target, CostOptions{}, emit))
      bytes[std::to_string(k.kernel.id)] = k.cost.level("GMEM").movedBytes;
    return bytes;
  };
  EmitOptions f32;
  f32.f32Values = {"grad_b"};
  const auto plain = gmemBytes(EmitOptions{}), wide = gmemBytes(f32);
  REQUIRE(plain.size() == wide.size());
  int changed = 0;
  for (const auto& [id, bytes] : plain) {
    INFO("kernel " << id << ": " << bytes << " -> " << wide.at(id) << " bytes");
    if (wide.at(id) != bytes) {
      ++changed;
      CHECK(wide.at(id) - bytes == Approx(1024 * 2));
    }
  }
  CHECK(changed == 1);
}
