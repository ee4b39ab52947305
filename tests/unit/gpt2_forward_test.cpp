// GPT-2's diagrams (diagrams/gpt2/model.dg) run by the reference interpreter
// against a plain fp64 forward pass written here from the math, in llm.c's
// parameter layout, without looking at the diagrams.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "gpt2_weights.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

// Both sides compute in fp64, so they agree to rounding (about 1e-15). The
// tolerance is far below 1e-6 so that small mistakes show: GELU's 0.044715
// written 0.0447151 moves these logits by 2e-8.
constexpr double kTolerance = 1e-10;

// out[n, o] = bias[o] + sum_i in[n, i] * weight[o, i]: weight is [out, in].
std::vector<double> linear(const std::vector<double>& in, const double* weight, const double* bias, int64_t rows,
                           int64_t inSize, int64_t outSize) {
  std::vector<double> out(static_cast<size_t>(rows * outSize));
  for (int64_t n = 0; n < rows; ++n)
    for (int64_t o = 0; o < outSize; ++o) {
      double acc = bias ? bias[o] : 0.0;
      for (int64_t i = 0; i < inSize; ++i) acc += in[static_cast<size_t>(n * inSize + i)] * weight[o * inSize + i];
      out[static_cast<size_t>(n * outSize + o)] = acc;
    }
  return out;
}

// Normalises each row of C channels to mean 0 and variance 1 (biased), then
// scales by weight and shifts by bias.
std::vector<double> layernorm(const std::vector<double>& in, const double* weight, const double* bias, int64_t rows,
                              int64_t C) {
  std::vector<double> out(in.size());
  for (int64_t n = 0; n < rows; ++n) {
    const double* x = &in[static_cast<size_t>(n * C)];
    double mean = 0, variance = 0;
    for (int64_t c = 0; c < C; ++c) mean += x[c];
    mean /= static_cast<double>(C);
    for (int64_t c = 0; c < C; ++c) variance += (x[c] - mean) * (x[c] - mean);
    variance /= static_cast<double>(C);
    const double scale = 1 / std::sqrt(variance + 1e-5);
    for (int64_t c = 0; c < C; ++c) out[static_cast<size_t>(n * C + c)] = (x[c] - mean) * scale * weight[c] + bias[c];
  }
  return out;
}

double geluTanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

// qkv [B, T, 3C] holds q, k, v one after the other, each as H heads of C/H
// channels; returns the heads' outputs side by side, [B, T, C].
std::vector<double> causalSelfAttention(const std::vector<double>& qkv, int64_t B, int64_t T, int64_t C, int64_t H) {
  const int64_t headSize = C / H;
  const double scale = 1 / std::sqrt(static_cast<double>(headSize));
  std::vector<double> out(static_cast<size_t>(B * T * C));
  std::vector<double> weights(static_cast<size_t>(T));
  auto at = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t d) {
    return qkv[static_cast<size_t>((b * T + t) * 3 * C + part * C + h * headSize + d)];
  };
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t t = 0; t < T; ++t) {
        // Query t attends to keys 0..t.
        double maxScore = -INFINITY;
        for (int64_t x = 0; x <= t; ++x) {
          double dot = 0;
          for (int64_t d = 0; d < headSize; ++d) dot += at(b, t, 0, h, d) * at(b, x, 1, h, d);
          weights[static_cast<size_t>(x)] = dot * scale;
          maxScore = std::max(maxScore, dot * scale);
        }
        double total = 0;
        for (int64_t x = 0; x <= t; ++x) {
          double& w = weights[static_cast<size_t>(x)];
          w = std::exp(w - maxScore);
          total += w;
        }
        for (int64_t d = 0; d < headSize; ++d) {
          double acc = 0;
          for (int64_t x = 0; x <= t; ++x) acc += weights[static_cast<size_t>(x)] / total * at(b, x, 2, h, d);
          out[static_cast<size_t>((b * T + t) * C + h * headSize + d)] = acc;
        }
      }
  return out;
}

void addInPlace(std::vector<double>& x, const std::vector<double>& y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

// The logits [B, T, Vp] for tokens [B, T], straight from llm.c's layout.
std::vector<double> referenceLogits(const Gpt2Weights& w, const std::vector<int64_t>& tokens, int64_t B, int64_t T) {
  const Gpt2Config& config = w.config;
  const int64_t C = config.C, rows = B * T;
  std::vector<double> x(static_cast<size_t>(rows * C));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < C; ++c)
        x[static_cast<size_t>((b * T + t) * C + c)] =
            w.wte.data[static_cast<size_t>(tokens[static_cast<size_t>(b * T + t)] * C + c)] +
            w.wpe.data[static_cast<size_t>(t * C + c)];
  auto layer = [](const HostTensor& p, int64_t l, int64_t perLayer) { return p.data.data() + l * perLayer; };
  for (int64_t l = 0; l < config.L; ++l) {
    const std::vector<double> ln1 = layernorm(x, layer(w.ln1w, l, C), layer(w.ln1b, l, C), rows, C);
    const std::vector<double> qkv = linear(ln1, layer(w.qkvw, l, 3 * C * C), layer(w.qkvb, l, 3 * C), rows, C, 3 * C);
    const std::vector<double> heads = causalSelfAttention(qkv, B, T, C, config.H);
    addInPlace(x, linear(heads, layer(w.attprojw, l, C * C), layer(w.attprojb, l, C), rows, C, C));

    const std::vector<double> ln2 = layernorm(x, layer(w.ln2w, l, C), layer(w.ln2b, l, C), rows, C);
    std::vector<double> hidden = linear(ln2, layer(w.fcw, l, 4 * C * C), layer(w.fcb, l, 4 * C), rows, C, 4 * C);
    for (double& h : hidden) h = geluTanh(h);
    addInPlace(x, linear(hidden, layer(w.fcprojw, l, 4 * C * C), layer(w.fcprojb, l, C), rows, 4 * C, C));
  }
  const std::vector<double> normalised = layernorm(x, w.lnfw.data.data(), w.lnfb.data.data(), rows, C);
  return linear(normalised, w.wte.data.data(), nullptr, rows, C, config.Vp);  // the classifier shares wte
}

// Mean over positions of -log softmax(logits over the first V)[target].
double referenceLoss(const std::vector<double>& logits, const std::vector<int64_t>& targets, int64_t V, int64_t Vp) {
  double total = 0;
  for (size_t n = 0; n < targets.size(); ++n) {
    const double* row = &logits[n * static_cast<size_t>(Vp)];
    const double maxLogit = *std::max_element(row, row + V);
    double sumExp = 0;
    for (int64_t v = 0; v < V; ++v) sumExp += std::exp(row[v] - maxLogit);
    total += maxLogit + std::log(sumExp) - row[targets[n]];
  }
  return total / static_cast<double>(targets.size());
}

// ||a - b|| / ||b|| over the columns [first, last) of two [rows, width] arrays.
double columnsRelativeError(const std::vector<double>& a, const std::vector<double>& b, int64_t width, int64_t first,
                            int64_t last) {
  double diff = 0, norm = 0;
  for (size_t row = 0; row < a.size() / static_cast<size_t>(width); ++row)
    for (int64_t col = first; col < last; ++col) {
      const size_t i = row * static_cast<size_t>(width) + static_cast<size_t>(col);
      diff += (a[i] - b[i]) * (a[i] - b[i]);
      norm += b[i] * b[i];
    }
  return std::sqrt(diff / norm);
}

std::vector<int64_t> asIndices(const HostTensor& t) { return {t.data.begin(), t.data.end()}; }

void checkAgainstReference(const Gpt2Config& config, int64_t B, int64_t T, uint64_t seed) {
  // Every parameter random (biases, layernorms and padded wte rows included),
  // so that a parameter the diagrams ignored or swapped would show.
  const Gpt2Weights weights = randomGpt2TestWeights(config, seed);
  const Type tokenType{DType::I32, {{"b", B}, {"t", T}}};
  const HostTensor tokens = randomUniform(tokenType, seed + 1, 0, static_cast<double>(config.V));
  const HostTensor targets = randomUniform(tokenType, seed + 2, 0, static_cast<double>(config.V));
  std::map<std::string, HostTensor> inputs = weights.inputs();
  inputs["tokens"] = tokens;
  inputs["targets"] = targets;
  const InterpreterOptions fp64{Precision::F64};

  const std::vector<double> expectedLogits = referenceLogits(weights, asIndices(tokens), B, T);
  const Graph logitsGraph = compileFile("diagrams/gpt2/model.dg", config.sizes(B, T), "gpt2_logits");
  const HostTensor logits =
      permuteTo(interpret(logitsGraph, inputs, fp64).at(0), Type{DType::F32, {{"b", B}, {"t", T}, {"vp", config.Vp}}});
  const double realError = columnsRelativeError(logits.data, expectedLogits, config.Vp, 0, config.V);
  const double paddedError = columnsRelativeError(logits.data, expectedLogits, config.Vp, config.V, config.Vp);
  INFO("logits relative error: first V columns " << realError << ", padded columns " << paddedError);
  CHECK(realError <= kTolerance);
  CHECK(paddedError <= kTolerance);

  const double expectedLoss = referenceLoss(expectedLogits, asIndices(targets), config.V, config.Vp);
  const Graph lossGraph = compileFile("diagrams/gpt2/model.dg", config.sizes(B, T), "gpt2");
  const double loss = interpret(lossGraph, inputs, fp64).at(0).data.at(0);
  INFO("loss " << loss << ", reference " << expectedLoss << ", relative error "
               << std::abs(loss - expectedLoss) / expectedLoss);
  CHECK(std::abs(loss - expectedLoss) <= kTolerance * expectedLoss);
  // A loss that had counted the padded logits would be this far off.
  CHECK(std::abs(loss - referenceLoss(expectedLogits, asIndices(targets), config.Vp, config.Vp)) > 1e-3);
}

Gpt2Config smallConfig(int64_t L, int64_t C, int64_t H, int64_t maxT, int64_t V, int64_t Vp) {
  Gpt2Config config;
  config.L = L, config.C = C, config.H = H, config.T = maxT, config.V = V, config.Vp = Vp;
  return config;
}

}  // namespace

TEST_CASE("GPT-2 diagrams match an fp64 forward pass from the math: L=2 C=32 H=4", "[gpt2]") {
  checkAgainstReference(smallConfig(2, 32, 4, 32, 100, 128), /*B=*/3, /*T=*/16, /*seed=*/101);
}

TEST_CASE("GPT-2 diagrams match an fp64 forward pass from the math: L=3 C=48 H=2, T < maxT", "[gpt2]") {
  checkAgainstReference(smallConfig(3, 48, 2, 9, 50, 64), /*B=*/2, /*T=*/7, /*seed=*/202);
}
