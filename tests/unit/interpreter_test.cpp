// The reference interpreter against hand-written loops, op by op: small graphs
// built through the Graph API, seeded random inputs, expected values computed
// independently by indexing every array by hand.
#include "interpreter.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "ir/ir.h"
#include "test_support.h"
#include "tensor.h"

using namespace llmc;
using llmc::testing::addInput;

namespace {

Type f64(std::vector<Axis> axes) { return Type{DType::F64, std::move(axes)}; }
Type f32(std::vector<Axis> axes) { return Type{DType::F32, std::move(axes)}; }
Type i32(std::vector<Axis> axes) { return Type{DType::I32, std::move(axes)}; }

Node makeNode(Op op, const Type& type, std::vector<NodeId> operands) {
  Node n;
  n.op = op;
  n.type = type;
  n.operands = std::move(operands);
  return n;
}

// Runs g with its single output `id` and returns that output.
HostTensor runSingle(Graph& g, NodeId id, const std::map<std::string, HostTensor>& inputs,
                     const InterpreterOptions& options = {}) {
  g.outputs = {{"out", id}};
  std::vector<HostTensor> outputs = interpret(g, inputs, options);
  REQUIRE(outputs.size() == 1);
  REQUIRE(outputs[0].type == g.node(id).type);
  return outputs[0];
}

// bf16 rounding of a float, ties to even, on the float's bits (normal range).
float bf16Reference(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  bits += 0x7FFF + ((bits >> 16) & 1);
  return std::bit_cast<float>(bits & 0xFFFF0000u);
}

}  // namespace

TEST_CASE("tensor helpers: indexing, permutation, relative error, random fills", "[interpreter]") {
  const HostTensor x = randomNormal(f64({{"b", 2}, {"t", 3}, {"c", 4}}), 1);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 4; ++c)
        CHECK(x.at({{"b", b}, {"t", t}, {"c", c}}) == x.data[(b * 3 + t) * 4 + c]);
  CHECK_THROWS_WITH(x.at({{"b", 0}, {"t", 3}, {"c", 0}}), Catch::Contains("out of range"));

  const HostTensor y = permuteTo(x, f64({{"c", 4}, {"b", 2}, {"t", 3}}));
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 4; ++c)
        CHECK(y.data[(c * 2 + b) * 3 + t] == x.data[(b * 3 + t) * 4 + c]);
  CHECK_THROWS(permuteTo(x, f64({{"c", 4}, {"b", 2}, {"s", 3}})));

  CHECK(relativeError(y, x) == 0);
  HostTensor z = x;
  z.data[5] += 1;
  double norm = 0;
  for (double v : x.data) norm += v * v;
  CHECK(relativeError(z, x) == Approx(1 / std::sqrt(norm)));
  CHECK(relativeError(zeros(x.type), zeros(x.type)) == 0);

  const HostTensor tokens = randomUniform(i32({{"t", 1000}}), 7, 0, 5);
  bool seen[5] = {};
  for (double v : tokens.data) {
    REQUIRE(v == std::floor(v));
    REQUIRE((v >= 0 && v < 5));
    seen[static_cast<int>(v)] = true;
  }
  for (bool s : seen) CHECK(s);
  CHECK(randomNormal(x.type, 1).data == x.data);  // seeded: reproducible
}

TEST_CASE("binary ops broadcast by axis name in any axis order", "[interpreter]") {
  const Type xType = f64({{"b", 2}, {"t", 3}, {"c", 4}});
  const Type yType = f64({{"c", 4}, {"b", 2}});  // lacks t: broadcast along it
  const Type outType = f64({{"t", 3}, {"c", 4}, {"b", 2}});
  const HostTensor x = randomNormal(xType, 11);
  HostTensor y = randomNormal(yType, 12);
  y.data[3] = 0.5;  // make sure Maximum and Minimum see both sides win

  struct Case {
    BinaryOp op;
    double (*expected)(double, double);
  };
  const Case cases[] = {
      {BinaryOp::Add, [](double a, double b) { return a + b; }},
      {BinaryOp::Sub, [](double a, double b) { return a - b; }},
      {BinaryOp::Mul, [](double a, double b) { return a * b; }},
      {BinaryOp::Div, [](double a, double b) { return a / b; }},
      {BinaryOp::Maximum, [](double a, double b) { return a > b ? a : b; }},
      {BinaryOp::Minimum, [](double a, double b) { return a < b ? a : b; }},
  };
  for (const Case& c : cases) {
    SECTION(binaryName(c.op)) {
      Graph g;
      const NodeId xi = addInput(g, "x", xType);
      const NodeId yi = addInput(g, "y", yType);
      Node n = makeNode(Op::Binary, outType, {xi, yi});
      n.binary = c.op;
      const HostTensor out = runSingle(g, g.add(n), {{"x", x}, {"y", y}});
      for (int64_t b = 0; b < 2; ++b)
        for (int64_t t = 0; t < 3; ++t)
          for (int64_t ch = 0; ch < 4; ++ch)
            CHECK(out.data[(t * 4 + ch) * 2 + b] ==
                  c.expected(x.data[(b * 3 + t) * 4 + ch], y.data[ch * 2 + b]));
    }
  }
}

TEST_CASE("a scalar constant broadcasts everywhere", "[interpreter]") {
  Graph g;
  const Type xType = f64({{"b", 3}, {"c", 5}});
  const NodeId x = addInput(g, "x", xType);
  Node k = makeNode(Op::Constant, f64({}), {});
  k.value = 2.5;
  const NodeId ki = g.add(k);
  Node unused = makeNode(Op::Unary, xType, {x});  // a dead node is computed and dropped
  unused.unary = UnaryOp::Exp;
  g.add(unused);
  Node n = makeNode(Op::Binary, xType, {ki, x});
  n.binary = BinaryOp::Sub;
  const HostTensor xv = randomNormal(xType, 3);
  const HostTensor out = runSingle(g, g.add(n), {{"x", xv}});
  for (size_t i = 0; i < xv.data.size(); ++i) CHECK(out.data[i] == 2.5 - xv.data[i]);
}

TEST_CASE("unary ops", "[interpreter]") {
  const Type type = f64({{"b", 3}, {"c", 7}});
  const HostTensor positive = randomUniform(type, 21, 0.1, 4);
  const HostTensor signed_ = randomNormal(type, 22);
  struct Case {
    UnaryOp op;
    const HostTensor* input;
    double (*expected)(double);
  };
  const Case cases[] = {
      {UnaryOp::Neg, &signed_, [](double v) { return -v; }},
      {UnaryOp::Exp, &signed_, [](double v) { return std::exp(v); }},
      {UnaryOp::Log, &positive, [](double v) { return std::log(v); }},
      {UnaryOp::Tanh, &signed_, [](double v) { return std::tanh(v); }},
      {UnaryOp::Sqrt, &positive, [](double v) { return std::sqrt(v); }},
      {UnaryOp::Rsqrt, &positive, [](double v) { return 1 / std::sqrt(v); }},
      {UnaryOp::Abs, &signed_, [](double v) { return std::fabs(v); }},
  };
  for (const Case& c : cases) {
    SECTION(unaryName(c.op)) {
      Graph g;
      const NodeId x = addInput(g, "x", type);
      Node n = makeNode(Op::Unary, type, {x});
      n.unary = c.op;
      const HostTensor out = runSingle(g, g.add(n), {{"x", *c.input}});
      for (size_t i = 0; i < out.data.size(); ++i)
        CHECK(out.data[i] == c.expected(c.input->data[i]));
    }
  }
}

TEST_CASE("f32 precision computes in float", "[interpreter]") {
  const Type type = f32({{"c", 50}});
  Graph g;
  const NodeId x = addInput(g, "x", type);
  Node n = makeNode(Op::Unary, type, {x});
  n.unary = UnaryOp::Exp;
  const HostTensor xv = randomNormal(type, 5);
  const HostTensor out = runSingle(g, g.add(n), {{"x", xv}}, {Precision::F32, true});
  for (size_t i = 0; i < xv.data.size(); ++i)
    CHECK(out.data[i] == static_cast<double>(std::exp(static_cast<float>(xv.data[i]))));
}

TEST_CASE("integer division truncates toward zero", "[interpreter]") {
  const Type type = i32({{"i", 4}});
  Graph g;
  const NodeId a = addInput(g, "a", type);
  const NodeId b = addInput(g, "b", type);
  Node n = makeNode(Op::Binary, type, {a, b});
  n.binary = BinaryOp::Div;
  const NodeId q = g.add(n);
  const HostTensor out =
      runSingle(g, q, {{"a", {type, {7, -7, 7, -7}}}, {"b", {type, {2, 2, -2, -2}}}});
  CHECK(out.data == std::vector<double>{3, -3, -3, 3});
  CHECK_THROWS_WITH(runSingle(g, q, {{"a", {type, {1, 2, 3, 4}}}, {"b", {type, {1, 0, 1, 1}}}}),
                    Catch::Contains("division") && Catch::Contains("zero"));
}

TEST_CASE("comparisons give 0/1 and select picks by condition", "[interpreter]") {
  const Type aType = i32({{"b", 3}, {"c", 4}});
  const Type bType = i32({{"c", 4}});
  const Type outType = Type{DType::Bool, {{"c", 4}, {"b", 3}}};
  // Small integers so that equality happens.
  const HostTensor av = randomUniform(aType, 31, -2, 3);
  const HostTensor bv = randomUniform(bType, 32, -2, 3);
  struct Case {
    CompareOp op;
    bool (*expected)(double, double);
  };
  const Case cases[] = {
      {CompareOp::Lt, [](double a, double b) { return a < b; }},
      {CompareOp::Le, [](double a, double b) { return a <= b; }},
      {CompareOp::Gt, [](double a, double b) { return a > b; }},
      {CompareOp::Ge, [](double a, double b) { return a >= b; }},
      {CompareOp::Eq, [](double a, double b) { return a == b; }},
      {CompareOp::Ne, [](double a, double b) { return a != b; }},
  };
  for (const Case& c : cases) {
    SECTION(compareSymbol(c.op)) {
      Graph g;
      const NodeId a = addInput(g, "a", aType);
      const NodeId b = addInput(g, "b", bType);
      Node n = makeNode(Op::Compare, outType, {a, b});
      n.compare = c.op;
      const HostTensor out = runSingle(g, g.add(n), {{"a", av}, {"b", bv}});
      for (int64_t bi = 0; bi < 3; ++bi)
        for (int64_t ci = 0; ci < 4; ++ci)
          CHECK(out.data[ci * 3 + bi] == (c.expected(av.data[bi * 4 + ci], bv.data[ci]) ? 1 : 0));
    }
  }

  SECTION("causal mask: where(pos(x) <= pos(t), s, -inf)") {
    const Type sType = f64({{"t", 5}, {"x", 5}});
    Graph g;
    const NodeId s = addInput(g, "s", sType);
    Node px = makeNode(Op::Pos, i32({{"x", 5}}), {});
    px.axes = {"x"};
    Node pt = makeNode(Op::Pos, i32({{"t", 5}}), {});
    pt.axes = {"t"};
    Node le =
        makeNode(Op::Compare, Type{DType::Bool, {{"x", 5}, {"t", 5}}}, {g.add(px), g.add(pt)});
    le.compare = CompareOp::Le;
    const NodeId mask = g.add(le);
    Node minusInf = makeNode(Op::Constant, f64({}), {});
    minusInf.value = -std::numeric_limits<double>::infinity();
    const NodeId mi = g.add(minusInf);
    const NodeId where = g.add(makeNode(Op::Select, sType, {mask, s, mi}));
    const HostTensor sv = randomNormal(sType, 33);
    const HostTensor out = runSingle(g, where, {{"s", sv}});
    for (int64_t t = 0; t < 5; ++t)
      for (int64_t x = 0; x < 5; ++x)
        CHECK(out.data[t * 5 + x] ==
              (x <= t ? sv.data[t * 5 + x] : -std::numeric_limits<double>::infinity()));
  }
}

TEST_CASE("casts: truncation, bool, and bf16/f16 rounding to nearest even", "[interpreter]") {
  auto castTo = [](DType to, const HostTensor& x, const InterpreterOptions& options = {}) {
    Graph g;
    const NodeId xi = addInput(g, "x", x.type);
    Type outType = x.type;
    outType.dtype = to;
    return runSingle(g, g.add(makeNode(Op::Cast, outType, {xi})), {{"x", x}}, options);
  };
  const Type type = f64({{"i", 6}});

  SECTION("to integers and bool") {
    const HostTensor x{type, {-2.7, -0.5, 0, 0.5, 2.7, 3}};
    CHECK(castTo(DType::I32, x).data == std::vector<double>{-2, 0, 0, 0, 2, 3});
    CHECK(castTo(DType::Bool, x).data == std::vector<double>{1, 1, 0, 1, 1, 1});
  }

  SECTION("bf16 ties and ordinary values") {
    const double ulp = std::ldexp(1.0, -7);  // bf16 spacing in [1, 2)
    const HostTensor x{type,
                       {1 + ulp / 2, 1 + 3 * ulp / 2, 1 + ulp / 4, -(1 + 3 * ulp / 2), 1e39, 0}};
    const HostTensor out = castTo(DType::BF16, x);
    CHECK(out.data[0] == 1);            // tie to even: down
    CHECK(out.data[1] == 1 + 2 * ulp);  // tie to even: up
    CHECK(out.data[2] == 1);            // below half
    CHECK(out.data[3] == -(1 + 2 * ulp));
    CHECK(out.data[4] == std::numeric_limits<double>::infinity());  // beyond bf16's range
    CHECK(out.data[5] == 0);
    CHECK(castTo(DType::BF16, x, {Precision::F64, false}).data == x.data);
  }

  SECTION("bf16 on random floats against the float bit trick, in f32 and f64") {
    HostTensor x = randomNormal(f64({{"i", 1000}}), 41, 0, 100);
    for (double& v : x.data) v = static_cast<float>(v);
    for (Precision precision : {Precision::F32, Precision::F64}) {
      const HostTensor out = castTo(DType::BF16, x, {precision, true});
      for (size_t i = 0; i < x.data.size(); ++i)
        REQUIRE(out.data[i] == static_cast<double>(bf16Reference(static_cast<float>(x.data[i]))));
    }
  }

  SECTION("f16 ties, overflow and subnormals") {
    const double ulp = std::ldexp(1.0, -10);   // f16 spacing in [1, 2)
    const double tiny = std::ldexp(1.0, -24);  // smallest f16 subnormal
    const HostTensor x{type, {1 + ulp / 2, 1 + 3 * ulp / 2, 65519, 65520, tiny / 2, 3 * tiny / 2}};
    const HostTensor out = castTo(DType::F16, x);
    CHECK(out.data[0] == 1);
    CHECK(out.data[1] == 1 + 2 * ulp);
    CHECK(out.data[2] == 65504);
    CHECK(out.data[3] == std::numeric_limits<double>::infinity());
    CHECK(out.data[4] == 0);         // tie between 0 and tiny: even is 0
    CHECK(out.data[5] == 2 * tiny);  // tie between tiny and 2 tiny: even is 2 tiny
  }
}

TEST_CASE("bf16 nodes, inputs included, are stored rounded", "[interpreter]") {
  const Type type{DType::BF16, {{"i", 200}}};
  Graph g;
  const NodeId x = addInput(g, "x", type);
  Node n = makeNode(Op::Binary, type, {x, x});
  n.binary = BinaryOp::Mul;
  HostTensor xv = randomNormal(type, 43);
  for (double& v : xv.data) v = static_cast<float>(v);
  const HostTensor out = runSingle(g, g.add(n), {{"x", xv}});
  for (size_t i = 0; i < xv.data.size(); ++i) {
    const float rounded = bf16Reference(static_cast<float>(xv.data[i]));
    // The square of a bf16 value is exact in float, so rounding it again is the reference.
    REQUIRE(out.data[i] == static_cast<double>(bf16Reference(rounded * rounded)));
  }
}

TEST_CASE("reductions over one or several axes", "[interpreter]") {
  const Type xType = f64({{"b", 3}, {"t", 4}, {"c", 5}});
  const HostTensor x = randomNormal(xType, 51);

  SECTION("sum over t, output in another order") {
    Graph g;
    const NodeId xi = addInput(g, "x", xType);
    Node n = makeNode(Op::Reduce, f64({{"c", 5}, {"b", 3}}), {xi});
    n.reduce = ReduceOp::Sum;
    n.axes = {"t"};
    const HostTensor out = runSingle(g, g.add(n), {{"x", x}});
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t c = 0; c < 5; ++c) {
        double sum = 0;
        for (int64_t t = 0; t < 4; ++t) sum += x.data[(b * 4 + t) * 5 + c];
        CHECK(out.data[c * 3 + b] == Approx(sum).epsilon(1e-14));
      }
  }

  SECTION("max over b and c") {
    Graph g;
    const NodeId xi = addInput(g, "x", xType);
    Node n = makeNode(Op::Reduce, f64({{"t", 4}}), {xi});
    n.reduce = ReduceOp::Max;
    n.axes = {"b", "c"};
    const HostTensor out = runSingle(g, g.add(n), {{"x", x}});
    for (int64_t t = 0; t < 4; ++t) {
      double best = -std::numeric_limits<double>::infinity();
      for (int64_t b = 0; b < 3; ++b)
        for (int64_t c = 0; c < 5; ++c) best = std::max(best, x.data[(b * 4 + t) * 5 + c]);
      CHECK(out.data[t] == best);
    }
  }

  SECTION("sum over every axis gives a scalar") {
    Graph g;
    const NodeId xi = addInput(g, "x", xType);
    Node n = makeNode(Op::Reduce, f64({}), {xi});
    n.reduce = ReduceOp::Sum;
    n.axes = {"c", "b", "t"};
    const HostTensor out = runSingle(g, g.add(n), {{"x", x}});
    double sum = 0;
    for (double v : x.data) sum += v;
    CHECK(out.data.at(0) == Approx(sum).epsilon(1e-13));
  }
}

TEST_CASE("contraction with batch axes matched by name", "[interpreter]") {
  // A[b m k h] . B[h n k b] over k; b and h are batch axes; the output order
  // interleaves them.
  const int64_t B = 2, M = 3, K = 4, H = 2, N = 5;
  const Type aType = f64({{"b", B}, {"m", M}, {"k", K}, {"h", H}});
  const Type bType = f64({{"h", H}, {"n", N}, {"k", K}, {"b", B}});
  const Type outType = f64({{"n", N}, {"b", B}, {"m", M}, {"h", H}});
  const HostTensor a = randomNormal(aType, 61);
  const HostTensor bv = randomNormal(bType, 62);
  Graph g;
  const NodeId ai = addInput(g, "a", aType);
  const NodeId bi = addInput(g, "b", bType);
  Node n = makeNode(Op::Contract, outType, {ai, bi});
  n.axes = {"k"};
  const HostTensor out = runSingle(g, g.add(n), {{"a", a}, {"b", bv}});
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t nn = 0; nn < N; ++nn) {
          double sum = 0;
          for (int64_t k = 0; k < K; ++k)
            sum += a.data[((b * M + m) * K + k) * H + h] * bv.data[((h * N + nn) * K + k) * B + b];
          CHECK(out.data[((nn * B + b) * M + m) * H + h] == Approx(sum).epsilon(1e-13));
        }
}

TEST_CASE("contraction over two axes with an output in product order", "[interpreter]") {
  const Type aType = f64({{"i", 3}, {"p", 4}, {"q", 2}});
  const Type bType = f64({{"q", 2}, {"j", 5}, {"p", 4}});
  const Type outType = f64({{"i", 3}, {"j", 5}});
  const HostTensor a = randomNormal(aType, 63);
  const HostTensor b = randomNormal(bType, 64);
  Graph g;
  Node n = makeNode(Op::Contract, outType, {addInput(g, "a", aType), addInput(g, "b", bType)});
  n.axes = {"q", "p"};
  const HostTensor out = runSingle(g, g.add(n), {{"a", a}, {"b", b}});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < 4; ++p)
        for (int64_t q = 0; q < 2; ++q)
          sum += a.data[(i * 4 + p) * 2 + q] * b.data[(q * 5 + j) * 4 + p];
      CHECK(out.data[i * 5 + j] == Approx(sum).epsilon(1e-13));
    }
}

TEST_CASE("large contraction (tiled, threaded) matches a naive loop", "[interpreter]") {
  // Sizes that leave partial tiles in every direction and enough work for threads.
  const int64_t B = 2, M = 70, K = 33, N = 300;
  const Type aType = f64({{"b", B}, {"m", M}, {"k", K}});
  const Type bType = f64({{"k", K}, {"n", N}, {"b", B}});
  const Type outType = f64({{"b", B}, {"m", M}, {"n", N}});
  const HostTensor a = randomNormal(aType, 65);
  const HostTensor bv = randomNormal(bType, 66);
  HostTensor expected = zeros(outType);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        double sum = 0;
        for (int64_t k = 0; k < K; ++k)
          sum += a.data[(b * M + m) * K + k] * bv.data[(k * N + n) * B + b];
        expected.data[(b * M + m) * N + n] = sum;
      }
  for (Precision precision : {Precision::F64, Precision::F32}) {
    Graph g;
    Node c = makeNode(Op::Contract, outType, {addInput(g, "a", aType), addInput(g, "b", bType)});
    c.axes = {"k"};
    const HostTensor out = runSingle(g, g.add(c), {{"a", a}, {"b", bv}}, {precision, true});
    CHECK(relativeError(out, expected) < (precision == Precision::F64 ? 1e-14 : 1e-6));
  }
}

TEST_CASE("gather: embedding lookup and batched gather", "[interpreter]") {
  SECTION("embedding: out[b t c] = table[v = index[b t], c]") {
    const Type tableType = f64({{"v", 10}, {"c", 4}});
    const Type indexType = i32({{"b", 2}, {"t", 3}});
    const Type outType = f64({{"c", 4}, {"b", 2}, {"t", 3}});
    const HostTensor table = randomNormal(tableType, 71);
    const HostTensor index = randomUniform(indexType, 72, 0, 10);
    Graph g;
    Node n = makeNode(Op::Gather, outType,
                      {addInput(g, "table", tableType), addInput(g, "index", indexType)});
    n.axes = {"v"};
    const HostTensor out = runSingle(g, g.add(n), {{"table", table}, {"index", index}});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 3; ++t)
        for (int64_t c = 0; c < 4; ++c) {
          const auto v = static_cast<int64_t>(index.data[b * 3 + t]);
          CHECK(out.data[(c * 2 + b) * 3 + t] == table.data[v * 4 + c]);
        }
  }

  SECTION("batched: out[b t] = table[b t v = index[t b]]") {
    const Type tableType = f64({{"b", 2}, {"t", 3}, {"v", 5}});
    const Type indexType = i32({{"t", 3}, {"b", 2}});
    const Type outType = f64({{"b", 2}, {"t", 3}});
    const HostTensor table = randomNormal(tableType, 73);
    const HostTensor index = randomUniform(indexType, 74, 0, 5);
    Graph g;
    Node n = makeNode(Op::Gather, outType,
                      {addInput(g, "table", tableType), addInput(g, "index", indexType)});
    n.axes = {"v"};
    const HostTensor out = runSingle(g, g.add(n), {{"table", table}, {"index", index}});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 3; ++t) {
        const auto v = static_cast<int64_t>(index.data[t * 2 + b]);
        CHECK(out.data[b * 3 + t] == table.data[(b * 3 + t) * 5 + v]);
      }
  }

  SECTION("shared and carried axes together: out[b t c] = table[b v = index[b t] c]") {
    const Type tableType = f64({{"b", 2}, {"v", 5}, {"c", 3}});
    const Type indexType = i32({{"b", 2}, {"t", 4}});
    const Type outType = f64({{"t", 4}, {"c", 3}, {"b", 2}});
    const HostTensor table = randomNormal(tableType, 75);
    const HostTensor index = randomUniform(indexType, 76, 0, 5);
    Graph g;
    Node n = makeNode(Op::Gather, outType,
                      {addInput(g, "table", tableType), addInput(g, "index", indexType)});
    n.axes = {"v"};
    const HostTensor out = runSingle(g, g.add(n), {{"table", table}, {"index", index}});
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 4; ++t)
        for (int64_t c = 0; c < 3; ++c) {
          const auto v = static_cast<int64_t>(index.data[b * 4 + t]);
          CHECK(out.data[(t * 3 + c) * 2 + b] == table.data[(b * 5 + v) * 3 + c]);
        }
  }
}

TEST_CASE("scatter-add: gather's adjoint, summing repeated indices", "[interpreter]") {
  SECTION("embedding gradient: out[v = index[b t], c] += values[b t c], summed over b and t") {
    const Type valuesType = f64({{"b", 2}, {"t", 6}, {"c", 4}});
    const Type indexType = i32({{"t", 6}, {"b", 2}});
    const Type outType = f64({{"c", 4}, {"v", 5}});
    const HostTensor values = randomNormal(valuesType, 77);
    const HostTensor index = randomUniform(indexType, 78, 0, 5);  // 12 draws from 5: repeats
    Graph g;
    Node n = makeNode(Op::ScatterAdd, outType,
                      {addInput(g, "values", valuesType), addInput(g, "index", indexType)});
    n.axes = {"b", "t"};
    n.newAxes = {"v"};
    const HostTensor out = runSingle(g, g.add(n), {{"values", values}, {"index", index}});
    std::vector<double> expected(4 * 5, 0.0);
    for (int64_t b = 0; b < 2; ++b)
      for (int64_t t = 0; t < 6; ++t)
        for (int64_t c = 0; c < 4; ++c) {
          const auto v = static_cast<int64_t>(index.data[t * 2 + b]);
          expected[c * 5 + v] += values.data[(b * 6 + t) * 4 + c];
        }
    for (size_t i = 0; i < expected.size(); ++i)
      CHECK(out.data[i] == Approx(expected[i]).epsilon(1e-14));
  }

  SECTION("batched: out[b v = index[b t]] += values[t b], summed over t only") {
    const Type valuesType = f64({{"t", 6}, {"b", 3}});
    const Type indexType = i32({{"b", 3}, {"t", 6}});
    const Type outType = f64({{"b", 3}, {"v", 4}});
    const HostTensor values = randomNormal(valuesType, 79);
    const HostTensor index = randomUniform(indexType, 80, 0, 4);
    Graph g;
    Node n = makeNode(Op::ScatterAdd, outType,
                      {addInput(g, "values", valuesType), addInput(g, "index", indexType)});
    n.axes = {"t"};
    n.newAxes = {"v"};
    const NodeId scattered = g.add(n);
    const HostTensor out = runSingle(g, scattered, {{"values", values}, {"index", index}});
    std::vector<double> expected(3 * 4, 0.0);
    for (int64_t b = 0; b < 3; ++b)
      for (int64_t t = 0; t < 6; ++t)
        expected[b * 4 + static_cast<int64_t>(index.data[b * 6 + t])] += values.data[t * 3 + b];
    for (size_t i = 0; i < expected.size(); ++i)
      CHECK(out.data[i] == Approx(expected[i]).epsilon(1e-14));

    HostTensor bad = index;
    bad.data[7] = 4;
    CHECK_THROWS_WITH(runSingle(g, scattered, {{"values", values}, {"index", bad}}),
                      Catch::Contains("index 4 is out of range"));
  }
}

TEST_CASE("broadcast repeats an array along new axes", "[interpreter]") {
  const Type xType = f64({{"c", 3}});
  const HostTensor x = randomNormal(xType, 85);
  Graph g;
  Node n = makeNode(Op::Broadcast, f64({{"b", 2}, {"c", 3}, {"t", 4}}), {addInput(g, "x", xType)});
  n.newAxes = {"b", "t"};
  const HostTensor out = runSingle(g, g.add(n), {{"x", x}});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 3; ++c)
      for (int64_t t = 0; t < 4; ++t) CHECK(out.data[(b * 3 + c) * 4 + t] == x.data[c]);
}

TEST_CASE("split and merge are inverse, row-major", "[interpreter]") {
  const Type xType = f64({{"b", 2}, {"c", 12}});
  const HostTensor x = randomNormal(xType, 81);
  Graph g;
  const NodeId xi = addInput(g, "x", xType);
  Node split = makeNode(Op::Split, f64({{"d", 4}, {"b", 2}, {"h", 3}}), {xi});
  split.axes = {"c"};
  split.newAxes = {"h", "d"};
  const NodeId parts = g.add(split);
  Node merge = makeNode(Op::Merge, xType, {parts});
  merge.axes = {"h", "d"};
  merge.newAxes = {"c"};
  const NodeId back = g.add(merge);
  Node transposed = makeNode(Op::Merge, f64({{"e", 12}, {"b", 2}}), {parts});
  transposed.axes = {"d", "h"};
  transposed.newAxes = {"e"};
  const NodeId swapped = g.add(transposed);
  g.outputs = {{"parts", parts}, {"back", back}, {"swapped", swapped}};
  const std::vector<HostTensor> out = interpret(g, {{"x", x}});

  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 3; ++h)
      for (int64_t d = 0; d < 4; ++d) {
        const double value = x.data[b * 12 + h * 4 + d];
        CHECK(out[0].data[(d * 2 + b) * 3 + h] == value);
        CHECK(out[2].data[(d * 3 + h) * 2 + b] == value);  // e = d * size(h) + h
      }
  CHECK(out[1].data == x.data);
}

TEST_CASE("slice and concat: the thirds of 3c and back", "[interpreter]") {
  const Type xType = f64({{"b", 2}, {"c3", 12}});
  const HostTensor x = randomNormal(xType, 91);
  Graph g;
  const NodeId xi = addInput(g, "x", xType);
  std::vector<NodeId> thirds;
  for (int64_t k = 0; k < 3; ++k) {
    // Alternate the output order to exercise layouts.
    const Type third = k == 1 ? f64({{"c", 4}, {"b", 2}}) : f64({{"b", 2}, {"c", 4}});
    Node slice = makeNode(Op::Slice, third, {xi});
    slice.axes = {"c3"};
    slice.newAxes = {"c"};
    slice.lo = 4 * k;
    slice.hi = 4 * k + 4;
    thirds.push_back(g.add(slice));
  }
  Node concat = makeNode(Op::Concat, f64({{"e", 12}, {"b", 2}}), thirds);
  concat.axes = {"c"};
  concat.newAxes = {"e"};
  const NodeId joined = g.add(concat);
  g.outputs = {{"k", thirds[1]}, {"joined", joined}};
  const std::vector<HostTensor> out = interpret(g, {{"x", x}});
  for (int64_t b = 0; b < 2; ++b) {
    for (int64_t c = 0; c < 4; ++c) CHECK(out[0].data[c * 2 + b] == x.data[b * 12 + 4 + c]);
    for (int64_t e = 0; e < 12; ++e) CHECK(out[1].data[e * 2 + b] == x.data[b * 12 + e]);
  }
}

TEST_CASE("transpose stores the same array in another axis order", "[interpreter]") {
  const Type xType = f64({{"b", 2}, {"t", 3}, {"c", 4}});
  const HostTensor x = randomNormal(xType, 95);
  Graph g;
  const NodeId xi = addInput(g, "x", xType);
  const HostTensor out = runSingle(
      g, g.add(makeNode(Op::Transpose, f64({{"t", 3}, {"c", 4}, {"b", 2}}), {xi})), {{"x", x}});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t t = 0; t < 3; ++t)
      for (int64_t c = 0; c < 4; ++c)
        CHECK(out.data[(t * 4 + c) * 2 + b] == x.data[(b * 3 + t) * 4 + c]);
}

TEST_CASE("index removes an axis; rename relabels one", "[interpreter]") {
  const Type xType = f64({{"b", 2}, {"t", 3}, {"c", 4}});
  const HostTensor x = randomNormal(xType, 101);
  Graph g;
  const NodeId xi = addInput(g, "x", xType);
  Node index = makeNode(Op::Index, f64({{"c", 4}, {"b", 2}}), {xi});
  index.axes = {"t"};
  index.lo = 2;
  Node rename = makeNode(Op::Rename, f64({{"s", 3}, {"c", 4}, {"b", 2}}), {xi});
  rename.axes = {"t"};
  rename.newAxes = {"s"};
  g.outputs = {{"last", g.add(index)}, {"renamed", g.add(rename)}};
  const std::vector<HostTensor> out = interpret(g, {{"x", x}});
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t c = 0; c < 4; ++c) {
      CHECK(out[0].data[c * 2 + b] == x.data[(b * 3 + 2) * 4 + c]);
      for (int64_t t = 0; t < 3; ++t)
        CHECK(out[1].data[(t * 4 + c) * 2 + b] == x.data[(b * 3 + t) * 4 + c]);
    }
}

TEST_CASE("inputs: permuted axes accepted, wrong types and missing values refused",
          "[interpreter]") {
  const Type xType = f64({{"b", 2}, {"c", 3}});
  Graph g;
  const NodeId x = addInput(g, "x", xType);
  Node n = makeNode(Op::Unary, xType, {x});
  n.unary = UnaryOp::Neg;
  const NodeId neg = g.add(n);
  const HostTensor xv = randomNormal(xType, 111);

  SECTION("a different axis order is permuted") {
    const HostTensor out = runSingle(g, neg, {{"x", permuteTo(xv, f64({{"c", 3}, {"b", 2}}))}});
    for (size_t i = 0; i < xv.data.size(); ++i) CHECK(out.data[i] == -xv.data[i]);
  }
  SECTION("a different dtype or different axes is an error naming both types") {
    HostTensor wrongDtype = xv;
    wrongDtype.type.dtype = DType::F32;
    CHECK_THROWS_WITH(runSingle(g, neg, {{"x", wrongDtype}}),
                      Catch::Contains(xType.str()) && Catch::Contains(wrongDtype.type.str()));
    const HostTensor wrongAxes = randomNormal(f64({{"b", 2}, {"c", 4}}), 1);
    CHECK_THROWS_WITH(runSingle(g, neg, {{"x", wrongAxes}}),
                      Catch::Contains(xType.str()) && Catch::Contains(wrongAxes.type.str()));
  }
  SECTION("a missing input is an error naming it") {
    CHECK_THROWS_WITH(runSingle(g, neg, {{"y", xv}}), Catch::Contains("'x'"));
  }
}

TEST_CASE("a gather index out of range names the node's location and the value", "[interpreter]") {
  auto file = std::make_shared<SourceFile>("model.dg",
                                           "line one\nline two\n    e = gather(w, tokens, v)\n");
  const Type tableType = f64({{"v", 10}, {"c", 2}});
  const Type indexType = i32({{"t", 3}});
  Graph g;
  Node n = makeNode(Op::Gather, f64({{"t", 3}, {"c", 2}}),
                    {addInput(g, "w", tableType), addInput(g, "tokens", indexType)});
  n.axes = {"v"};
  n.loc = SourceLoc{file, 3, 5};
  const NodeId gathered = g.add(n);
  const HostTensor table = randomNormal(tableType, 121);
  CHECK_THROWS_WITH(runSingle(g, gathered, {{"w", table}, {"tokens", {indexType, {1, 12, 3}}}}),
                    Catch::Contains("model.dg:3:5") && Catch::Contains("12"));
  CHECK_THROWS_WITH(runSingle(g, gathered, {{"w", table}, {"tokens", {indexType, {1, -1, 3}}}}),
                    Catch::Contains("model.dg:3:5") && Catch::Contains("-1"));
}

TEST_CASE("perturbation moves values by a rounding's worth, sums by their terms'", "[interpreter]") {
  // A sum of terms that cancel: its perturbation scales with the terms'
  // magnitudes (what its rounding does), not with the small result.
  const Type type = f64({{"c", 4}});
  Graph g;
  const NodeId x = addInput(g, "x", type);
  Node n = makeNode(Op::Reduce, f64({}), {x});
  n.reduce = ReduceOp::Sum;
  n.axes = {"c"};
  const NodeId s = g.add(n);
  const HostTensor xv{type, {1000, -1000, 1e-3, 0}};
  InterpreterOptions options;
  CHECK(runSingle(g, s, {{"x", xv}}, options).data[0] == Approx(1e-3).epsilon(1e-9));
  options.perturb = 1e-6;
  double largest = 0;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    options.perturbSeed = seed;
    const double moved = std::abs(runSingle(g, s, {{"x", xv}}, options).data[0] - 1e-3);
    // The inputs move by 1e-6 of themselves (2e-3 at most together), the sum by 1e-6 of 2000.001.
    CHECK(moved <= 1e-6 * 2000.002 + 1e-6 * 2000.002);
    largest = std::max(largest, moved);
  }
  CHECK(largest > 1e-6 * 2000 / 10);  // far more than 1e-6 of the result itself
}

TEST_CASE("perturbation leaves copies of values where they are: x == max(x) still holds", "[interpreter]") {
  // A maximum is one of its operand's values; moving it apart from that
  // value would leave a maximum's gradient (routed to the elements equal to
  // it) nowhere.
  const Type type = f64({{"c", 5}});
  Graph g;
  const NodeId x = addInput(g, "x", type);
  Node m = makeNode(Op::Reduce, f64({}), {x});
  m.reduce = ReduceOp::Max;
  m.axes = {"c"};
  const NodeId largest = g.add(m);
  Node eq = makeNode(Op::Compare, Type{DType::Bool, type.axes}, {x, largest});
  eq.compare = CompareOp::Eq;
  const NodeId isMax = g.add(eq);
  InterpreterOptions options;
  options.perturb = 1e-3;
  for (uint64_t seed = 0; seed < 8; ++seed) {
    options.perturbSeed = seed;
    const HostTensor mask = runSingle(g, isMax, {{"x", HostTensor{type, {0.5, 2, -1, 1.5, 0}}}}, options);
    CHECK(mask.data == std::vector<double>{0, 1, 0, 0, 0});
  }
}

TEST_CASE("and, or and not combine masks elementwise", "[interpreter]") {
  const Type type{DType::Bool, {{"c", 4}}};
  Graph g;
  const NodeId a = addInput(g, "a", type), b = addInput(g, "b", type);
  Node both = makeNode(Op::Binary, type, {a, b});
  both.binary = BinaryOp::And;
  const NodeId andId = g.add(both);
  Node either = makeNode(Op::Binary, type, {a, b});
  either.binary = BinaryOp::Or;
  const NodeId orId = g.add(either);
  Node negation = makeNode(Op::Unary, type, {a});
  negation.unary = UnaryOp::Not;
  const NodeId notId = g.add(negation);
  const std::map<std::string, HostTensor> inputs = {{"a", HostTensor{type, {0, 0, 1, 1}}},
                                                    {"b", HostTensor{type, {0, 1, 0, 1}}}};
  CHECK(runSingle(g, andId, inputs).data == std::vector<double>{0, 0, 0, 1});
  CHECK(runSingle(g, orId, inputs).data == std::vector<double>{0, 1, 1, 1});
  CHECK(runSingle(g, notId, inputs).data == std::vector<double>{1, 1, 0, 0});
}

TEST_CASE("pad puts the value around an axis", "[interpreter]") {
  // Compiled from the language (the front end builds both from views).
  Graph g = testing::compileFile("tests/diagrams/gradient_rules.dg", {{"N", 1}, {"M", 2}}, "padded");
  NodeId padded = -1;
  for (const Node& n : g.nodes)
    if (n.op == Op::Slice && n.type.has("e")) padded = n.id;
  REQUIRE(padded >= 0);
  const Type xType = g.node(g.inputs[0]).type;
  InterpreterOptions options;
  options.keep.insert(padded);
  const auto values = interpretNodes(g, {{"x", HostTensor{xType, {2, 3}}}, {"r", zeros(g.node(g.inputs[1]).type)}}, options);
  // x * x = (4, 9), 3 positions of 0.5 before and 2 * M = 4 after.
  CHECK(values.at(padded).data == std::vector<double>{0.5, 0.5, 0.5, 4, 9, 0.5, 0.5, 0.5, 0.5});
}

TEST_CASE("argmax, argmin and topk choose the first of equal values and never NaN", "[interpreter]") {
  // Compiled from the language: the front end writes them out in maxima,
  // comparisons, positions and a stack.
  Graph g = testing::compileFile("tests/diagrams/selections.dg", {}, "selections");
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const HostTensor x{g.node(g.inputs[0]).type,
                     {1, 3, 3, 2, -1,              // a tie for the largest: the first
                      -5, -2, -7, -2, -9,          // negative values only
                      2, 0, 2, 5, 0,               // ties for the second largest and the smallest
                      -inf, -inf, -inf, -inf, -inf, // all equal: positions in order, none twice
                      nan, 1, nan, 3, 2}};         // NaN never chosen
  const auto out = interpret(g, {{"x", x}});
  REQUIRE(out.size() == 3);
  CHECK(out[0].data == std::vector<double>{1, 1, 3, 0, 3});
  CHECK(out[1].data == std::vector<double>{4, 4, 1, 0, 1});
  REQUIRE(out[2].type.axes.back().name == "k");
  CHECK(out[2].data == std::vector<double>{1, 2, 3,  //
                                           1, 3, 0,  //
                                           3, 0, 2,  //
                                           0, 1, 2,  //
                                           3, 4, 1});
}

TEST_CASE("topk stops at size(a) where nothing is left but NaN", "[interpreter]") {
  // Only two numbers in the row: the third round has nothing to choose and
  // gives size(m), out of range (gather then refuses it, or reads NaN on the GPU).
  Graph g = testing::compileFile("tests/diagrams/selections.dg", {}, "selections");
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> data(25, 0.0);
  for (int i = 0; i < 5; ++i) data[static_cast<size_t>(i)] = i == 1 ? 4 : i == 3 ? 7 : nan;
  const auto out = interpret(g, {{"x", HostTensor{g.node(g.inputs[0]).type, data}}});
  CHECK(std::vector<double>(out[2].data.begin(), out[2].data.begin() + 3) == std::vector<double>{3, 1, 5});
  CHECK(out[0].data[0] == 3);
  CHECK(out[1].data[0] == 1);
}

TEST_CASE("scan runs a sum or a maximum along an axis, inclusive or exclusive", "[interpreter]") {
  // x [b:2 t:5 c:3] of fresh random values; the scans against running sums
  // and maxima written out here, at every position.
  Graph g = testing::compileFile("tests/diagrams/scans.dg", {{"B", 2}, {"T", 5}, {"C", 3}}, "scans");
  const auto inputs = testing::randomInputs(g, 31);
  const std::vector<double>& x = inputs.at("x").data;
  const auto out = interpret(g, inputs);
  for (int b = 0; b < 2; ++b)
    for (int c = 0; c < 3; ++c) {
      double sum = 0, most = -std::numeric_limits<double>::infinity();
      for (int t = 0; t < 5; ++t) {
        const size_t at = static_cast<size_t>((b * 5 + t) * 3 + c);
        INFO("b=" << b << " t=" << t << " c=" << c);
        CHECK(out[2].data[at] == Approx(sum).margin(1e-12));  // exclusive: before t
        sum += x[at];
        most = std::max(most, x[at]);
        CHECK(out[0].data[at] == Approx(sum).margin(1e-12));
        CHECK(out[1].data[at] == most);
      }
    }
}
