// Blocked scans (planning/scan_layout.h): the scan node's meaning in the
// interpreter against the masked sum the front end writes, in all four forms
// (inclusive or exclusive, from the start or the end); its adjoint against
// finite differences; the masked-sums pass choosing it for long running sums
// and not for short ones; and the layout's invariants at sizes no tile
// divides.
#include <catch2/catch.hpp>

#include "driver/pipeline.h"
#include "gradient_check.h"
#include "interpreter.h"
#include "ir/graph_builder.h"
#include "ir/verify.h"
#include "planning/scan_layout.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

// x: f32[n s c]; y = scan(sum, x, s -> t) in the given form, and the same
// written as the front end writes it: sum over s of where(pos(s) REL pos(t), x, 0).
Graph scanAndMaskedSum(bool exclusive, bool reverse) {
  Graph g;
  g.name = "scan_forms";
  const Type xt{DType::F32, {{"n", 3}, {"s", 11}, {"c", 2}}};
  const NodeId x = addInput(g, "x", xt, true);
  GraphBuilder b(g, {});
  const NodeId scanned = b.scan(ReduceOp::Sum, x, "s", "t", exclusive, reverse);
  const CompareOp rel = reverse ? (exclusive ? CompareOp::Gt : CompareOp::Ge) : (exclusive ? CompareOp::Lt : CompareOp::Le);
  const NodeId mask = b.compare(rel, b.pos({"s", 11}), b.pos({"t", 11}));
  const NodeId masked = b.sum(b.select(mask, x, b.constant(0, DType::F32)), {"s"});
  g.outputs = {{"y", scanned}, {"masked", b.transposeTo(masked, g.node(scanned).type)}};
  return g;
}

// loss = sum(scan(op, x, s -> t) * r): the scan's adjoint through a weighted sum.
Graph scanLoss(bool exclusive, bool reverse) {
  Graph g;
  g.name = "scan_loss";
  const Type xt{DType::F32, {{"n", 3}, {"s", 9}, {"c", 2}}};
  const NodeId x = addInput(g, "x", xt, true);
  const NodeId r = addInput(g, "r", Type{DType::F32, {{"n", 3}, {"t", 9}, {"c", 2}}}, false);
  GraphBuilder b(g, {});
  const NodeId scanned = b.scan(ReduceOp::Sum, x, "s", "t", exclusive, reverse);
  g.outputs = {{"loss", b.sum(b.binary(BinaryOp::Mul, scanned, r), {"n", "t", "c"})}};
  return g;
}

int scans(const Graph& g) {
  int n = 0;
  for (const Node& node : g.nodes) n += node.op == Op::Scan;
  return n;
}

}  // namespace

TEST_CASE("a scan node computes the masked sum it stands for, in all four forms", "[scan]") {
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      const Graph g = scanAndMaskedSum(exclusive, reverse);
      REQUIRE_NOTHROW(verifyGraph(g));
      const std::vector<HostTensor> out = interpret(g, randomInputs(g, 7));
      REQUIRE(out.size() == 2);
      REQUIRE(out[0].data.size() == out[1].data.size());
      double worst = 0;
      for (size_t i = 0; i < out[0].data.size(); ++i) worst = std::max(worst, std::abs(out[0].data[i] - out[1].data[i]));
      CHECK(worst <= 1e-12);
    }
}

TEST_CASE("a scan's adjoint, the scan run the other way, matches finite differences", "[scan]") {
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      const Graph g = scanLoss(exclusive, reverse);
      for (const auto& check : checkGradients(g, {"x"}, randomInputs(g, 3), 54)) {
        CHECK(check.elementsChecked > 0);
        CHECK(check.relativeError <= 1e-6);
      }
    }
}

TEST_CASE("long running sums become scans, short ones do not", "[scan]") {
  const Target target = loadTarget("sm_90a");
  // 3 x 1001 lines of 2003 positions: the masked sum would visit 6e9 pairs.
  CHECK(scans(compileFor("tests/diagrams/blocked_scans.dg", "across_lines", {{"B", 3}, {"T", 2003}, {"C", 1001}},
                         false, target)) == 2);
  // The gradient of a running sum is one run from the end.
  const Graph step =
      compileFor("tests/diagrams/blocked_scans.dg", "running_loss", {{"B", 3}, {"T", 2003}, {"C", 1001}}, true, target);
  int reversed = 0;
  for (const Node& n : step.nodes) reversed += n.op == Op::Scan && n.hi == 1;
  CHECK(reversed == 2);
  // 2 x 5 lines of 40: a handful of pairs, no scan.
  CHECK(scans(compileFor("tests/diagrams/blocked_scans.dg", "across_lines", {{"B", 2}, {"T", 40}, {"C", 5}}, false,
                         target)) == 0);
}

TEST_CASE("a scan's layout covers its lines and positions at sizes no tile divides", "[scan]") {
  const CostOptions options;
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    for (int64_t positions : {1, 7, 1001, 100003})
      for (int64_t lines : {1, 5, 33, 3003})
        for (bool innermost : {false, true}) {
          INFO(arch << ": " << lines << " lines of " << positions << (innermost ? ", positions innermost" : ""));
          Type result{DType::F32, {{"l", lines}, {"t", positions}}};
          if (!innermost) result.axes = {{"t", positions}, {"l", lines}};
          const ScanLayout l = scanLayout(result, result, "t", target, options);
          CHECK(l.threads() <= target.maxThreadsPerBlock);
          CHECK(l.threads() >= 1);
          CHECK(l.blocks * l.linesPerBlock >= lines);
          CHECK((l.blocks - 1) * l.linesPerBlock < lines);
          CHECK(l.rounds * l.slices * l.perSlice >= positions);
          CHECK((l.rounds - 1) * l.slices * l.perSlice < positions);
          CHECK(l.positionsInnermost == (innermost && positions > 1));
        }
  }
}

TEST_CASE("with scans always, short running sums are scans too, same values", "[scan]") {
  // The fuzzer's odd seeds plan so (CostOptions::scansAlways): the running
  // sums of its small random diagrams run as blocked scans.
  const Target target = loadTarget("sm_90a");
  PipelineOptions p;
  p.path = repoPath("tests/diagrams/scans.dg");
  p.entry = "scans";
  p.sizes = {{"B", 2}, {"T", 40}, {"C", 5}};
  const Graph plain = compileToIR(p);
  p.target = &target;
  p.cost.scansAlways = true;
  const Graph planned = compileToIR(p);
  CHECK(scans(plain) == 0);
  CHECK(scans(planned) == 3);  // the inclusive and exclusive sums, the running maximum
  CHECK(largestRelativeDifference(plain, planned, 5) <= 1e-9);
}
