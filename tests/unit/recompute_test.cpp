// Store or recompute (compiler/ir/recompute.cpp), decided by the cost model on
// diagrams GPT-2 does not use: what the training step's kernels store in GMEM.
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "driver/pipeline.h"
#include "interpreter.h"
#include "planning/fusion.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

Graph trainingStep(const std::string& entry, const SizeBindings& sizes, const std::vector<std::string>& wrt,
                   const Target* target) {
  PipelineOptions options;
  options.path = testing::repoPath("tests/diagrams/recompute.dg");
  options.entry = entry;
  options.sizes = sizes;
  options.grad = true;
  options.wrt = wrt;
  options.target = target;
  return compileToIR(options);
}

// The values some kernel writes to GMEM that have every one of `axes`
// (those of the forward pass only, or all).
std::vector<const Node*> storedWith(const Graph& g, const std::vector<std::string>& axes, bool forwardOnly) {
  std::vector<const Node*> out;
  for (const Kernel& k : formKernels(g))
    for (NodeId id : k.outputs) {
      const Node& n = g.node(id);
      if ((!forwardOnly || !n.adjoint) &&
          std::all_of(axes.begin(), axes.end(), [&](const std::string& a) { return n.type.has(a); }))
        out.push_back(&n);
    }
  return out;
}

}  // namespace

TEST_CASE("attention's backward recomputes the probabilities instead of storing them", "[recompute]") {
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"B", 8}, {"H", 12}, {"T", 1024}, {"D", 64}};
  // Without the recompute pass the forward stores arrays over both t and x
  // for the backward to read.
  CHECK_FALSE(storedWith(trainingStep("attention_loss", sizes, {"q", "k", "v"}, nullptr), {"t", "x"}, true).empty());
  // With it, no kernel stores anything of size B·H·T·T: the backward
  // recomputes the scores from q and k (2d operations per element cost less
  // than writing and reading 2 × 2 bytes), the probabilities from them and
  // the saved row statistics, and each of its streams (dK and dV over the
  // queries, dQ over the keys) makes its own copy of dP and dS.
  Graph step = trainingStep("attention_loss", sizes, {"q", "k", "v"}, &target);
  for (const Node* n : storedWith(step, {"t", "x"}, false)) FAIL("stored: " << n->name << " " << n->type.str());
}

TEST_CASE("the classifier stores its logits and their gradient, never the probabilities", "[recompute]") {
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"N", 4096}, {"C", 768}, {"V", 50304}};
  Graph step = trainingStep("classifier_loss", sizes, {"h", "wv"}, &target);
  // The logits (a contraction over 768 channels: recomputing costs more than
  // a write and a read) are stored. The backward's two matmuls over the
  // vocabulary and the rows read the logits' gradient, made elementwise from
  // the logits and the row statistics: stored once for the tensor cores
  // (planning/fusion.cpp, feedsContraction), not remade in each matmul's prologue.
  // Nothing else of that size is: not the probabilities.
  std::vector<const Node*> stored = storedWith(step, {"n", "v"}, false);
  int logits = 0, gradients = 0;
  for (const Node* n : stored) {
    INFO(n->name << " " << n->type.str());
    if (n->op == Op::Contract) ++logits;
    else if (n->adjoint || n->name.rfind("d_", 0) == 0) ++gradients;
    else FAIL("stored: " << n->name << " " << n->type.str());
  }
  CHECK(logits == 1);
  CHECK(gradients == 1);
}

TEST_CASE("the backward reads what the forward stores for itself rather than remaking it", "[recompute]") {
  // q = x·wq + bq is read as tiles by the forward's attention kernel, so the
  // forward stores it; remaking it would read a stored projection as large
  // (without its bias), which the forward would then store only for the
  // backward. Of the forward's arrays over (b, t, d), q with its bias and
  // the attention's output are stored, not the projection over c.
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"B", 4}, {"T", 256}, {"C", 768}, {"D", 64}};
  Graph step = trainingStep("projected_attention_loss", sizes, {"wq", "bq"}, &target);
  std::vector<const Node*> stored = storedWith(step, {"b", "t", "d"}, true);
  for (const Node* n : stored) UNSCOPED_INFO("stored: " << n->name << " " << opName(n->op) << " over " << fmt::format("{}", fmt::join(n->axes, " ")));
  REQUIRE(stored.size() == 2);
  for (const Node* n : stored) {
    if (n->op == Op::Contract) CHECK(n->axes == std::vector<std::string>{"x"});
    else CHECK(n->binary == BinaryOp::Add);
  }
}

TEST_CASE("a chain of products of one stored value is remade from it, its read shared", "[recompute]") {
  // a = h·(1 + 0.1·h·h·h): the derivative reads h·h and h·h·h. Each remade
  // alone reads h once, and each link remade on top of another shares that
  // read: the forward stores h (a contraction over 768 channels) and a (the
  // tensor cores' operand for w2's gradient), none of the links.
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"N", 1024}, {"C", 768}, {"F", 3072}, {"O", 768}};
  Graph step = trainingStep("cubic_mlp_loss", sizes, {"w1", "w2"}, &target);
  std::vector<const Node*> stored = storedWith(step, {"n", "f"}, true);
  for (const Node* n : stored) UNSCOPED_INFO("stored: " << n->name << " " << opName(n->op));
  REQUIRE(stored.size() == 2);
  CHECK(std::count_if(stored.begin(), stored.end(), [](const Node* n) { return n->op == Op::Contract; }) == 1);
}

TEST_CASE("a contraction read by two streams is made once when no stream takes it in", "[recompute]") {
  // The gradient of a running sum (a contraction over t with its mask, or
  // the blocked scan run from the end where that is priced cheaper:
  // planning/scan_layout.h) is read by k's gradient, a sum over e, and by
  // v's, a sum over d. Split for each stream it would be two, each a kernel
  // storing its result: the pass asks fusion and keeps it whole.
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"N", 8}, {"T", 256}, {"D", 32}};
  Graph step = trainingStep("scanned_products_loss", sizes, {"k", "v"}, &target);
  int storedGradients = 0;
  for (const Node* n : storedWith(step, {"n", "d", "e"}, false))
    storedGradients += n->adjoint && (n->op == Op::Contract || n->op == Op::Scan);
  CHECK(storedGradients == 1);
}

TEST_CASE("the recomputing training step computes the same values", "[recompute]") {
  // The pass only copies nodes and rewires readers: the interpreter must give
  // the same loss and gradients, bit for bit in f64, with and without it.
  const Target target = loadTarget("sm_90a");
  PipelineOptions options;
  options.path = testing::repoPath("diagrams/gpt2/model.dg");
  options.sizes = {{"B", 3}, {"T", 37}, {"maxT", 40}, {"L", 2}, {"C", 40}, {"H", 4}, {"V", 101}, {"Vp", 120}};
  options.grad = true;
  const Graph plain = compileToIR(options);
  options.target = &target;
  const Graph recomputing = compileToIR(options);
  REQUIRE(recomputing.nodes.size() > plain.nodes.size());
  const auto inputs = testing::randomInputs(plain, 11, 100);
  const auto expected = interpret(plain, inputs);
  const auto got = interpret(recomputing, inputs);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO(plain.outputs[i].name);
    CHECK(got[i].data == expected[i].data);
  }
}

TEST_CASE("a stack of layers remakes each activation beside its derivative instead of holding it", "[recompute]") {
  // Each layer's a = h·(1 + 0.1·h³) is stored by the forward (w2's matmul
  // reads it) and read by the backward (w2's gradient). Made elementwise
  // from h, which the backward reads anyway, it is remade in the GEMM that
  // computes a's derivative from h, written there once more for the weight
  // gradient, and no longer held from the forward to the backward: the
  // least memory any placement needs drops by a layer's a for each layer
  // but the last. Sizes no tile divides.
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"N", 1000}, {"C", 771}, {"F", 2051}, {"L", 3}};
  PipelineOptions options;
  options.path = testing::repoPath("tests/diagrams/recompute.dg");
  options.entry = "cubic_mlp_stack_loss";
  options.sizes = sizes;
  options.grad = true;
  options.target = &target;
  // The forward's elementwise values over (n, f) that a backward node reads.
  auto heldActivations = [](const Graph& g) {
    int held = 0;
    for (const Node& n : g.nodes)
      if (n.adjoint)
        for (NodeId o : n.operands) {
          const Node& operand = g.node(o);
          held += !operand.adjoint && operand.op == Op::Binary && operand.type.has("n") && operand.type.has("f") &&
                  !operand.type.has("c");
        }
    return held;
  };
  options.remaking.holdLess = false;
  const Graph timeAlone = compileToIR(options);
  CHECK(heldActivations(timeAlone) == 3);
  options.remaking.holdLess = true;
  const Graph holdingLess = compileToIR(options);
  CHECK(heldActivations(holdingLess) == 0);
  // Each remade a is stored by a kernel that holds a contraction (the GEMM
  // of its derivative), not by a kernel of its own that would read h again.
  int remadeStored = 0;
  for (const Kernel& k : formKernels(holdingLess)) {
    const bool contracts = std::any_of(k.nodes.begin(), k.nodes.end(), [&](NodeId id) {
      return holdingLess.node(id).op == Op::Contract;
    });
    for (NodeId id : k.outputs) {
      const Node& n = holdingLess.node(id);
      if (!n.adjoint || n.op != Op::Binary || n.type.has("c") || !n.type.has("n") || !n.type.has("f")) continue;
      const bool readByWeightGradient = std::any_of(holdingLess.nodes.begin(), holdingLess.nodes.end(), [&](const Node& r) {
        return r.op == Op::Contract && std::count(r.operands.begin(), r.operands.end(), id) && r.type.has("c2");
      });
      if (!readByWeightGradient) continue;
      ++remadeStored;
      CHECK(contracts);
    }
  }
  CHECK(remadeStored == 3);
  // And the values are those of the step as written, at sizes small enough
  // for the interpreter where the pass still remakes some layer's a.
  options.sizes = {{"N", 300}, {"C", 384}, {"F", 1000}, {"L", 2}};
  const Graph remade = compileToIR(options);
  options.remaking.holdLess = false;
  REQUIRE(heldActivations(remade) < heldActivations(compileToIR(options)));
  options.target = nullptr;
  const Graph plain = compileToIR(options);
  const auto inputs = testing::randomInputs(plain, 3, 1);
  const auto expected = interpret(plain, inputs);
  const auto got = interpret(remade, inputs);
  REQUIRE(got.size() == expected.size());
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i].data == expected[i].data);
}
