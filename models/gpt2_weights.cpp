#include "gpt2_weights.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "cuda/device/llmc/counter_normal.h"

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

// Every parameter's values from its start, the arrays shared out in blocks
// to the machine's threads (a parameter's few blocks alone would keep most of
// them idle): each value is a function of its position, so the same on any
// number of threads.
void fillFromStart(Gpt2Weights& w, const std::vector<Gpt2ParameterStart>& starts) {
  constexpr int64_t kBlock = int64_t{1} << 20;
  std::vector<std::pair<size_t, int64_t>> blocks;  // start, block
  for (size_t s = 0; s < starts.size(); ++s) {
    const int64_t n = starts[s].parameter.type.elementCount();
    for (int64_t b = 0; b * kBlock < n; ++b) blocks.push_back({s, b});
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t k; (k = next++) < blocks.size();) {
      const auto [s, b] = blocks[k];
      const Gpt2ParameterStart& start = starts[s];
      std::vector<double>& data = (w.*start.parameter.member).data;
      const int64_t end = std::min(static_cast<int64_t>(data.size()), (b + 1) * kBlock);
      if (start.kind != Gpt2ParameterStart::Kind::Normal) {
        const double value = start.kind == Gpt2ParameterStart::Kind::One ? 1.0 : 0.0;
        for (int64_t i = b * kBlock; i < end; ++i) data[static_cast<size_t>(i)] = i < start.drawn ? value : 0.0;
        continue;
      }
      // Four values a generator block (kBlock is a multiple of 4).
      for (int64_t i = b * kBlock; i < end; i += 4) {
        const counter_normal::Four z = counter_normal::normals(start.key, static_cast<uint64_t>(i / 4));
        for (int64_t j = i; j < std::min(end, i + 4); ++j)
          data[static_cast<size_t>(j)] = j < start.drawn ? static_cast<double>(start.mean + start.stddev * z.z[j - i]) : 0.0;
      }
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

std::vector<Gpt2ParameterStart> gpt2Start(const Gpt2Config& config, uint64_t seed) {
  const float residualScale = static_cast<float>(1.0 / std::sqrt(2.0 * static_cast<double>(config.L)));
  // Each parameter its own stream, drawn from one generator (independent parameters).
  std::mt19937_64 keys(seed);
  std::vector<Gpt2ParameterStart> starts;
  for (const Gpt2Parameter& p : gpt2Parameters(config)) {
    Gpt2ParameterStart s{p};
    s.key = keys();
    s.drawn = p.type.elementCount();
    if (isLayernormGain(p.name)) {
      s.kind = Gpt2ParameterStart::Kind::One;
    } else if (!isLayernormBias(p.name) && !isBias(p.name)) {
      s.kind = Gpt2ParameterStart::Kind::Normal;
      s.stddev = isResidualProjection(p.name) ? 0.02f * residualScale : 0.02f;
    }
    // llm.c initialises only the V real rows of wte; the padding is never a
    // token and its logits never count, so it stays zero.
    if (p.name == "wte") s.drawn = config.V * config.C;
    starts.push_back(s);
  }
  return starts;
}

float gpt2StartValue(const Gpt2ParameterStart& start, int64_t i) {
  if (i >= start.drawn || start.kind == Gpt2ParameterStart::Kind::Zero) return 0.0f;
  if (start.kind == Gpt2ParameterStart::Kind::One) return 1.0f;
  return counter_normal::normal_at(start.key, static_cast<uint64_t>(i), start.mean, start.stddev);
}

Gpt2Weights randomGpt2Weights(const Gpt2Config& config, uint64_t seed) {
  Gpt2Weights w = zeroGpt2Weights(config);
  fillFromStart(w, gpt2Start(config, seed));
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
