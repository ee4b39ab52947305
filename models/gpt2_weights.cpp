#include "gpt2_weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

namespace llmc {

std::vector<Gpt2Parameter> gpt2Parameters(const Gpt2Config& config) {
  const int64_t L = config.L, C = config.C;
  auto f32 = [](std::vector<Axis> axes) { return Type{DType::F32, std::move(axes)}; };
  // Axis names as diagrams/gpt2/model.dg declares them.
  return {
      {"wte", f32({{"vp", config.Vp}, {"c", C}}), &Gpt2Weights::wte},
      {"wpe", f32({{"p", config.T}, {"c", C}}), &Gpt2Weights::wpe},
      {"ln1w", f32({{"l", L}, {"c", C}}), &Gpt2Weights::ln1w},
      {"ln1b", f32({{"l", L}, {"c", C}}), &Gpt2Weights::ln1b},
      {"qkvw", f32({{"l", L}, {"e", 3 * C}, {"c", C}}), &Gpt2Weights::qkvw},
      {"qkvb", f32({{"l", L}, {"e", 3 * C}}), &Gpt2Weights::qkvb},
      {"attprojw", f32({{"l", L}, {"o", C}, {"c", C}}), &Gpt2Weights::attprojw},
      {"attprojb", f32({{"l", L}, {"o", C}}), &Gpt2Weights::attprojb},
      {"ln2w", f32({{"l", L}, {"c", C}}), &Gpt2Weights::ln2w},
      {"ln2b", f32({{"l", L}, {"c", C}}), &Gpt2Weights::ln2b},
      {"fcw", f32({{"l", L}, {"f", 4 * C}, {"c", C}}), &Gpt2Weights::fcw},
      {"fcb", f32({{"l", L}, {"f", 4 * C}}), &Gpt2Weights::fcb},
      {"fcprojw", f32({{"l", L}, {"o", C}, {"f", 4 * C}}), &Gpt2Weights::fcprojw},
      {"fcprojb", f32({{"l", L}, {"o", C}}), &Gpt2Weights::fcprojb},
      {"lnfw", f32({{"c", C}}), &Gpt2Weights::lnfw},
      {"lnfb", f32({{"c", C}}), &Gpt2Weights::lnfb},
  };
}

std::map<std::string, HostTensor> Gpt2Weights::inputs() const {
  std::map<std::string, HostTensor> result;
  for (const Gpt2Parameter& p : gpt2Parameters(config)) result.emplace(p.name, this->*p.member);
  return result;
}

Gpt2Weights zeroGpt2Weights(const Gpt2Config& config) {
  Gpt2Weights w;
  w.config = config;
  for (const Gpt2Parameter& p : gpt2Parameters(config)) w.*p.member = zeros(p.type);
  return w;
}

namespace {

bool isLayernormGain(const std::string& name) { return name == "ln1w" || name == "ln2w" || name == "lnfw"; }
bool isLayernormBias(const std::string& name) { return name == "ln1b" || name == "ln2b" || name == "lnfb"; }
bool isBias(const std::string& name) {
  return name == "qkvb" || name == "attprojb" || name == "fcb" || name == "fcprojb";
}
bool isResidualProjection(const std::string& name) { return name == "attprojw" || name == "fcprojw"; }

// N(mean, stddev) values for a parameter, drawn in blocks of 2^20 that each
// have a generator seeded from (seed, block) and are rounded to f32 as drawn.
struct NormalFill {
  HostTensor* tensor;
  uint64_t seed;
  double mean, stddev;
};

// Every block of every fill, shared out to the machine's threads at once: the
// same values on any number of threads, and GPT-2's 124M parameters in a
// fraction of a second (a parameter's few blocks alone would keep most of the
// threads idle).
void drawNormal(const std::vector<NormalFill>& fills) {
  constexpr int64_t kBlock = int64_t{1} << 20;
  std::vector<std::pair<size_t, int64_t>> blocks;  // fill, block
  for (size_t f = 0; f < fills.size(); ++f) {
    const int64_t n = static_cast<int64_t>(fills[f].tensor->data.size());
    for (int64_t b = 0; b * kBlock < n; ++b) blocks.push_back({f, b});
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < blocks.size();) {
      const auto [f, b] = blocks[k];
      const NormalFill& fill = fills[f];
      std::seed_seq seq{static_cast<uint32_t>(fill.seed), static_cast<uint32_t>(fill.seed >> 32),
                        static_cast<uint32_t>(b), static_cast<uint32_t>(b >> 32)};
      std::mt19937_64 rng(seq);
      std::normal_distribution<double> normal(fill.mean, fill.stddev);
      std::vector<double>& data = fill.tensor->data;
      const int64_t end = std::min(static_cast<int64_t>(data.size()), (b + 1) * kBlock);
      for (int64_t i = b * kBlock; i < end; ++i) data[static_cast<size_t>(i)] = static_cast<float>(normal(rng));
    }
  };
  const size_t threads = std::min<size_t>(blocks.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& h : helpers) h.join();
}

// A checkpoint stores f32: keep the host values exactly representable, so that
// writing and reading them back, or handing them to PyTorch, changes nothing.
void roundToFloat(HostTensor& t) {
  for (double& v : t.data) v = static_cast<float>(v);
}

// Fills every parameter with fill(parameter, seed); each gets its own seed,
// drawn from one generator so that parameters are independent.
template <class Fill>
Gpt2Weights fillGpt2Weights(const Gpt2Config& config, uint64_t seed, Fill fill) {
  Gpt2Weights w;
  w.config = config;
  std::mt19937_64 seeds(seed);
  for (const Gpt2Parameter& p : gpt2Parameters(config)) {
    HostTensor& t = w.*p.member;
    t = fill(p, seeds());
    roundToFloat(t);
  }
  return w;
}

}  // namespace

Gpt2Weights randomGpt2Weights(const Gpt2Config& config, uint64_t seed) {
  const double residualScale = 1.0 / std::sqrt(2.0 * static_cast<double>(config.L));
  // Each parameter its own seed, drawn from one generator (independent parameters).
  Gpt2Weights w = zeroGpt2Weights(config);
  std::mt19937_64 seeds(seed);
  std::vector<NormalFill> normal;
  for (const Gpt2Parameter& p : gpt2Parameters(config)) {
    HostTensor& t = w.*p.member;
    const uint64_t s = seeds();
    if (isLayernormGain(p.name)) std::fill(t.data.begin(), t.data.end(), 1.0);
    else if (!isLayernormBias(p.name) && !isBias(p.name))
      normal.push_back({&t, s, 0, isResidualProjection(p.name) ? 0.02 * residualScale : 0.02});
  }
  drawNormal(normal);
  // llm.c initialises only the V real rows of wte; the padding is never a
  // token and its logits never count, so it stays zero.
  std::fill(w.wte.data.begin() + config.V * config.C, w.wte.data.end(), 0.0);
  return w;
}

Gpt2Weights randomGpt2TestWeights(const Gpt2Config& config, uint64_t seed) {
  return fillGpt2Weights(config, seed, [](const Gpt2Parameter& p, uint64_t s) {
    if (isLayernormGain(p.name)) return randomNormal(p.type, s, 1, 0.2);
    if (isLayernormBias(p.name) || isBias(p.name)) return randomNormal(p.type, s, 0, 0.2);
    if (p.name == "wte" || p.name == "wpe") return randomNormal(p.type, s, 0, 0.5);
    // A matrix [.., out, in]: std 1/sqrt(in) keeps each output of order one.
    const double fanIn = static_cast<double>(p.type.axes.back().size);
    return randomNormal(p.type, s, 0, 1 / std::sqrt(fanIn));
  });
}

}  // namespace llmc
