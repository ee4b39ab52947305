// Reassociation of a sum through a contraction (compiler/ir/reassociate.cpp), on
// diagrams GPT-2 does not use: the rewritten graph computes the same values.
#include <catch2/catch.hpp>

#include <cmath>

#include "driver/pipeline.h"
#include "interpreter.h"
#include "ir/canonicalize.h"
#include "ir/reassociate.h"
#include "test_support.h"

using namespace llmc;

namespace {

Graph forward(const std::string& entry) {
  PipelineOptions options;
  options.path = testing::repoPath("tests/diagrams/reassociate.dg");
  options.entry = entry;
  options.sizes = {{"N", 7}, {"M", 9}, {"D", 5}};
  return compileToIR(options);
}

int sums(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == Op::Reduce && node.reduce == ReduceOp::Sum;
  return n;
}

}  // namespace

TEST_CASE("a sum through a contraction becomes the contraction of the graph's inner product, same values",
          "[reassociate]") {
  const Graph plain = forward("weighted_readout");
  const Graph rewritten = canonicalize(reassociate(plain));
  // sum over m of -(a·b) w / M became -(a·o) / M: one sum fewer.
  CHECK(sums(rewritten) == sums(plain) - 1);
  for (uint64_t seed : {1, 2, 3}) {
    const auto inputs = testing::randomInputs(plain, seed);
    const auto expected = interpret(plain, inputs), got = interpret(rewritten, inputs);
    REQUIRE(got.size() == expected.size());
    for (size_t i = 0; i < got.size(); ++i)
      for (size_t e = 0; e < got[i].data.size(); ++e)
        CHECK(std::abs(got[i].data[e] - expected[i].data[e]) <= 1e-12 * (1 + std::abs(expected[i].data[e])));
  }
}

TEST_CASE("without the inner product in the graph the sum stays as written", "[reassociate]") {
  const Graph plain = forward("weighted_scores");
  const Graph rewritten = canonicalize(reassociate(plain));
  CHECK(sums(rewritten) == sums(plain));
  CHECK(rewritten.nodes.size() == plain.nodes.size());
}
