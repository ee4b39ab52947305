// Scans beyond the running sum (ir.h, Op::Scan): the linear recurrence
// h = a * h + x in each of its forms against a loop written here; the
// adjoints of recurrences, running products (with zeros) and running
// maxima against finite differences; the running maximum's scan against
// the masked maximum the front end writes; and the masked-sums pass making
// long running maxima scans.
#include <catch2/catch.hpp>

#include <cmath>

#include "driver/pipeline.h"
#include "gradient_check.h"
#include "interpreter.h"
#include "ir/autodiff.h"
#include "ir/graph_builder.h"
#include "ir/verify.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

constexpr int64_t kLines = 3, kPositions = 9, kChannels = 2;  // [n s c]

Type lines(const std::string& along) {
  return Type{DType::F32, {{"n", kLines}, {along, kPositions}, {"c", kChannels}}};
}

struct Form {
  bool exclusive, reverse, lagged;
};
const Form kForms[] = {{false, false, false}, {false, true, false}, {true, false, false},
                       {true, true, false},   {false, false, true}, {false, true, true}};

// The recurrence as ir.h defines it, one line at a time.
std::vector<double> recurrence(const std::vector<double>& a, const std::vector<double>& x, const Form& f) {
  std::vector<double> out(x.size());
  for (int64_t n = 0; n < kLines; ++n)
    for (int64_t c = 0; c < kChannels; ++c) {
      auto at = [&](int64_t s) { return static_cast<size_t>((n * kPositions + s) * kChannels + c); };
      double h = 0;
      for (int64_t i = 0; i < kPositions; ++i) {
        const int64_t p = f.reverse ? kPositions - 1 - i : i;
        const int64_t from = f.lagged ? (f.reverse ? p + 1 : p - 1) : p;
        const double before = h;
        h = i == 0 ? x[at(p)] : a[at(from)] * h + x[at(p)];
        out[at(p)] = f.exclusive ? before : h;
      }
    }
  return out;
}

// loss = sum(op(x) * r) for a scan made by `scanned`, x and a parameters.
template <class Make>
Graph scanLoss(Make scanned) {
  Graph g;
  g.name = "scan_loss";
  const NodeId x = addInput(g, "x", lines("s"), true);
  const NodeId a = addInput(g, "a", lines("s"), true);
  const NodeId r = addInput(g, "r", lines("t"), false);
  GraphBuilder b(g, {});
  g.outputs = {{"loss", b.sum(b.binary(BinaryOp::Mul, scanned(b, x, a), r), {"n", "t", "c"})}};
  return g;
}

// max over `axis` of x (the builder makes sums alone).
NodeId maxOver(Graph& g, NodeId x, const std::string& axis) {
  Node n;
  n.op = Op::Reduce;
  n.reduce = ReduceOp::Max;
  n.axes = {axis};
  n.operands = {x};
  n.type.dtype = g.node(x).type.dtype;
  for (const Axis& a : g.node(x).type.axes)
    if (a.name != axis) n.type.axes.push_back(a);
  return g.add(std::move(n));
}

}  // namespace

TEST_CASE("a linear scan computes the recurrence in each of its forms", "[scan]") {
  for (const Form& f : kForms) {
    INFO("exclusive " << f.exclusive << ", reverse " << f.reverse << ", lagged " << f.lagged);
    Graph g;
    g.name = "recurrence";
    const NodeId x = addInput(g, "x", lines("s"), false);
    const NodeId a = addInput(g, "a", lines("s"), false);
    GraphBuilder b(g, {});
    g.outputs = {{"h", b.linearScan(a, x, "s", "t", f.exclusive, f.reverse, f.lagged)}};
    REQUIRE_NOTHROW(verifyGraph(g));
    const auto inputs = randomInputs(g, 11);
    const std::vector<HostTensor> out = interpret(g, inputs);
    const std::vector<double> expected = recurrence(inputs.at("a").data, inputs.at("x").data, f);
    REQUIRE(out.at(0).data.size() == expected.size());
    double worst = 0;
    for (size_t i = 0; i < expected.size(); ++i) worst = std::max(worst, std::abs(out[0].data[i] - expected[i]));
    CHECK(worst <= 1e-12);
  }
}

TEST_CASE("a lagged exclusive scan is refused by the verifier", "[scan]") {
  Graph g;
  g.name = "refused";
  const NodeId x = addInput(g, "x", lines("s"), false);
  GraphBuilder b(g, {});
  g.outputs = {{"h", b.linearScan(x, x, "s", "t", true, false, true)}};
  CHECK_THROWS(verifyGraph(g));
}

TEST_CASE("a linear scan's adjoints match finite differences", "[scan]") {
  for (const Form& f : kForms) {
    INFO("exclusive " << f.exclusive << ", reverse " << f.reverse << ", lagged " << f.lagged);
    const Graph g = scanLoss([&](GraphBuilder& b, NodeId x, NodeId a) {
      return b.linearScan(a, x, "s", "t", f.exclusive, f.reverse, f.lagged);
    });
    for (const auto& check : checkGradients(g, {"x", "a"}, randomInputs(g, 5), 54)) {
      INFO(check.input);
      CHECK(check.elementsChecked > 0);
      CHECK(check.relativeError <= 1e-6);
    }
  }
}

TEST_CASE("a running maximum's scan is the masked maximum, its adjoint matches finite differences", "[scan]") {
  for (bool exclusive : {false, true})
    for (bool reverse : {false, true}) {
      INFO("exclusive " << exclusive << ", reverse " << reverse);
      Graph g;
      g.name = "running_max";
      const NodeId x = addInput(g, "x", lines("s"), true);
      GraphBuilder b(g, {});
      const NodeId scanned = b.scan(ReduceOp::Max, x, "s", "t", exclusive, reverse);
      const CompareOp rel =
          reverse ? (exclusive ? CompareOp::Gt : CompareOp::Ge) : (exclusive ? CompareOp::Lt : CompareOp::Le);
      const NodeId mask = b.compare(rel, b.pos({"s", kPositions}), b.pos({"t", kPositions}));
      const NodeId masked = maxOver(g, b.select(mask, x, b.constant(-INFINITY, DType::F32)), "s");
      g.outputs = {{"y", scanned}, {"masked", b.transposeTo(masked, g.node(scanned).type)}};
      const std::vector<HostTensor> out = interpret(g, randomInputs(g, 7));
      for (size_t i = 0; i < out[0].data.size(); ++i) CHECK(out[0].data[i] == out[1].data[i]);

      // An exclusive maximum is -inf at its first position: the loss takes
      // at least -10 of it.
      const Graph loss = scanLoss([&](GraphBuilder& lb, NodeId lx, NodeId) {
        return lb.binary(BinaryOp::Maximum, lb.scan(ReduceOp::Max, lx, "s", "t", exclusive, reverse),
                         lb.constant(-10, DType::F32));
      });
      for (const auto& check : checkGradients(loss, {"x"}, randomInputs(loss, 9), 54)) {
        CHECK(check.elementsChecked > 0);
        CHECK(check.relativeError <= 1e-6);
      }
    }
}

TEST_CASE("a running maximum's adjoint splits between ties as the masked maximum's does", "[scan]") {
  // Integer-valued inputs: many positions tie with the maximum so far.
  auto graphOf = [](bool asScan, bool exclusive) {
    Graph g;
    g.name = "ties";
    const NodeId x = addInput(g, "x", lines("s"), true);
    const NodeId r = addInput(g, "r", lines("t"), false);
    GraphBuilder b(g, {});
    NodeId y;
    if (asScan) {
      y = b.scan(ReduceOp::Max, x, "s", "t", exclusive, false);
    } else {
      const NodeId mask = b.compare(exclusive ? CompareOp::Lt : CompareOp::Le, b.pos({"s", kPositions}),
                                    b.pos({"t", kPositions}));
      y = maxOver(g, b.select(mask, x, b.constant(-INFINITY, DType::F32)), "s");
    }
    g.outputs = {{"loss", b.sum(b.binary(BinaryOp::Mul, y, r), {"n", "t", "c"})}};
    return g;
  };
  for (bool exclusive : {false, true}) {
    INFO("exclusive " << exclusive);
    auto inputs = randomInputs(graphOf(true, exclusive), 13);
    for (double& v : inputs.at("x").data) v = std::round(v);
    const Graph scan = differentiate(graphOf(true, exclusive), {"loss", {"x"}});
    const Graph masked = differentiate(graphOf(false, exclusive), {"loss", {"x"}});
    const std::vector<HostTensor> a = interpret(scan, inputs), m = interpret(masked, inputs);
    REQUIRE(a.size() == m.size());
    const HostTensor& ga = a.back();
    const HostTensor& gm = m.back();
    REQUIRE(ga.data.size() == gm.data.size());
    // The masked form's first exclusive position takes a share of nothing
    // (every position is masked): both give it 0 (its gradient reaches no one).
    for (size_t i = 0; i < ga.data.size(); ++i) CHECK(std::abs(ga.data[i] - gm.data[i]) <= 1e-9);
  }
}

TEST_CASE("a running product is exact at zeros, forward and backward", "[scan]") {
  const Graph g = compileFile("tests/diagrams/recurrences.dg", {{"B", 3}, {"T", 9}, {"C", 2}}, "products");
  auto inputs = randomInputs(g, 21);
  std::vector<double>& x = inputs.at("x").data;
  x[1] = 0, x[8] = 0, x[9] = 0;  // zeros: one alone, two in one line
  const std::vector<HostTensor> out = interpret(g, inputs);
  // out[0] = scan(prod, x, t), out[1] the exclusive one; x is [b t c].
  for (int64_t line = 0; line < 3 * 2; ++line) {
    const int64_t n = line / 2, c = line % 2;
    double product = 1;
    for (int64_t t = 0; t < 9; ++t) {
      const size_t at = static_cast<size_t>((n * 9 + t) * 2 + c);
      CHECK(out[1].data[at] == Approx(product).margin(1e-12));
      product *= x[at];
      CHECK(out[0].data[at] == Approx(product).margin(1e-12));
    }
  }
  const Graph loss = compileFile("tests/diagrams/recurrences.dg", {{"B", 3}, {"T", 9}, {"C", 2}}, "product_loss");
  auto lossInputs = randomInputs(loss, 21);
  lossInputs.at("x").data[1] = 0, lossInputs.at("x").data[8] = 0, lossInputs.at("x").data[9] = 0;
  for (const auto& check : checkGradients(loss, {"x"}, lossInputs, 54)) {
    CHECK(check.elementsChecked > 0);
    CHECK(check.relativeError <= 1e-6);
  }
}

TEST_CASE("scan(linear, ..) broadcasts its coefficient and its gradient sums back", "[scan]") {
  // decay: f32[c], one coefficient a channel, for every b and t.
  const Graph loss = compileFile("tests/diagrams/recurrences.dg", {{"B", 2}, {"T", 11}, {"C", 3}}, "decayed_loss");
  for (const auto& check : checkGradients(loss, {"x", "decay"}, randomInputs(loss, 17), 54)) {
    INFO(check.input);
    CHECK(check.elementsChecked > 0);
    CHECK(check.relativeError <= 1e-6);
  }
}

TEST_CASE("long running maxima become scans, short ones stay masked", "[scan]") {
  const Target target = loadTarget("sm_90a");
  auto scans = [](const Graph& g) {
    int n = 0;
    for (const Node& node : g.nodes) n += node.op == Op::Scan && node.reduce == ReduceOp::Max;
    return n;
  };
  CHECK(scans(compileFor("tests/diagrams/recurrences.dg", "running_max", {{"B", 3}, {"T", 2003}, {"C", 1001}}, false,
                         target)) == 1);
  CHECK(scans(compileFor("tests/diagrams/recurrences.dg", "running_max", {{"B", 2}, {"T", 40}, {"C", 5}}, false,
                         target)) == 0);
}
