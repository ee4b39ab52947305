// llmc-sample's engine (runtime/train/sampler.h): the choice of a token
// (greedy, top-k, temperature, seeded) and generation, greedy decoding checked
// against argmax over the CPU trainer's own next-token scores.
#include "sampler.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <vector>

#include "interpreter_trainer.h"

using llmc::Gpt2Config;
using llmc::Gpt2Sampler;
using llmc::pickToken;
using llmc::SamplingOptions;

namespace {

const std::string kDiagrams = std::string(LLMC_SOURCE_DIR) + "/diagrams";

// A GPT-2 small enough to compile and run in a moment; maxT 8, so that 12
// tokens slide the window.
Gpt2Config tinyConfig() {
  Gpt2Config c;
  c.L = 1;
  c.C = 16;
  c.H = 2;
  c.T = 8;
  c.V = 50;
  c.Vp = 64;
  return c;
}

}  // namespace

TEST_CASE("sampler: greedy picks the highest score, the lowest id among equals, and draws nothing",
          "[sampler]") {
  const std::vector<double> logits = {0.5, 2.0, -1.0, 2.0, 1.0, 99.0 /* padded: never counts */};
  std::mt19937_64 rng(7);
  const std::mt19937_64 before = rng;
  CHECK(pickToken(logits, 5, {.topK = 0, .temperature = 0}, rng) == 1);
  CHECK(pickToken(logits, 5, {.topK = 1, .temperature = 1.5}, rng) == 1);
  CHECK(rng == before);
  CHECK(pickToken(logits, 6, {.topK = 1, .temperature = 1}, rng) == 5);
}

TEST_CASE("sampler: top-k and temperature draw from the softmax of the kept scores", "[sampler]") {
  const std::vector<double> logits = {std::log(1.0), std::log(2.0), std::log(3.0), std::log(4.0), -10.0};
  std::mt19937_64 rng(1);
  const int draws = 40000;
  std::map<int, int> counts;
  for (int i = 0; i < draws; ++i) ++counts[pickToken(logits, 5, {.topK = 3, .temperature = 1}, rng)];
  CHECK(counts.count(0) == 0);  // outside the top 3
  CHECK(counts.count(4) == 0);
  // Probabilities 2/9, 3/9, 4/9; a few standard deviations (about 0.0025).
  CHECK(counts[1] / double(draws) == Approx(2.0 / 9).margin(0.012));
  CHECK(counts[2] / double(draws) == Approx(3.0 / 9).margin(0.012));
  CHECK(counts[3] / double(draws) == Approx(4.0 / 9).margin(0.012));
  // Temperature 0.5 squares the odds: 1, 4, 9, 16 over 30.
  counts.clear();
  for (int i = 0; i < draws; ++i) ++counts[pickToken(logits, 5, {.topK = 0, .temperature = 0.5}, rng)];
  CHECK(counts[3] / double(draws) == Approx(16.0 / 30).margin(0.012));
  CHECK(counts[0] / double(draws) == Approx(1.0 / 30).margin(0.006));
}

TEST_CASE("sampler: bad scores and options are refused", "[sampler]") {
  std::mt19937_64 rng(1);
  const std::vector<double> logits = {1.0, NAN};
  CHECK_THROWS_WITH(pickToken(logits, 2, {}, rng), "the score of token 1 is NaN");
  CHECK_THROWS_WITH(pickToken(logits, 1, {.topK = 0, .temperature = -1}, rng),
                    "the temperature must be 0 or more, got -1");
  CHECK_THROWS_WITH(pickToken(logits, 3, {}, rng), "a vocabulary of 3 does not fit 2 scores");
}

TEST_CASE("sampler: greedy generation is argmax of the CPU trainer's next-token scores", "[sampler]") {
  const llmc::Gpt2Weights weights = llmc::randomGpt2Weights(tinyConfig(), 11);
  Gpt2Sampler sampler(kDiagrams, weights);
  const std::vector<int32_t> prompt = {49, 3, 17};
  const std::vector<int32_t> greedy = sampler.generate(prompt, 12, {.topK = 0, .temperature = 0}, 5);
  REQUIRE(greedy.size() == 12);
  // The same through top-k 1, whatever the seed.
  CHECK(sampler.generate(prompt, 12, {.topK = 1, .temperature = 1}, 99) == greedy);

  // Step by step: the last maxT tokens, the highest score over [0, V).
  llmc::InterpreterTrainer trainer(kDiagrams, weights, 1, 8);
  std::vector<int32_t> context = prompt;
  for (int32_t expected : greedy) {
    const std::vector<int32_t> window(context.end() - std::min<ptrdiff_t>(8, context.size()), context.end());
    const std::vector<double> logits = trainer.nextTokenLogits(window);
    REQUIRE(logits.size() == 64);
    const int32_t argmax = static_cast<int32_t>(std::max_element(logits.begin(), logits.begin() + 50) - logits.begin());
    CHECK(argmax == expected);
    context.push_back(expected);
  }
}

TEST_CASE("sampler: a seed gives the same tokens, another seed others", "[sampler]") {
  Gpt2Sampler sampler(kDiagrams, llmc::randomGpt2Weights(tinyConfig(), 11));
  const SamplingOptions options{.topK = 0, .temperature = 1};
  const std::vector<int32_t> a = sampler.generate({49}, 10, options, 1);
  CHECK(sampler.generate({49}, 10, options, 1) == a);
  CHECK(sampler.generate({49}, 10, options, 2) != a);
  for (int32_t id : a) CHECK((id >= 0 && id < 50));
  CHECK_THROWS_WITH(sampler.nextTokenLogits({50}), "token 50 is outside the model's vocabulary of 50");
}
