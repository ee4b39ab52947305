// Text from a GPT-2: the scores of the next token (the gpt2_next_logits entry
// of diagrams/gpt2/model.dg in the reference interpreter, the entry the CPU
// trainer samples with) and the choice of a token from them, with top-k and a
// temperature. llmc-sample's engine (tools/llmc_sample.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gpt2_weights.h"
#include "ir/ir.h"

namespace llmc {

struct SamplingOptions {
  int64_t topK = 0;          // the K likeliest tokens only; 0: all
  double temperature = 1.0;  // the scores divided by it before the softmax; 0: greedy
};

// The token chosen from `logits` over the real vocabulary [0, V) (the padded
// rows after V never count). Greedy (temperature 0 or top-k 1): the highest
// score, the lowest id among equals, and `rng` untouched. Otherwise one draw
// of `rng` against the softmax of the top-k scores over the temperature,
// walked in order of score (ties by id), so that a seed gives the same token
// on every platform. Throws std::invalid_argument for a NaN score, a negative
// or non-finite temperature, a negative top-k or V outside the logits.
int pickToken(std::span<const double> logits, int64_t V, const SamplingOptions& options, std::mt19937_64& rng);

class Gpt2Sampler {
 public:
  // diagramsDir holds gpt2/model.dg.
  Gpt2Sampler(std::string diagramsDir, Gpt2Weights weights);

  // Scores of the token after `context` (1..maxT tokens, each in [0, V)) over
  // the padded vocabulary. Compiles the entry once per context length.
  std::vector<double> nextTokenLogits(const std::vector<int32_t>& context);

  // `count` tokens after `context` (at least one token), each picked from the
  // scores of the last maxT tokens before it; `onToken` sees each as it comes.
  std::vector<int32_t> generate(std::vector<int32_t> context, int64_t count, const SamplingOptions& options,
                                uint64_t seed, const std::function<void(int32_t)>& onToken = {});

  const Gpt2Config& config() const { return weights_.config; }

 private:
  std::string diagramsDir_;
  Gpt2Weights weights_;
  std::map<std::string, HostTensor> parameters_;  // weights_.inputs() and the tokens
  std::map<int64_t, Graph> byLength_;
};

}  // namespace llmc
