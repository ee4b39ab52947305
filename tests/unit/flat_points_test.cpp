// Flat points (planning/flat_points.h) as the writer writes them: which
// launches take them (rows no 8 divides; not rows of a multiple of 8, which
// the tiles' own 8 points take), that such a launch keeps the blocks its
// kernel was priced with, and that it stores 16 bytes at a time, its array's
// last 8 cut short. On sm_90a and sm_80, forward and a classifier's backward.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "lowering/lowering.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

struct Case {
  std::string path, entry;
  SizeBindings sizes;
  bool grad = false;
  int flat = 0;  // launches that take flat points, at least
};

bool takesFlatPoints(const KernelLaunch& l) { return l.source.find("of the flattened [") != std::string::npos; }

}  // namespace

TEST_CASE("a launch taking flat points keeps the blocks its kernel was priced with", "[lowering][flat-points]") {
  const std::vector<Case> cases = {
      {"tests/diagrams/flat_points.dg", "one_hot_rows", {{"N", 77}, {"V", 1001}}, false, 1},
      {"tests/diagrams/flat_points.dg", "batched_rows", {{"B", 3}, {"N", 77}, {"V", 1001}}, false, 2},
      {"benchmarks/diagrams/classifier.dg", "classifier", {{"N", 777}, {"V", 5003}, {"C", 771}}, true, 1},
      // Rows of a multiple of 8: the tiles' own 8 points, not flat ones.
      {"tests/diagrams/flat_points.dg", "one_hot_rows", {{"N", 77}, {"V", 1000}}, false, 0},
  };
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    for (const Case& c : cases) {
      const Graph g = testing::compileFor(c.path, c.entry, c.sizes, c.grad, target);
      CostOptions cost;
      EmitOptions emit;
      const std::vector<PlannedKernel> kernels = lowerKernels(g, target, cost, emit);
      const CudaModule module = emitCuda(g, kernels, target, emit);
      int flat = 0;
      for (const KernelLaunch& l : module.launches) {
        if (!takesFlatPoints(l)) continue;
        INFO(fmt::format("{} {} on {}: {}", c.path, c.entry, arch, l.name));
        ++flat;
        REQUIRE(l.kernel >= 0);
        CHECK(kernels.at(static_cast<size_t>(l.kernel)).cost.blocks == l.grid[0]);
        CHECK(l.source.find("llmc_store_bf16x8_upto(") != std::string::npos);
      }
      INFO(fmt::format("{} {} on {}", c.path, c.entry, arch));
      if (c.flat == 0) CHECK(flat == 0);
      else CHECK(flat >= c.flat);
    }
  }
}
