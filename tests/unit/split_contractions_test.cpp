// Contractions over several axes split for a stream (compiler/ir/split_contractions.cpp),
// on diagrams GPT-2 does not use: the split graph computes the same values,
// splits where the stream's operand would otherwise be stored, and keeps
// a weight gradient over stored arrays whole.
#include <catch2/catch.hpp>

#include "driver/pipeline.h"
#include "ir/canonicalize.h"
#include "ir/split_contractions.h"
#include "planning/fuser.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

Graph backward(const std::string& entry, const SizeBindings& sizes) {
  PipelineOptions options;
  options.path = testing::repoPath("tests/diagrams/split_contractions.dg");
  options.entry = entry;
  options.sizes = sizes;
  options.grad = true;
  return compileToIR(options);
}

Graph split(const Graph& g) { return canonicalize(splitContractions(g, loadTarget("sm_90a"), CostOptions{})); }

// Contractions over several axes, and those of them with an operand a
// stream makes.
struct Counted {
  int several = 0, streamed = 0;
};
Counted contractionsOverSeveralAxes(const Graph& g) {
  Counted c;
  for (const Node& n : g.nodes)
    if (n.op == Op::Contract && n.axes.size() > 1) {
      ++c.several;
      c.streamed += fusion::remadeFromShortContraction(g, n.operands[0]) ||
                    fusion::remadeFromShortContraction(g, n.operands[1]);
    }
  return c;
}

}  // namespace

TEST_CASE("grouped-query attention's key and value gradients split over the query heads, same values",
          "[split_contractions]") {
  // Sizes no tile divides; T long enough that storing the probabilities
  // costs more than the partial sums.
  const Graph plain = backward("grouped_attention", {{"B", 2}, {"H", 6}, {"G", 2}, {"T", 300}, {"D", 5}});
  const Graph rewritten = split(plain);
  CHECK(contractionsOverSeveralAxes(plain).streamed == 2);  // dK and dV over r and t
  CHECK(contractionsOverSeveralAxes(rewritten).streamed == 0);
  // The partial sums keep the longest axis, the positions: contractions over t alone.
  int overT = 0;
  for (const Node& n : rewritten.nodes) overT += n.op == Op::Contract && n.axes == std::vector<std::string>{"t"};
  CHECK(overT == 2);
  for (uint64_t seed : {1, 2}) CHECK(testing::largestRelativeDifference(plain, rewritten, seed) <= 1e-12);
}

TEST_CASE("grouped cross-attention over position-major keys and grouped ALiBi split alike, same values",
          "[split_contractions]") {
  const Graph cross = backward("grouped_cross_attention", {{"B", 2}, {"T", 70}, {"X", 300}, {"H", 4}, {"G", 2}, {"D", 6}});
  const Graph alibi = backward("grouped_alibi", {{"B", 1}, {"H", 6}, {"G", 3}, {"T", 200}, {"D", 5}});
  for (const Graph* g : {&cross, &alibi}) {
    const Graph rewritten = split(*g);
    CHECK(contractionsOverSeveralAxes(*g).streamed == 2);
    CHECK(contractionsOverSeveralAxes(rewritten).streamed == 0);
    CHECK(testing::largestRelativeDifference(*g, rewritten, 5) <= 1e-12);
  }
}

TEST_CASE("multi-query attention splits over the heads; a group of one member is indexed, not summed",
          "[split_contractions]") {
  const Graph mqa = backward("multi_query_attention", {{"H", 3}, {"T", 500}, {"D", 7}});
  const Graph rewritten = split(mqa);
  CHECK(contractionsOverSeveralAxes(rewritten).streamed == 0);
  CHECK(testing::largestRelativeDifference(mqa, rewritten, 3) <= 1e-12);

  const Graph single = backward("grouped_attention", {{"B", 1}, {"H", 3}, {"G", 3}, {"T", 70}, {"D", 4}});
  const Graph indexed = split(single);
  CHECK(contractionsOverSeveralAxes(indexed).several == 0);
  int sumsOverR = 0;
  for (const Node& n : indexed.nodes) sumsOverR += n.op == Op::Reduce && n.axes == std::vector<std::string>{"r"};
  CHECK(sumsOverR == 0);
  CHECK(testing::largestRelativeDifference(single, indexed, 4) <= 1e-12);
}

TEST_CASE("a split that costs more than storing the operand is not made; stored operands stay whole",
          "[split_contractions]") {
  // Four positions against 16 channels: the probabilities [r t x] are
  // smaller than the partial sums [r x d].
  const Graph tiny = backward("grouped_attention", {{"B", 1}, {"H", 4}, {"G", 2}, {"T", 4}, {"D", 16}});
  CHECK(contractionsOverSeveralAxes(split(tiny)).streamed == 2);
  // The weight gradient contracts stored arrays over b and t: a GEMM, kept.
  const Graph linear = backward("linear_batches", {{"B", 3}, {"T", 500}, {"D", 9}, {"H", 11}});
  REQUIRE(contractionsOverSeveralAxes(linear).several == 1);
  CHECK(contractionsOverSeveralAxes(split(linear)).several == 1);
}
