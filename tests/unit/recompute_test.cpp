// Store or recompute (compiler/recompute.cpp), decided by the cost model on
// diagrams GPT-2 does not use: what the training step's kernels store in GMEM.
#include <catch2/catch.hpp>

#include "kernels.h"
#include "pipeline.h"
#include "target.h"
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

// The values of the forward pass that some kernel writes to GMEM and that
// have every one of `axes`.
std::vector<const Node*> forwardStoredWith(const Graph& g, const std::vector<std::string>& axes) {
  std::vector<const Node*> out;
  for (const Kernel& k : formKernels(g))
    for (NodeId id : k.outputs) {
      const Node& n = g.node(id);
      if (!n.adjoint && std::all_of(axes.begin(), axes.end(), [&](const std::string& a) { return n.type.has(a); }))
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
  CHECK_FALSE(forwardStoredWith(trainingStep("attention_loss", sizes, {"q", "k", "v"}, nullptr), {"t", "x"}).empty());
  // With it, the forward stores nothing of size B·H·T·T: the backward
  // recomputes the scores from q and k (2d operations per element cost less
  // than writing and reading 2 × 2 bytes) and the probabilities from them and
  // the saved row statistics.
  Graph step = trainingStep("attention_loss", sizes, {"q", "k", "v"}, &target);
  for (const Node* n : forwardStoredWith(step, {"t", "x"})) FAIL("stored: " << n->name << " " << n->type.str());
}

TEST_CASE("the classifier's forward stores its logits, never the normalised ones", "[recompute]") {
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"N", 4096}, {"C", 768}, {"V", 50304}};
  // Without the recompute pass, too, the forward stores only the logits:
  // logsumexp's max-stabiliser is stop_gradient'ed, so the backward reads
  // exp(logits - max) only in one product, made in the kernel that makes it.
  // (Through the max's tie mask it used to store it.) The graph outlives the
  // pointers into it.
  const Graph unplannedStep = trainingStep("classifier_loss", sizes, {"h", "wv"}, nullptr);
  std::vector<const Node*> unplanned = forwardStoredWith(unplannedStep, {"n", "v"});
  REQUIRE_FALSE(unplanned.empty());
  CHECK(std::all_of(unplanned.begin(), unplanned.end(), [](const Node* n) { return n->op == Op::Contract; }));
  Graph step = trainingStep("classifier_loss", sizes, {"h", "wv"}, &target);
  // The logits (a contraction over 768 channels: recomputing costs more than
  // a write and a read) are stored; what the softmax makes of them is
  // recomputed inside the backward's kernels from them and the row statistics.
  std::vector<const Node*> stored = forwardStoredWith(step, {"n", "v"});
  REQUIRE_FALSE(stored.empty());
  for (const Node* n : stored) {
    INFO(n->name << " " << n->type.str());
    CHECK(n->op == Op::Contract);
  }
}
