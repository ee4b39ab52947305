// Scans over a user's operator (ir.h, isMonoidScan): the interpreter's fold
// in each form against a loop written here, the adjoints against finite
// differences, and the operator's graph as the scalar evaluator, the
// associativity check and the verifier see it.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>

#include "gradient_check.h"
#include "interpreter.h"
#include "ir/scalar_function.h"
#include "ir/verify.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

constexpr int64_t kB = 2, kT = 7, kC = 3;
const SizeBindings kSizes{{"B", kB}, {"T", kT}, {"C", kC}};

using Operator = std::function<double(double, double)>;

double logaddexp(double a, double b) {
  const double m = std::max(a, b);
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}
double hypot2(double a, double b) { return std::sqrt(a * a + b * b); }
double lastAbove(double earlier, double later) { return later > 0.5 ? later : earlier; }

// The fold of op along t of x[b t c], in scan order; exclusive: `first`,
// then the fold before each position.
std::vector<double> fold(const std::vector<double>& x, const Operator& op, bool reverse, bool exclusive,
                         double first) {
  std::vector<double> out(x.size());
  for (int64_t b = 0; b < kB; ++b)
    for (int64_t c = 0; c < kC; ++c) {
      auto at = [&](int64_t t) { return static_cast<size_t>((b * kT + t) * kC + c); };
      double h = 0;
      for (int64_t i = 0; i < kT; ++i) {
        const int64_t t = reverse ? kT - 1 - i : i;
        out[at(t)] = exclusive ? (i == 0 ? first : h) : 0;
        h = i == 0 ? x[at(t)] : op(h, x[at(t)]);
        if (!exclusive) out[at(t)] = h;
      }
    }
  return out;
}

}  // namespace

TEST_CASE("a scan over a user's operator folds it in each form", "[scan]") {
  const Graph g = compileFile("tests/diagrams/monoid_scans.dg", kSizes, "forms");
  REQUIRE_NOTHROW(verifyGraph(g));
  const auto inputs = randomInputs(g, 31);
  const std::vector<double>& x = inputs.at("x").data;
  const std::vector<HostTensor> out = interpret(g, inputs);
  struct Expected {
    const char* name;
    std::vector<double> values;
  };
  const Expected expected[] = {
      {"lse", fold(x, logaddexp, false, false, 0)},
      {"lse_back", fold(x, logaddexp, true, false, 0)},
      {"lse_before", fold(x, logaddexp, false, true, -INFINITY)},
      {"norm", fold(x, hypot2, false, false, 0)},
      {"last", fold(x, lastAbove, false, false, 0)},
      {"last_before", fold(x, lastAbove, true, true, 0)},
  };
  REQUIRE(out.size() == std::size(expected));
  for (size_t k = 0; k < out.size(); ++k) {
    INFO(expected[k].name);
    REQUIRE(out[k].data.size() == expected[k].values.size());
    for (size_t i = 0; i < out[k].data.size(); ++i) {
      const double want = expected[k].values[i];
      if (std::isinf(want)) CHECK(out[k].data[i] == want);
      else CHECK(std::abs(out[k].data[i] - want) <= 1e-12 * (1 + std::abs(want)));
    }
  }
}

TEST_CASE("a scan over a user's operator has adjoints that match finite differences", "[scan]") {
  const Graph loss = compileFile("tests/diagrams/monoid_scans.dg", kSizes, "forms_loss");
  for (const auto& check : checkGradients(loss, {"x"}, randomInputs(loss, 23), 42)) {
    CHECK(check.elementsChecked > 0);
    CHECK(check.relativeError <= 1e-6);
  }
}

TEST_CASE("a scan operator's graph evaluates, counts and is checked for associativity", "[scan]") {
  const Graph g = compileFile("tests/diagrams/monoid_scans.dg", kSizes, "forms");
  const Graph* lse = nullptr;
  for (const Node& n : g.nodes)
    if (n.combine && n.combine->name == "logaddexp") lse = n.combine.get();
  REQUIRE(lse != nullptr);
  CHECK(scalarFunctionProblem(*lse).empty());
  CHECK(evaluateScalarFunction(*lse, 0.25, -1.5) == Approx(logaddexp(0.25, -1.5)).epsilon(1e-14));
  CHECK(scalarFunctionOperations(*lse) == 8);  // maximum, 2 subtractions, 2 exps, +, log, +
  CHECK_FALSE(associativityCounterexample(*lse).has_value());
  // a - b is not associative: (a - b) - c against a - (b - c).
  Graph minus = *lse;
  for (Node& n : minus.nodes)
    if (n.id == minus.outputs[0].node) n = Node{n.id, Op::Binary, n.type, {minus.inputs[0], minus.inputs[1]}}, n.binary = BinaryOp::Sub;
  REQUIRE(evaluateScalarFunction(minus, 3, 1) == 2);
  const auto wrong = associativityCounterexample(minus);
  REQUIRE(wrong.has_value());
  CHECK(wrong->left == Approx((wrong->a - wrong->b) - wrong->c));
  CHECK(wrong->right == Approx(wrong->a - (wrong->b - wrong->c)));
}

TEST_CASE("the verifier refuses a scan over a user's operator with a coefficient or a wrong operator", "[scan]") {
  const Graph g = compileFile("tests/diagrams/monoid_scans.dg", kSizes, "forms");
  Graph coefficient = g, widened = g;
  for (Node& n : coefficient.nodes)
    if (n.combine) n.operands.push_back(n.operands[0]);
  CHECK_THROWS(verifyGraph(coefficient));
  for (Node& n : widened.nodes)
    if (n.combine) {
      auto op = std::make_shared<Graph>(*n.combine);
      op->node(op->outputs[0].node).type.axes.push_back({"k", 2});  // gives an array, not a number
      n.combine = op;
    }
  CHECK_THROWS(verifyGraph(widened));
  CHECK_NOTHROW(verifyGraph(g));
}
