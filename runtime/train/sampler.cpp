#include "sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "driver/pipeline.h"
#include "interpreter.h"

namespace llmc {

int pickToken(std::span<const double> logits, int64_t V, const SamplingOptions& options, std::mt19937_64& rng) {
  if (V < 1 || V > static_cast<int64_t>(logits.size()))
    throw std::invalid_argument(fmt::format("a vocabulary of {} does not fit {} scores", V, logits.size()));
  if (!(options.temperature >= 0) || !std::isfinite(options.temperature))
    throw std::invalid_argument(fmt::format("the temperature must be 0 or more, got {}", options.temperature));
  if (options.topK < 0) throw std::invalid_argument(fmt::format("top-k must be 0 or more, got {}", options.topK));
  for (int64_t id = 0; id < V; ++id)
    if (std::isnan(logits[id])) throw std::invalid_argument(fmt::format("the score of token {} is NaN", id));

  // Highest score first, ties by id: the order both the cut and the walk use.
  std::vector<int> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  const auto before = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  const int64_t keep = options.topK == 0 ? V : std::min(options.topK, V);
  if (options.temperature == 0 || keep == 1) return *std::min_element(order.begin(), order.end(), before);
  std::partial_sort(order.begin(), order.begin() + keep, order.end(), before);
  order.resize(static_cast<size_t>(keep));

  const double top = logits[order.front()];
  if (std::isinf(top)) {
    if (top < 0) throw std::invalid_argument("every score is -inf");
    return order.front();  // +inf: certain
  }
  std::vector<double> weights;
  weights.reserve(order.size());
  double total = 0;
  for (int id : order) total += weights.emplace_back(std::exp((logits[id] - top) / options.temperature));
  // 53 random bits: the same double from the same seed everywhere
  // (std::uniform_real_distribution's algorithm is the library's choice).
  const double u = static_cast<double>(rng() >> 11) * 0x1.0p-53 * total;
  double sum = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    sum += weights[i];
    if (u < sum) return order[i];
  }
  return order.back();  // u within rounding of the total
}

Gpt2Sampler::Gpt2Sampler(std::string diagramsDir, Gpt2Weights weights)
    : diagramsDir_(std::move(diagramsDir)), weights_(std::move(weights)), parameters_(weights_.inputs()) {}

std::vector<double> Gpt2Sampler::nextTokenLogits(const std::vector<int32_t>& context) {
  const Gpt2Config& c = weights_.config;
  const int64_t length = static_cast<int64_t>(context.size());
  if (length < 1 || length > c.T)
    throw std::invalid_argument(fmt::format("a context of {} tokens does not fit the model (1 to {})", length, c.T));
  for (int32_t id : context)
    if (id < 0 || id >= c.V)
      throw std::invalid_argument(fmt::format("token {} is outside the model's vocabulary of {}", id, c.V));
  auto it = byLength_.find(length);
  if (it == byLength_.end()) {
    PipelineOptions options;
    options.path = diagramsDir_ + "/gpt2/model.dg";
    options.entry = "gpt2_next_logits";
    options.sizes = c.sizes(1, length);
    it = byLength_.emplace(length, compileToIR(options)).first;
  }
  // Into the parameters' map itself: a copy of it would copy every weight.
  parameters_["tokens"] = HostTensor{Type{DType::I32, {{"b", 1}, {"t", length}}}, std::vector<double>(context.begin(), context.end())};
  // f32 arithmetic, as the CPU trainer's sampling.
  InterpreterOptions precision;
  precision.precision = Precision::F32;
  return interpret(it->second, parameters_, precision).at(0).data;
}

std::vector<int32_t> Gpt2Sampler::generate(std::vector<int32_t> context, int64_t count,
                                           const SamplingOptions& options, uint64_t seed,
                                           const std::function<void(int32_t)>& onToken) {
  if (context.empty()) throw std::invalid_argument("sampling needs a context of at least one token");
  std::mt19937_64 rng(seed);
  std::vector<int32_t> generated;
  const size_t window = static_cast<size_t>(weights_.config.T);
  for (int64_t i = 0; i < count; ++i) {
    const std::vector<int32_t> last(context.end() - static_cast<ptrdiff_t>(std::min(window, context.size())),
                                    context.end());
    const int32_t token = pickToken(nextTokenLogits(last), weights_.config.V, options, rng);
    context.push_back(token);
    generated.push_back(token);
    if (onToken) onToken(token);
  }
  return generated;
}

}  // namespace llmc
