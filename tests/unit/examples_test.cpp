// Diagrams that GPT-2 does not use, run in the interpreter against results
// computed here by plain loops.
#include <catch2/catch.hpp>

#include <cmath>

#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

TEST_CASE("RMSNorm diagram matches a direct computation", "[examples]") {
  const int64_t N = 3, C = 7;
  Graph g = compileFile("diagrams/examples/rmsnorm.dg", {{"N", N}, {"C", C}});
  auto in = randomInputs(g, 11);
  HostTensor y = interpret(g, in).at(0);
  const HostTensor& x = in.at("x");
  const HostTensor& w = in.at("w");
  HostTensor expected = zeros(y.type);
  for (int64_t n = 0; n < N; ++n) {
    double ms = 0;
    for (int64_t c = 0; c < C; ++c) ms += x.at({{"n", n}, {"c", c}}) * x.at({{"n", n}, {"c", c}});
    double scale = 1 / std::sqrt(ms / C + 1e-6);
    for (int64_t c = 0; c < C; ++c)
      expected.at({{"n", n}, {"c", c}}) = x.at({{"n", n}, {"c", c}}) * scale * w.at({{"c", c}});
  }
  CHECK(relativeError(y, expected) < 1e-12);
}

TEST_CASE("grouped-query attention diagram matches a direct computation", "[examples]") {
  const int64_t B = 2, H = 6, G = 2, T = 3, X = 5, D = 4;
  Graph g = compileFile("diagrams/examples/grouped_query_attention.dg",
                        {{"B", B}, {"H", H}, {"G", G}, {"T", T}, {"X", X}, {"D", D}});
  auto in = randomInputs(g, 12);
  HostTensor o = interpret(g, in).at(0);
  const HostTensor &q = in.at("q"), &k = in.at("k"), &v = in.at("v");
  HostTensor expected = zeros(o.type);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h) {
      int64_t group = h / (H / G);  // query head h reads key/value head h / (H/G)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<double> s(X);
        double m = -INFINITY, l = 0;
        for (int64_t x = 0; x < X; ++x) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d)
            dot += q.at({{"b", b}, {"h", h}, {"t", t}, {"d", d}}) * k.at({{"b", b}, {"g", group}, {"x", x}, {"d", d}});
          s[x] = dot / std::sqrt(double(D));
          m = std::max(m, s[x]);
        }
        for (auto& e : s) l += (e = std::exp(e - m));
        for (int64_t d = 0; d < D; ++d) {
          double acc = 0;
          for (int64_t x = 0; x < X; ++x) acc += s[x] / l * v.at({{"b", b}, {"g", group}, {"x", x}, {"d", d}});
          expected.at({{"b", b}, {"h", h}, {"t", t}, {"d", d}}) = acc;
        }
      }
    }
  CHECK(relativeError(o, expected) < 1e-12);
}

TEST_CASE("a chain of three contractions matches a direct computation", "[examples]") {
  const int64_t I = 3, J = 4, K = 5, Lr = 2, M = 6;
  Graph g = compileFile("diagrams/examples/contraction_chain.dg",
                        {{"I", I}, {"J", J}, {"K", K}, {"Lr", Lr}, {"M", M}});
  auto in = randomInputs(g, 13);
  HostTensor out = interpret(g, in).at(0);
  const HostTensor &a = in.at("a"), &b = in.at("b"), &c = in.at("c"), &d = in.at("d");
  HostTensor expected = zeros(out.type);
  for (int64_t i = 0; i < I; ++i)
    for (int64_t m = 0; m < M; ++m) {
      double acc = 0;
      for (int64_t j = 0; j < J; ++j)
        for (int64_t k = 0; k < K; ++k)
          for (int64_t l = 0; l < Lr; ++l)
            acc += a.at({{"i", i}, {"j", j}}) * b.at({{"j", j}, {"k", k}}) * c.at({{"k", k}, {"l", l}}) *
                   d.at({{"l", l}, {"m", m}});
      expected.at({{"i", i}, {"m", m}}) = acc;
    }
  CHECK(relativeError(out, expected) < 1e-12);
}
