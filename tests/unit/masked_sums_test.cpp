// Masked sums as contractions with their mask (compiler/ir/masked_sums.cpp):
// where the target prices the contraction cheaper, a running sum reads the
// 0/1 matrix of positions, and the graph computes the same values, forward
// and backward; a running maximum and a mask over the value's own points stay.
#include <catch2/catch.hpp>

#include <cmath>

#include "driver/pipeline.h"
#include "interpreter.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

int contractions(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == Op::Contract;
  return n;
}

Graph untargeted(const std::string& file, const std::string& entry, const SizeBindings& sizes, bool grad) {
  PipelineOptions p;
  p.path = testing::repoPath(file);
  p.entry = entry;
  p.sizes = sizes;
  p.grad = grad;
  return compileToIR(p);
}

}  // namespace

TEST_CASE("running sums become contractions with the triangular mask, same values", "[masked-sums]") {
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"B", 2}, {"T", 300}, {"C", 77}};
  const Graph plain = untargeted("tests/diagrams/scans.dg", "scans", sizes, false);
  const Graph planned = testing::compileFor("tests/diagrams/scans.dg", "scans", sizes, false, target);
  // The inclusive and the exclusive running sum; the running maximum stays a reduction.
  CHECK(contractions(plain) == 0);
  CHECK(contractions(planned) == 2);
  CHECK(testing::largestRelativeDifference(plain, planned, 5) <= 1e-9);
}

TEST_CASE("causal linear attention by scan: contractions with the mask, same values and gradients",
          "[masked-sums]") {
  const Target target = loadTarget("sm_80");
  const SizeBindings sizes = {{"B", 1}, {"H", 2}, {"T", 130}, {"D", 24}, {"E", 40}};
  const char* file = "benchmarks/diagrams/linear_attention.dg";
  for (bool grad : {false, true}) {
    const std::string entry = grad ? "linear_attention_loss" : "linear_attention";
    const Graph plain = untargeted(file, entry, sizes, grad);
    const Graph planned = testing::compileFor(file, entry, sizes, grad, target);
    CHECK(contractions(planned) > contractions(plain));
    CHECK(testing::largestRelativeDifference(plain, planned, 5) <= 1e-9);
  }
}

TEST_CASE("a mask over the value's own points is no contraction", "[masked-sums]") {
  const Target target = loadTarget("sm_90a");
  // where(x > 0, x, 0) summed: the condition adds no axis.
  const SizeBindings sizes = {{"N", 300}, {"C", 500}};
  const Graph planned = testing::compileFor("tests/diagrams/masked_sums.dg", "positive_part", sizes, false, target);
  CHECK(contractions(planned) == 0);
}
