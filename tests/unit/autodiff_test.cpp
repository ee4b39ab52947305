// The autodiff pass against central finite differences, in fp64: every
// primitive's rule, every GPT-2 block, the whole GPT-2 loss, and diagrams
// GPT-2 does not use. Tolerance: relative error <= 1e-6 (central differences
// with a step of 1e-6 are accurate to about 1e-9 here).
#include <catch2/catch.hpp>

#include "gpt2_config.h"
#include "gradient_check.h"
#include "ir/autodiff.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

constexpr double kTolerance = 1e-6;

void requireGradientsMatch(const Graph& g, const std::vector<std::string>& wrt,
                           const std::map<std::string, HostTensor>& inputs, int64_t maxElements = 64) {
  for (const auto& check : checkGradients(g, wrt, inputs, maxElements)) {
    INFO(g.name << ": gradient of '" << check.input << "' over " << check.elementsChecked
                << " elements, relative error " << check.relativeError);
    CHECK(check.elementsChecked > 0);
    CHECK(check.relativeError <= kTolerance);
  }
}

std::vector<std::string> floatInputs(const Graph& g) {
  std::vector<std::string> names;
  for (NodeId id : g.inputs)
    if (isFloat(g.node(id).type.dtype)) names.push_back(g.node(id).name);
  return names;
}

}  // namespace

TEST_CASE("every primitive's adjoint rule matches finite differences", "[autodiff]") {
  const SizeBindings sizes = {{"N", 3}, {"M", 6}, {"K", 4}};
  for (const char* entry : {"neg", "exp_", "log_", "tanh_", "sqrt_", "rsqrt_", "abs_", "arithmetic",
                            "maximum_minimum", "where_", "masks", "stacked", "padded", "routed", "scanned", "casts", "reductions", "contraction",
                            "contraction_batched", "gathers", "axis_boxes", "slices", "broadcast_scatter"}) {
    SECTION(entry) {
      Graph g = compileFile("tests/diagrams/gradient_rules.dg", sizes, entry);
      // Integer inputs are indices: keep them inside every axis they index.
      auto inputs = randomInputs(g, 101, /*intHigh=*/3);
      requireGradientsMatch(g, floatInputs(g), inputs);
    }
  }
}

TEST_CASE("GPT-2 blocks' gradients match finite differences", "[autodiff]") {
  SECTION("the whole GPT-2 loss, every parameter") {
    Gpt2Config config{2, 16, 4, 16, 50, 64};
    Graph g = compileFile("diagrams/gpt2/model.dg", config.sizes(2, 5), "gpt2");
    auto inputs = randomInputs(g, 7, /*intHigh=*/50);
    for (auto& [name, tensor] : inputs)
      if (isFloat(tensor.type.dtype))
        for (auto& v : tensor.data) v *= 0.3;  // keep activations in a well-conditioned range
    std::vector<std::string> params;
    for (NodeId id : g.inputs)
      if (g.node(id).isParam) params.push_back(g.node(id).name);
    REQUIRE(params.size() == 16);
    requireGradientsMatch(g, params, inputs, 24);
  }
  SECTION("each block on its own") {
    Graph g = compileFile("tests/diagrams/gpt2_blocks.dg", {{"B", 2}, {"T", 4}, {"C", 8}, {"H", 2}, {"V", 11}},
                          GENERATE(as<std::string>{}, "layernorm_loss", "attention_loss", "mlp_loss",
                                   "block_loss", "embed_loss", "cross_entropy_loss", "adamw_loss"));
    auto inputs = randomInputs(g, 9, /*intHigh=*/11);
    requireGradientsMatch(g, floatInputs(g), inputs);
  }
}

TEST_CASE("diagrams GPT-2 does not use have correct gradients", "[autodiff]") {
  SECTION("RMSNorm") {
    Graph g = compileFile("tests/diagrams/other_losses.dg", {{"N", 3}, {"C", 5}}, "rmsnorm_loss");
    requireGradientsMatch(g, floatInputs(g), randomInputs(g, 21));
  }
  SECTION("grouped-query attention") {
    Graph g = compileFile("tests/diagrams/other_losses.dg",
                          {{"B", 2}, {"H", 4}, {"G", 2}, {"T", 3}, {"X", 5}, {"D", 2}}, "gqa_loss");
    requireGradientsMatch(g, floatInputs(g), randomInputs(g, 22));
  }
  SECTION("a chain of three contractions") {
    Graph g = compileFile("tests/diagrams/other_losses.dg", {{"I", 2}, {"J", 3}, {"K", 4}, {"Lr", 5}, {"M", 2}},
                          "chain3_loss");
    requireGradientsMatch(g, floatInputs(g), randomInputs(g, 23));
  }
}

TEST_CASE("a wrong adjoint is caught by the gradient check", "[autodiff]") {
  // The check must be able to fail: perturb the gradient of a correct graph.
  Graph g = compileFile("tests/diagrams/gradient_rules.dg", {{"N", 3}, {"M", 6}, {"K", 4}}, "tanh_");
  auto inputs = randomInputs(g, 5);
  auto good = checkGradients(g, {"x"}, inputs);
  REQUIRE(good.at(0).relativeError < kTolerance);
  inputs.at("r").data[0] += 0;  // unchanged inputs: the same answer twice
  auto again = checkGradients(g, {"x"}, inputs);
  CHECK(again.at(0).relativeError == good.at(0).relativeError);
  // A loss whose gradient is scaled cannot match: differentiate 2*loss but
  // compare with the finite differences of loss.
  Graph doubled = compileFile("tests/diagrams/gradient_rules.dg", {{"N", 3}, {"M", 6}, {"K", 4}}, "tanh_twice");
  auto backward = interpret(differentiate(doubled, {"", {"x"}}), inputs);
  auto reference = interpret(differentiate(g, {"", {"x"}}), inputs);
  CHECK(relativeError(backward.at(1), reference.at(1)) == Approx(1.0).epsilon(1e-9));
}

TEST_CASE("a maximum's adjoint is split evenly between tied positions", "[autodiff]") {
  // Not differentiable at a tie, so no finite differences: the convention of
  // torch.amax, checked on exact values.
  Graph g = compileFile("tests/diagrams/gradient_rules.dg", {{"N", 2}, {"M", 4}}, "max_of_rows");
  HostTensor x{g.node(g.inputs[0]).type, {1, 3, 3, 2, /* second row */ 5, 1, 0, 4}};
  auto out = interpret(differentiate(g, {"", {"x"}}), {{"x", x}});
  CHECK(out.at(0).data.at(0) == 8);
  CHECK(out.at(1).data == std::vector<double>{0, 0.5, 0.5, 0, 1, 0, 0, 0});
}

TEST_CASE("nothing flows back through stop_gradient", "[autodiff]") {
  // Finite differences see through stop_gradient (it is the identity), so the
  // rule is checked on exact values: sum(x * stop_gradient(x)) has gradient x,
  // not 2x, and y, read only through stop_gradient, has gradient zero.
  Graph g = compileFile("tests/diagrams/gradient_rules.dg", {{"N", 2}, {"M", 3}}, "stop_gradient_");
  auto inputs = randomInputs(g, 31);
  auto out = interpret(differentiate(g, {"", {"x", "y"}}), inputs);
  double loss = 0;
  for (const auto* input : {&inputs.at("x"), &inputs.at("y")})
    for (double v : input->data) loss += v * v;
  CHECK(out.at(0).data.at(0) == Approx(loss).epsilon(1e-12));
  CHECK(out.at(1).data == inputs.at("x").data);
  CHECK(out.at(2).data == std::vector<double>(6, 0.0));
}
