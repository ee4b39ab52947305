// Collecting like terms (compiler/ir/collect_terms.cpp): the backward passes of
// tests/diagrams/collect_terms.dg and random sums of products take fewer
// operations and compute the same values.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "driver/pipeline.h"
#include "interpreter.h"
#include "ir/canonicalize.h"
#include "ir/collect_terms.h"
#include "ir/graph_builder.h"
#include "test_support.h"

using namespace llmc;

namespace {

Graph backward(const std::string& entry, bool collect) {
  PipelineOptions options;
  options.path = testing::repoPath("tests/diagrams/collect_terms.dg");
  options.entry = entry;
  options.sizes = {{"N", 5}, {"M", 7}};
  options.grad = true;
  options.collectTerms = collect;
  return compileToIR(options);
}

// Elementwise arithmetic: what the pass rewrites and what a kernel executes per element.
int operations(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == Op::Unary || node.op == Op::Binary;
  return n;
}

}  // namespace

TEST_CASE("like terms: a cubic's and GELU's gradients take fewer operations, same values", "[collect-terms]") {
  for (const char* entry : {"cubic_loss", "gelu_loss", "broadcast_products"}) {
    CAPTURE(entry);
    const Graph plain = backward(entry, false), collected = backward(entry, true);
    CHECK(operations(collected) < operations(plain));
    for (uint64_t seed : {1, 2, 3}) CHECK(testing::largestRelativeDifference(plain, collected, seed) <= 1e-12);
  }
  // GELU's derivative: 14 operations after the forward's tanh became 8 (hidden·hidden, two
  // for the polynomial, times (1 - t²), times hidden, (1 + t)·0.5, the sum, times the
  // incoming gradient); the three terms of x·x·x are one.
  CHECK(operations(backward("gelu_loss", false)) - operations(backward("gelu_loss", true)) >= 5);
}

TEST_CASE("like terms: a sum that cancels is left as written, inf - inf stays NaN", "[collect-terms]") {
  const Graph plain = backward("cancelling", false), collected = backward("cancelling", true);
  auto inputs = testing::randomInputs(plain, 7);
  for (double& x : inputs.at("x").data) x = 800;  // exp(800·w) overflows for w > 0.9 or so
  for (double& w : inputs.at("w").data) w = 1;
  const auto expected = interpret(plain, inputs), got = interpret(collected, inputs);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i)
    for (size_t e = 0; e < got[i].data.size(); ++e) {
      CHECK(std::isnan(got[i].data[e]) == std::isnan(expected[i].data[e]));
      if (!std::isnan(expected[i].data[e])) CHECK(got[i].data[e] == expected[i].data[e]);
    }
}

TEST_CASE("like terms: random sums of products, same values, never more operations", "[collect-terms]") {
  const Axis n{"n", 3}, m{"m", 4};
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    Graph g;
    g.name = "random_sum";
    std::vector<NodeId> values = {testing::addInput(g, "a", Type{DType::F32, {n}}),
                                  testing::addInput(g, "b", Type{DType::F32, {m}}),
                                  testing::addInput(g, "c", Type{DType::F32, {n, m}})};
    GraphBuilder b(g, {});
    auto pick = [&] { return values[std::uniform_int_distribution<size_t>(0, values.size() - 1)(rng)]; };
    for (int i = 0; i < 14; ++i) {
      const int kind = std::uniform_int_distribution<int>(0, 9)(rng);
      NodeId made;
      if (kind < 3) made = b.binary(BinaryOp::Mul, pick(), pick());
      else if (kind < 5) made = b.binary(BinaryOp::Add, pick(), pick());
      else if (kind < 6) made = b.binary(BinaryOp::Sub, pick(), pick());
      else if (kind < 7) made = b.unary(UnaryOp::Neg, pick());
      else if (kind < 8) made = b.binary(BinaryOp::Mul, pick(), b.constant(std::uniform_int_distribution<int>(-3, 3)(rng) * 0.5, DType::F32));
      else if (kind < 9) made = b.unary(UnaryOp::Tanh, pick());  // an atom
      else made = b.binary(BinaryOp::Add, b.binary(BinaryOp::Mul, pick(), pick()), b.binary(BinaryOp::Mul, pick(), pick()));
      values.push_back(made);
    }
    // Every value an output, so that the pass sees sums read elsewhere too; and the last.
    g.outputs.push_back({"last", values.back()});
    g.outputs.push_back({"middle", values[values.size() / 2 + 1]});
    const Graph plain = canonicalize(g), collected = canonicalize(collectTerms(plain));
    CHECK(operations(collected) <= operations(plain));
    CHECK(testing::largestRelativeDifference(plain, collected, seed) <= 1e-9);
  }
}
