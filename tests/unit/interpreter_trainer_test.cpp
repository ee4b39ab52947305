// The CPU training path: the optimizer diagram against AdamW written out by
// hand, the learning-rate schedule, and a tiny GPT-2 that must learn.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "interpreter_trainer.h"
#include "lr_schedule.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

Gpt2Config tinyConfig() { return Gpt2Config{1, 16, 2, 16, 60, 64}; }

std::vector<int32_t> randomTokens(size_t n, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int32_t> out(n);
  for (auto& t : out) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
  return out;
}

}  // namespace

TEST_CASE("the optimizer diagram is AdamW with global-norm clipping", "[train]") {
  Gpt2Config config = tinyConfig();
  Gpt2Weights weights = randomGpt2TestWeights(config, 3);
  InterpreterTrainer trainer(repoPath("diagrams"), weights, 2, 8);
  auto tokens = randomTokens(16, 60, 1), targets = randomTokens(16, 60, 2);

  // The gradient the step will use, from a second trainer on the same weights.
  InterpreterTrainer probe(repoPath("diagrams"), weights, 2, 8);
  probe.forwardBackward(tokens, targets, 1.0);

  trainer.forwardBackward(tokens, targets, 1.0);
  OptimizerSettings s;
  s.learningRate = 1e-2;
  s.weightDecay = 0.1;
  s.maxGradNorm = 0.5;  // small enough that clipping happens
  double norm = trainer.optimizerStep(s);
  REQUIRE(norm > s.maxGradNorm);

  // AdamW by hand (as torch.optim.AdamW) from the first trainer's gradient,
  // read back through the moments: after one step m = (1-beta1)*clip*g.
  const auto& m = trainer.optimizerState().m;
  const auto& v = trainer.optimizerState().v;
  double clip = s.maxGradNorm / (norm + 1e-6);
  size_t offset = 0;
  double maxError = 0;
  int64_t decayed = 0;
  for (const auto& p : gpt2Parameters(config)) {
    const auto& before = (weights.*p.member).data;
    const auto& after = (trainer.weights().*p.member).data;
    bool matrix = p.name == "wte" || p.name == "wpe" || p.name == "qkvw" || p.name == "attprojw" ||
                  p.name == "fcw" || p.name == "fcprojw";
    for (size_t i = 0; i < before.size(); ++i, ++offset) {
      double g = m[offset] / (1 - s.beta1) / clip;
      CHECK(v[offset] == Approx((1 - s.beta2) * clip * clip * g * g).epsilon(1e-4).margin(1e-12));
      double mHat = m[offset] / (1 - s.beta1), vHat = v[offset] / (1 - s.beta2);
      double expected = before[i] * (1 - s.learningRate * (matrix ? s.weightDecay : 0)) -
                        s.learningRate * mHat / (std::sqrt(vHat) + s.eps);
      maxError = std::max(maxError, std::abs(after[i] - expected));
      decayed += matrix;
    }
  }
  CHECK(maxError < 1e-6);
  CHECK(decayed > 0);
}

TEST_CASE("the learning rate warms up linearly and decays by a cosine", "[train]") {
  LrSchedule s{1e-3, 10, 110, 0.1};
  CHECK(s.at(0) == Approx(1e-4));
  CHECK(s.at(9) == Approx(1e-3));
  CHECK(s.at(10) == Approx(1e-3));
  CHECK(s.at(60) == Approx(0.55e-3));  // halfway down the cosine
  CHECK(s.at(110) == Approx(1e-4));
  LrSchedule constant{1e-3, 0, 50, 1.0};
  CHECK(constant.at(0) == Approx(1e-3));
  CHECK(constant.at(49) == Approx(1e-3));
}

TEST_CASE("a tiny GPT-2 learns a fixed batch on the CPU path", "[train]") {
  Gpt2Config config = tinyConfig();
  InterpreterTrainer trainer(repoPath("diagrams"), randomGpt2Weights(config, 5), 2, 8);
  auto tokens = randomTokens(16, 60, 7);
  std::vector<int32_t> targets(tokens.begin() + 1, tokens.end());
  targets.push_back(0);
  OptimizerSettings s;
  s.learningRate = 3e-2;
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    double loss = trainer.forwardBackward(tokens, targets, 1.0);
    trainer.optimizerStep(s);
    if (step == 0) first = loss;
    last = loss;
  }
  INFO("loss " << first << " -> " << last);
  CHECK(first == Approx(std::log(60.0)).epsilon(0.05));  // near uniform at initialisation
  CHECK(last < 0.3 * first);
  // Sampling sees the same model: scores over the padded vocabulary.
  CHECK(trainer.nextTokenLogits({1, 2, 3}).size() == 64);
}
