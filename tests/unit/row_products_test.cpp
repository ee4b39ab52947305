// Row products (planning/row_products.h): which contractions join a stream
// over another axis, the kernels the fuser makes with them, and when the
// stream's skipped steps may leave them out.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "analysis/step_skip.h"
#include "analysis/streamability.h"
#include "planning/fusion.h"
#include "planning/row_products.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

Graph backward(const std::string& entry) {
  return compileFor("tests/diagrams/row_products.dg", entry, {{"B", 2}, {"H", 3}, {"T", 333}, {"D", 64}}, false,
                    loadTarget("sm_90a"));
}

NodeId named(const Graph& g, const std::string& name) {
  for (const GraphOutput& o : g.outputs)
    if (o.name == name) return o.node;
  FAIL("no output " << name);
  return -1;
}

const Kernel& kernelWriting(const std::vector<Kernel>& kernels, NodeId output) {
  const auto k = std::find_if(kernels.begin(), kernels.end(), [&](const Kernel& k) {
    return std::count(k.outputs.begin(), k.outputs.end(), output) > 0;
  });
  REQUIRE(k != kernels.end());
  return *k;
}

}  // namespace

TEST_CASE("dQ joins the stream over the queries as a row product", "[row products]") {
  const Graph g = backward("attention_backward");
  const NodeId dq = named(g, "dq"), dk = named(g, "dk"), dv = named(g, "dv");
  // Apart (the default): dQ is a kernel of its own, dK and dV another's.
  const std::vector<Kernel> apart = formKernels(g);
  CHECK(&kernelWriting(apart, dq) != &kernelWriting(apart, dk));
  CHECK(rowProductOutputs(g, kernelWriting(apart, dk).outputs, kernelWriting(apart, dk).nodes,
                          kernelWriting(apart, dk).streamAxis).empty());
  // With row products: one kernel over t writes all three; dQ sums over x,
  // its rows, which is no inner axis of the kernel.
  const std::vector<Kernel> joined = formKernels(g, {.rowProducts = true});
  const Kernel& k = kernelWriting(joined, dq);
  CHECK(&k == &kernelWriting(joined, dk));
  CHECK(&k == &kernelWriting(joined, dv));
  CHECK(k.streamAxis == "t");
  CHECK(std::find(k.innerAxes.begin(), k.innerAxes.end(), "x") == k.innerAxes.end());
  CHECK(rowProductOutputs(g, k.outputs, k.nodes, k.streamAxis) == std::vector<NodeId>{dq});
  // dK and dV sum over the stream: no row products.
  const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
  auto inKernel = [&](NodeId id) { return members.count(id) > 0; };
  CHECK(!isRowProduct(g, g.node(dk), k.streamAxis, inKernel));
  CHECK(!isRowProduct(g, g.node(dv), k.streamAxis, inKernel));
}

TEST_CASE("a row product's weights must vanish where the stream skips steps", "[row products]") {
  for (const auto& [entry, masked] : {std::pair{"attention_backward", true}, std::pair{"unmasked_rows", false}}) {
    INFO(entry);
    const Graph g = backward(entry);
    const std::vector<Kernel> kernels = formKernels(g, {.rowProducts = true});
    const NodeId dq = named(g, "dq");
    const Kernel& k = kernelWriting(kernels, dq);
    REQUIRE(k.streamAxis == "t");
    const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
    const std::optional<StreamStepSkip> skip = findStepSkip(g, analyzeStream(g, members, "t"), "x", "t");
    REQUIRE(skip);  // the causal mask skips steps for dK and dV
    const Node& c = g.node(dq);
    const NodeId weights = members.count(c.operands[0]) ? c.operands[0] : c.operands[1];
    CHECK(std::all_of(skip->conditions.begin(), skip->conditions.end(),
                      [&](const NeutralCondition& n) { return zeroWhereNeutral(g, weights, n); }) == masked);
  }
}
