// The model prices the GEMM that is written (and the tensor-core stream): for every kernel that runs as a
// tile-library GEMM, the tile and split-K the writer uses are the ones the
// lowering stage priced (gemm_tiles.h), the priced partition cuts the GEMM
// into that many units, and no other tile or split of the library is priced
// cheaper. Checked on sm_90a and sm_80, forward and backward, on diagrams
// GPT-2 does not use at sizes no tile divides, and on GPT-2 itself.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "lowering/gemm_tiles.h"
#include "lowering/lowering.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

struct Case {
  std::string path, entry;
  SizeBindings sizes;
  bool grad = false;
};

}  // namespace

TEST_CASE("a GEMM's tile and split-K are the cheapest priced and the ones written", "[lowering][gemm]") {
  const std::vector<Case> cases = {
      {"benchmarks/diagrams/gated_mlp.dg", "gated_mlp", {{"N", 1000}, {"C", 771}, {"F", 2051}}},
      {"benchmarks/diagrams/gated_mlp.dg", "gated_mlp_loss", {{"N", 1000}, {"C", 776}, {"F", 2056}}, true},
      {"benchmarks/diagrams/rmsnorm_matmul.dg", "rmsnorm_matmul_loss", {{"N", 333}, {"C", 771}, {"F", 3083}}, true},
      {"benchmarks/diagrams/contraction_chain.dg", "contraction_chain_loss",
       {{"I", 1000}, {"J", 96}, {"K", 1000}, {"L", 40}, {"M", 771}, {"P", 333}}, true},
      {"benchmarks/diagrams/classifier.dg", "classifier", {{"N", 777}, {"V", 5003}, {"C", 771}}, true},
      {"tests/diagrams/linear_tokens.dg", "linear_loss", {{"N", 65536}, {"C", 128}, {"O", 64}}, true},
      {"diagrams/gpt2/model.dg", "gpt2",
       {{"B", 8}, {"T", 1024}, {"maxT", 1024}, {"L", 1}, {"C", 768}, {"H", 12}, {"V", 50257}, {"Vp", 50304}}, true},
  };
  int gemms = 0, split = 0, streams = 0, streamSplits = 0;
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    for (const Case& c : cases) {
      const Graph g = testing::compileFor(c.path, c.entry, c.sizes, c.grad, target);
      CostOptions cost;
      EmitOptions emit;
      const std::vector<PlannedKernel> kernels = lowerKernels(g, target, cost, emit);
      const CudaModule module = emitCuda(g, kernels, target, emit);
      for (const KernelLaunch& l : module.launches) {
        // A tensor-core stream is priced with its own tiles: its blocks.
        if (l.stream && l.kernel >= 0) {
          INFO(fmt::format("{} {} on {}: stream {}", c.path, c.entry, arch, l.name));
          CHECK(kernels.at(static_cast<size_t>(l.kernel)).cost.blocks == l.grid[0]);
          ++streams;
        }
        if (!l.gemm || l.kernel < 0) continue;
        const PlannedKernel& k = kernels.at(static_cast<size_t>(l.kernel));
        const TensorCoreGemm& gemm = *l.gemm;
        INFO(fmt::format("{} {} on {}: launch {} ({})", c.path, c.entry, arch, l.name, gemm.describe()));
        ++gemms;
        split += gemm.splits > 1;
        REQUIRE(k.gemmTile.chosen());
        CHECK(gemm.BM == k.gemmTile.bm);
        CHECK(gemm.BN == k.gemmTile.bn);
        CHECK(gemm.splits == k.gemmTile.splits);
        CHECK(gemm.clusterM == k.gemmTile.cluster);
        // The priced partition has the written launch's units, where the
        // rows and columns are one axis each (several are cut innermost first).
        if (gemm.m.size() == 1 && gemm.n.size() == 1)
          CHECK(k.cost.blocks == ceilDiv(gemm.M, gemm.BM) * ceilDiv(gemm.N, gemm.BN) * gemm.batches() * gemm.splits);
        // No tile or split the library has is priced cheaper (the kernel's
        // price includes its staging copies, which no tile changes), but for
        // a split along the stream, taken only at 2/3 of the best without.
        const auto helpers = k.cost.seconds.find("helpers");
        const double priced = k.cost.predicted - (helpers == k.cost.seconds.end() ? 0.0 : helpers->second);
        double plain = 1e30, alongStream = 1e30;
        for (GemmTile t : libraryTiles(gemm))
          for (t.splits = 1; t.splits <= maxSplits(gemm); ++t.splits) {
            const Partition other = gemmTilePartition(g, k, gemm, t);
            if (t.cluster > 1 && !target.tileClusters) break;  // not priced where the target has them off
            if (t.splits > 1 && (other.splitTiles.empty() || t.cluster > 1)) continue;  // clusters run unsplit
            double& best = other.splitTiles.count(k.shape.streamAxis) ? alongStream : plain;
            best = std::min(best, priceGemmTile(g, k, gemm, t, target, cost).predicted);
          }
        const bool splitAlongStream = k.partition.splitTiles.count(k.shape.streamAxis) > 0;
        streamSplits += splitAlongStream;
        // (within 1%: the launch is priced again as lowered, its f32 outputs as written)
        CHECK(priced == Approx(splitAlongStream ? alongStream : plain).epsilon(0.01));
        if (splitAlongStream) CHECK(alongStream <= 2.0 / 3.0 * plain);
        else CHECK((alongStream > 2.0 / 3.0 * plain || alongStream == 1e30));
      }
    }
  }
  CHECK(gemms >= 40);
  CHECK(streams >= 4);
  CHECK(split >= 1);
  CHECK(streamSplits >= 1);  // the linear layer's weight gradient
}

TEST_CASE("a GEMM's epilogue is priced by the operations it makes", "[lowering][gemm]") {
  // Two GEMMs of one shape (sizes no tile divides), one storing the product,
  // one making a GELU of it with a bias, priced with the same tile: the
  // second's epilogue is longer by its operations at the target's rate, and
  // without that rate in the target the two cost the same.
  const SizeBindings sizes = {{"M", 8000}, {"N", 3001}, {"K", 771}};
  const GemmTile tile = {.bm = 128, .bn = 128, .splits = 1, .pingPong = false};
  auto epilogueOf = [&](const std::string& entry, const Target& target) {
    const Graph g = testing::compileFor("tests/diagrams/epilogue_work.dg", entry, sizes, false, target);
    const std::vector<PlannedKernel> kernels = lowerKernels(g, target, CostOptions{}, EmitOptions{});
    for (const KernelLaunch& l : emitCuda(g, kernels, target, EmitOptions{}).launches)
      if (l.gemm && l.kernel >= 0)
        return priceGemmTile(g, kernels.at(static_cast<size_t>(l.kernel)), *l.gemm, tile, target, CostOptions{})
            .seconds.at("epilogue");
    FAIL("no tile-library GEMM in " << entry);
    return 0.0;
  };
  Target target = loadTarget("sm_90a");
  REQUIRE(target.tileEpilogueOpsPerSecondPerSM > 0);
  const double plain = epilogueOf("plain_product", target), activated = epilogueOf("activated_product", target);
  INFO("epilogue seconds: plain " << plain << ", activated " << activated);
  CHECK(activated > 1.5 * plain);
  target.tileEpilogueOpsPerSecondPerSM = 0;
  CHECK(epilogueOf("activated_product", target) == Approx(epilogueOf("plain_product", target)).epsilon(1e-9));
}

TEST_CASE("a GEMM's stages are filled from L2 at the tile library's rate where the target has one", "[lowering][gemm]") {
  // The same GEMM and tile priced with the L2 level's rate and with a tile
  // library rate twice it: the L2 term halves, and the prediction falls by
  // what the L2 term bounded (a tile whose operands are re-read along a long
  // dimension: 8000 x 3001 over 771).
  const SizeBindings sizes = {{"M", 8000}, {"N", 3001}, {"K", 771}};
  const GemmTile tile = {.bm = 128, .bn = 64, .splits = 1, .pingPong = false};
  auto priced = [&](const Target& target) {
    const Graph g = testing::compileFor("tests/diagrams/epilogue_work.dg", "plain_product", sizes, false, target);
    const std::vector<PlannedKernel> kernels = lowerKernels(g, target, CostOptions{}, EmitOptions{});
    for (const KernelLaunch& l : emitCuda(g, kernels, target, EmitOptions{}).launches)
      if (l.gemm && l.kernel >= 0)
        return priceGemmTile(g, kernels.at(static_cast<size_t>(l.kernel)), *l.gemm, tile, target, CostOptions{});
    FAIL("no tile-library GEMM");
    return KernelCost{};
  };
  Target target = loadTarget("sm_90a");
  target.tileL2BytesPerSecond = 0;
  const KernelCost atLevel = priced(target);
  target.tileL2BytesPerSecond = 2 * target.level("L2").attainableBandwidth;
  const KernelCost atTiles = priced(target);
  INFO("L2 seconds " << atLevel.seconds.at("L2") << " -> " << atTiles.seconds.at("L2") << ", predicted "
                     << atLevel.predicted << " -> " << atTiles.predicted);
  CHECK(atTiles.seconds.at("L2") == Approx(atLevel.seconds.at("L2") / 2).epsilon(1e-9));
  CHECK(atTiles.level("L2").seconds == Approx(atTiles.seconds.at("L2")).epsilon(1e-9));
  CHECK(atTiles.predicted <= atLevel.predicted);
  REQUIRE(atLevel.bottleneck == "L2");
  CHECK(atTiles.predicted < atLevel.predicted);
}

TEST_CASE("a cluster of two blocks reads the B tile they share from L2 once", "[lowering][gemm]") {
  // 8000 x 3001 over 771: 63 row tiles of 128, so the last pair has one tile
  // past M. Priced with 128x256 tiles alone and in clusters of two: the
  // cluster's L2 traffic is less by half of B's reads (each row tile reads
  // all of B), and written as the library runs it: __cluster_dims__, a grid
  // of whole clusters, B's box half the tile's columns.
  const SizeBindings sizes = {{"M", 8000}, {"N", 3001}, {"K", 771}};
  const Target target = loadTarget("sm_90a");
  const Graph g = testing::compileFor("tests/diagrams/epilogue_work.dg", "plain_product", sizes, false, target);
  const std::vector<PlannedKernel> kernels = lowerKernels(g, target, CostOptions{}, EmitOptions{});
  const CudaModule module = emitCuda(g, kernels, target, EmitOptions{});
  const KernelLaunch* launch = nullptr;
  for (const KernelLaunch& l : module.launches)
    if (l.gemm && l.kernel >= 0) launch = &l;
  REQUIRE(launch);
  const PlannedKernel& k = kernels.at(static_cast<size_t>(launch->kernel));
  GemmTile alone = {.bm = 128, .bn = 256, .splits = 1, .pingPong = false}, paired = alone;
  paired.cluster = 2;
  const KernelCost a = priceGemmTile(g, k, *launch->gemm, alone, target, CostOptions{});
  const KernelCost c = priceGemmTile(g, k, *launch->gemm, paired, target, CostOptions{});
  const double bReads = 63.0 * 3001 * 771 * CostOptions{}.storageBytes;  // each row tile reads all of B
  INFO("L2 bytes alone " << a.level("L2").movedBytes << ", clustered " << c.level("L2").movedBytes);
  const double saved = a.level("L2").movedBytes - c.level("L2").movedBytes;
  CHECK(saved == Approx(bReads / 2).epsilon(1e-6));
  CHECK(c.seconds.at("L2") < a.seconds.at("L2"));
  CHECK(c.predicted <= a.predicted);

  setenv("LLMC_GEMM_TILE", "128x256c2", 1);
  const std::vector<PlannedKernel> forced = lowerKernels(g, target, CostOptions{}, EmitOptions{});
  const CudaModule written = emitCuda(g, forced, target, EmitOptions{});
  unsetenv("LLMC_GEMM_TILE");
  int clustered = 0;
  for (const KernelLaunch& l : written.launches) {
    if (!l.gemm || l.kernel < 0) continue;
    ++clustered;
    CHECK(l.gemm->clusterM == 2);
    CHECK(l.gemm->splits == 1);
    CHECK(l.grid[0] % 2 == 0);
    CHECK(l.grid[0] == std::min<int64_t>(2 * 32 * 12, 2 * (target.smCount / 2)));  // 32 pairs x 12 column tiles
    REQUIRE(l.tensorMaps.size() == 2);
    CHECK(l.tensorMaps[1].box[1] == (l.gemm->b.kMajor ? 128u : 64u));
    CHECK(l.gemm->configType().find(", false, 0, 2>") != std::string::npos);
  }
  CHECK(clustered == 1);
  CHECK(written.source.find("__cluster_dims__(2, 1, 1)") != std::string::npos);
}
