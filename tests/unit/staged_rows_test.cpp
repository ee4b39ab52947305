// Which rows a tile launch holds in shared memory (planning/staged_rows.h),
// and the kernels the fuser makes where they fit.
#include <catch2/catch.hpp>

#include <set>

#include "planning/fusion.h"
#include "planning/staged_rows.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

using Launch = FusedGraph;

Launch launch(const std::string& entry, const SizeBindings& sizes, bool grad = false) {
  return fusedFor("tests/diagrams/long_rows.dg", entry, sizes, grad);
}

StagedRows rowsOf(const Graph& g, const Kernel& k, const std::vector<std::string>& groupNames, int64_t bytes,
                  int64_t maxBytes = kStagedRowsMax) {
  std::vector<Axis> group;
  for (const std::string& name : groupNames)
    for (NodeId in : k.inputs)
      if (const Axis* a = g.node(in).type.find(name);
          a && std::none_of(group.begin(), group.end(), [&](const Axis& x) { return x.name == name; }))
        group.push_back(*a);
  const std::set<NodeId> computed(k.nodes.begin(), k.nodes.end()), stored(k.inputs.begin(), k.inputs.end());
  const std::string held = heldRowAxis(g, computed, group, {});
  return stagedRows(g, computed, stored, group, held, [&](NodeId) { return bytes; }, [](NodeId) { return true; },
                    maxBytes);
}

}  // namespace

TEST_CASE("a softmax over long rows is one kernel that stages its rows", "[staged rows]") {
  // 20011 positions: longer than kWholeAxisLimit, 40 KB of bf16 a row (over kStagedRowsAbove).
  const Launch l = launch("long_softmax", {{"N", 37}, {"V", 20011}});
  REQUIRE(l.kernels.size() == 1);
  const Kernel& k = l.kernels[0];
  CHECK(k.streamAxis.empty());
  const StagedRows rows = rowsOf(l.graph, k, {"n"}, 2);
  REQUIRE(rows.rows.size() == 1);
  CHECK(rows.axis == "v");
  CHECK(rows.extent == 20011);
  // 40022 bytes, not whole 16-byte words: 16 more, for the row to lie as in GMEM modulo 16.
  CHECK(rows.bytes == (40022 + 16 + 15) / 16 * 16);
  // In f32, 80 KB: still staged; a row of 112 KB or more is not.
  CHECK(rowsOf(l.graph, k, {"n"}, 4).bytes > 80000);
  CHECK(rowsOf(l.graph, k, {"n"}, 10).empty());
  // On a target whose blocks take 48 KB of shared memory at most, the f32 rows are not staged; the bf16 ones are.
  CHECK(stagedRowsLimit(48 * 1024) == 47 * 1024);
  CHECK(stagedRowsLimit(232448) == kStagedRowsMax);
  CHECK(rowsOf(l.graph, k, {"n"}, 4, stagedRowsLimit(48 * 1024)).empty());
  CHECK(!rowsOf(l.graph, k, {"n"}, 2, stagedRowsLimit(48 * 1024)).empty());
}

TEST_CASE("a softmax over rows too long to stage streams its statistics apart", "[staged rows]") {
  // 70001 bf16 positions: 140 KB a row, over kStagedRowsMax. The maximum
  // and sum stream in one kernel; the output reads the row again.
  const Launch l = launch("long_softmax", {{"N", 5}, {"V", 70001}});
  REQUIRE(l.kernels.size() == 2);
  CHECK(std::any_of(l.kernels.begin(), l.kernels.end(), [](const Kernel& k) { return k.streamAxis == "v"; }));
}

TEST_CASE("short rows and rows every point shares are not staged", "[staged rows]") {
  // A layernorm's 768 channels: 1.5 KB a row, read again from L1.
  const Launch shortRows = launch("long_layernorm", {{"N", 100}, {"C", 768}});
  REQUIRE(shortRows.kernels.size() == 1);
  CHECK(rowsOf(shortRows.graph, shortRows.kernels[0], {"n"}, 2).empty());
  // 17001 channels: x's rows are staged, the weights g and b (one row for every point) are not.
  const Launch l = launch("long_layernorm", {{"N", 33}, {"C", 17001}});
  REQUIRE(l.kernels.size() == 1);
  const StagedRows rows = rowsOf(l.graph, l.kernels[0], {"n"}, 2);
  REQUIRE(rows.rows.size() == 1);
  CHECK(l.graph.node(rows.rows[0].array).name == "x");
}

TEST_CASE("the gradient of a loss's rows joins the loss's kernel", "[staged rows]") {
  // The softmax's kernel ends the forward (the loss sums its rows): the
  // gradient with respect to x is made beside it, from one read of x.
  const Launch l = launch("long_softmax_loss", {{"N", 37}, {"V", 20011}}, true);
  const auto joined = std::find_if(l.kernels.begin(), l.kernels.end(), [&](const Kernel& k) {
    return std::any_of(k.outputs.begin(), k.outputs.end(), [&](NodeId o) { return l.graph.node(o).name == "grad_x"; });
  });
  REQUIRE(joined != l.kernels.end());
  CHECK(std::any_of(joined->nodes.begin(), joined->nodes.end(),
                    [&](NodeId n) { return l.graph.node(n).op == Op::Reduce && !l.graph.node(n).adjoint; }));
}

TEST_CASE("a layernorm backward's short rows are read again through the caches, unstaged", "[staged rows]") {
  // GPT-2's: three rows of 768 bf16 a point, 4.6 KB. Staged, d12's ran 72 us
  // a launch on the H200 against 52 unstaged (kStagedRowsAbove).
  const Launch l = launch("long_layernorm_loss", {{"N", 100}, {"C", 768}}, true);
  bool threeRows = false;
  for (const Kernel& k : l.kernels) {
    CHECK(rowsOf(l.graph, k, {"n"}, 2).empty());
    const std::set<NodeId> members(k.nodes.begin(), k.nodes.end());
    threeRows |= rowBytesAlong(l.graph, members, "c", [](NodeId) { return int64_t{2}; }) >= 3 * 768 * 2;
  }
  CHECK(threeRows);
  // And rows of 24.7 KB past kWholeAxisLimit are streamed, not held whole unstaged.
  const Launch softmax = launch("long_softmax", {{"N", 37}, {"V", 12345}});
  CHECK(std::any_of(softmax.kernels.begin(), softmax.kernels.end(), [](const Kernel& k) { return k.streamAxis == "v"; }));
}
