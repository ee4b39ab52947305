// Which rows a warp-per-point launch holds in registers across its passes
// (planning/held_rows.h).
#include <catch2/catch.hpp>

#include <set>

#include "planning/cost_model.h"
#include "planning/fusion.h"
#include "planning/held_rows.h"
#include "planning/staged_rows.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

using Launch = FusedGraph;

Launch launch(const std::string& entry, const SizeBindings& sizes) {
  return fusedFor("tests/diagrams/held_rows.dg", entry, sizes);
}

// The rows the launch of kernel `k`, a point per position of n, holds with
// `lanes` lanes a point, its arrays `bytes` an element.
HeldRows heldOf(const Launch& l, const Kernel& k, int lanes, bool vectorised, int64_t bytes) {
  const Graph& g = l.graph;
  std::vector<Axis> group;
  for (NodeId in : k.inputs)
    if (const Axis* a = g.node(in).type.find("n"); a && group.empty()) group.push_back(*a);
  // Stored: the arrays under the kernel's inputs (a view among them is read through).
  const std::set<NodeId> computed(k.nodes.begin(), k.nodes.end());
  std::set<NodeId> stored;
  for (NodeId in : k.inputs) {
    while (isView(g.node(in))) in = g.node(in).operands[0];
    stored.insert(in);
  }
  const std::vector<NodeId> rows = pointRowArrays(g, computed, stored, group, "c", [](NodeId) { return true; });
  return heldRows(g, computed, k.outputs, rows, "c", lanes, vectorised, [&](NodeId) { return bytes; });
}

std::set<std::string> names(const Graph& g, const HeldRows& held) {
  std::set<std::string> out;
  for (const HeldRow& row : held.rows) out.insert(g.node(row.array).name);
  return out;
}

}  // namespace

TEST_CASE("a residual sum's layernorm holds both rows of the sum, one read through a renaming", "[held rows]") {
  const Launch l = launch("residual_layernorm", {{"N", 100}, {"C", 1600}});
  REQUIRE(l.kernels.size() == 1);
  const Kernel& k = l.kernels[0];
  // GPT-2 d48's: 1600 channels, 7 spans of 8 a lane, 4 registers a span of bf16.
  const HeldRows held = heldOf(l, k, 32, true, 2);
  CHECK(held.axis == "c");
  CHECK(held.extent == 1600);
  CHECK(held.chunks == 7);
  CHECK(names(l.graph, held) == std::set<std::string>{"x", "y"});
  CHECK(held.registers == 56);
  // The mean's pass, the variance's, the output's.
  for (const HeldRow& row : held.rows) CHECK(row.passes == 3);
  // In f32, a span takes 8 registers: one row within the budget.
  const HeldRows f32 = heldOf(l, k, 32, true, 4);
  CHECK(f32.rows.size() == 1);
  CHECK(f32.registers == 56);
}

TEST_CASE("rows past the register budget are read from memory as before", "[held rows]") {
  // 4000 channels: 16 spans a lane, 64 registers a row: one of the two.
  const Launch wide = launch("residual_layernorm", {{"N", 100}, {"C", 4000}});
  REQUIRE(wide.kernels.size() == 1);
  const HeldRows one = heldOf(wide, wide.kernels[0], 32, true, 2);
  CHECK(one.rows.size() == 1);
  CHECK(one.registers == kHeldRowRegisters);
  // 4001 channels, a position a lane a chunk: 126 registers a row, none held.
  const Launch odd = launch("residual_layernorm", {{"N", 100}, {"C", 4001}});
  REQUIRE(odd.kernels.size() == 1);
  CHECK(heldOf(odd, odd.kernels[0], 32, false, 2).empty());
  // 771 channels the same way: 25 registers a row, both held; the last chunk ends inside the axis.
  const Launch short_ = launch("residual_layernorm", {{"N", 100}, {"C", 771}});
  const HeldRows both = heldOf(short_, short_.kernels[0], 32, false, 2);
  CHECK(both.chunks == 25);
  CHECK(both.registers == 50);
}

TEST_CASE("a row read by one pass is not held", "[held rows]") {
  const Launch l = launch("one_pass", {{"N", 100}, {"C", 1600}});
  REQUIRE(l.kernels.size() == 1);
  const Kernel& k = l.kernels[0];
  const HeldRows held = heldOf(l, k, 32, true, 2);
  CHECK(names(l.graph, held) == std::set<std::string>{"x"});
  const std::set<NodeId> computed(k.nodes.begin(), k.nodes.end());
  for (NodeId in : k.inputs)
    if (l.graph.node(in).name == "w") CHECK(lanePassesReading(l.graph, computed, k.outputs, "c", in) == 1);
}

TEST_CASE("the cost model prices the passes' reads of rows neither staged nor held", "[held rows]") {
  // 6000 channels: 24 spans a lane, 96 registers a bf16 row, neither of the
  // sum's two rows held; three passes read each (mean, variance, output), two
  // of them again through L2: 2 x 2 x (2000 x 6000 x 2 bytes) more than at
  // 1600 channels, where both are held and each is read once.
  const Target hopper = loadTarget("sm_90a");
  const CostOptions bf16{2};
  auto l2Bytes = [&](int64_t channels) {
    const Launch l = launch("residual_layernorm", {{"N", 2000}, {"C", channels}});
    REQUIRE(l.kernels.size() == 1);
    const KernelShape shape = kernelShape(l.graph, l.kernels[0], hopper, bf16);
    const KernelCost cost = evaluate(l.graph, l.kernels[0], shape, Partition{{{"n", 1}}, 0}, hopper, bf16);
    const auto l2 = std::find_if(cost.levels.begin(), cost.levels.end(), [](const auto& level) { return level.level == "L2"; });
    REQUIRE(l2 != cost.levels.end());
    const auto gmem = std::find_if(cost.levels.begin(), cost.levels.end(), [](const auto& level) { return level.level == "GMEM"; });
    // Beyond one read of each array (the weights g and b: one a block).
    return l2->movedBytes - gmem->movedBytes - (2000.0 - 1) * 2 * static_cast<double>(channels) * 2;
  };
  CHECK(l2Bytes(1600) == Approx(0).margin(1));
  CHECK(l2Bytes(6000) == Approx(2.0 * 2 * 2000 * 6000 * 2));
}
