// HellaSwag as llm.c runs it (-h 1): llm.c's eval file read back from a
// writer of its format written here, bad files refused by name, and the
// accuracy of a tiny model on examples whose right answers are known from an
// independent computation of each completion's mean loss (next-token logits,
// one prefix at a time).
#include "hellaswag.h"

#include <fmt/format.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>

#include "interpreter_trainer.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

// llm.c's write_evalfile (dev/data/data_common.py), written out again: a
// header of 256 int32, then each example as uint16 words.
void writeEvalFile(const std::string& path, const std::vector<MultipleChoiceExample>& examples,
                   int32_t magic = kEvalFileMagic) {
  std::vector<uint16_t> words;
  int32_t longest = 0;
  for (size_t i = 0; i < examples.size(); ++i) {
    const MultipleChoiceExample& e = examples[i];
    std::vector<uint16_t> ex = {65535, 0, static_cast<uint16_t>(i), static_cast<uint16_t>(e.label), kEvalCompletions,
                                static_cast<uint16_t>(e.context.size())};
    ex.insert(ex.end(), e.context.begin(), e.context.end());
    for (const auto& c : e.completions) {
      ex.push_back(static_cast<uint16_t>(c.size()));
      ex.insert(ex.end(), c.begin(), c.end());
    }
    ex[1] = static_cast<uint16_t>(ex.size() * 2);
    longest = std::max<int32_t>(longest, ex[1]);
    words.insert(words.end(), ex.begin(), ex.end());
  }
  std::vector<int32_t> header(256, 0);
  header[0] = magic;
  header[1] = 1;
  header[2] = static_cast<int32_t>(examples.size());
  header[3] = longest;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(header.data()), static_cast<std::streamsize>(header.size() * 4));
  out.write(reinterpret_cast<const char*>(words.data()), static_cast<std::streamsize>(words.size() * 2));
}

std::vector<MultipleChoiceExample> randomExamples(int count, int32_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  auto tokens = [&](int minLength, int maxLength) {
    std::vector<int32_t> out(static_cast<size_t>(minLength + static_cast<int>(rng() % (maxLength - minLength + 1))));
    for (auto& t : out) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab));
    return out;
  };
  std::vector<MultipleChoiceExample> examples(static_cast<size_t>(count));
  for (auto& e : examples) {
    e.label = static_cast<int>(rng() % kEvalCompletions);
    e.context = tokens(1, 5);
    for (auto& c : e.completions) c = tokens(1, 4);
  }
  return examples;
}

fs::path scratch(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("llmc_hellaswag_test_{}", ::getpid());
  fs::create_directories(dir);
  return dir / name;
}

// Each completion's mean loss from the next-token logits of each prefix: a
// computation independent of the eval batches and the per-position losses.
std::array<double, kEvalCompletions> referenceLosses(Trainer& trainer, const MultipleChoiceExample& e) {
  std::array<double, kEvalCompletions> out{};
  const int64_t V = trainer.config().V;
  for (int c = 0; c < kEvalCompletions; ++c) {
    std::vector<int32_t> prefix = e.context;
    double sum = 0;
    for (int32_t token : e.completions[static_cast<size_t>(c)]) {
      const std::vector<double> logits = trainer.nextTokenLogits(prefix);
      const double top = *std::max_element(logits.begin(), logits.begin() + V);
      double z = 0;
      for (int64_t v = 0; v < V; ++v) z += std::exp(logits[static_cast<size_t>(v)] - top);
      sum += top + std::log(z) - logits[static_cast<size_t>(token)];
      prefix.push_back(token);
    }
    out[static_cast<size_t>(c)] = sum / static_cast<double>(e.completions[static_cast<size_t>(c)].size());
  }
  return out;
}

}  // namespace

TEST_CASE("llm.c's eval file reads back as written", "[train][hellaswag]") {
  const auto examples = randomExamples(5, 60, 1);
  const std::string path = scratch("read.bin").string();
  writeEvalFile(path, examples);
  const EvalSet set = readEvalFile(path);
  REQUIRE(set.examples.size() == 5);
  for (size_t i = 0; i < examples.size(); ++i) {
    CHECK(set.examples[i].label == examples[i].label);
    CHECK(set.examples[i].context == examples[i].context);
    CHECK(set.examples[i].completions == examples[i].completions);
  }
}

TEST_CASE("a bad eval file is refused naming the file and what is wrong", "[train][hellaswag]") {
  const auto examples = randomExamples(3, 60, 2);
  const std::string path = scratch("bad.bin").string();
  writeEvalFile(path, examples, 12345);
  CHECK_THROWS_WITH(readEvalFile(path), Contains(path) && Contains("bad magic 12345 (an eval file has 20240522)"));
  writeEvalFile(path, examples, 20240520);
  CHECK_THROWS_WITH(readEvalFile(path), Contains("this is a token shard"));
  CHECK_THROWS_WITH(readEvalFile(scratch("none.bin").string()), Contains("none.bin: cannot open"));

  writeEvalFile(path, examples);
  fs::resize_file(path, fs::file_size(path) - 4);
  CHECK_THROWS_WITH(readEvalFile(path), Contains(path) && Contains("example 2 ends early"));
  fs::resize_file(path, 100);
  CHECK_THROWS_WITH(readEvalFile(path), Contains("shorter than the eval file's header"));

  auto badLabel = examples;
  badLabel[1].label = 4;
  writeEvalFile(path, badLabel);
  CHECK_THROWS_WITH(readEvalFile(path), Contains("example 1 has label 4"));

  writeEvalFile(path, examples);
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out.write("\xff\xff", 2);
  }
  CHECK_THROWS_WITH(readEvalFile(path), Contains("2 bytes after the last of the header's 3 examples"));
}

TEST_CASE("an example that does not fit T, or holds a token past V, is refused by index", "[train][hellaswag]") {
  auto examples = randomExamples(3, 60, 3);
  examples[2].context.assign(10, 1);
  const EvalSet set{"x.bin", examples};
  CHECK_THROWS_WITH(makeEvalBatch(set, 0, 3, 12, 12, 60), Contains("x.bin: example 2 takes"));
  examples[2].context = {59, 70};
  const EvalSet beyond{"x.bin", examples};
  CHECK_THROWS_WITH(makeEvalBatch(beyond, 2, 1, 4, 12, 60), Contains("example 2 holds token 70"));
}

TEST_CASE("the eval batch lays out llm.c's rows, targets and mask", "[train][hellaswag]") {
  MultipleChoiceExample e;
  e.context = {7, 8};
  e.completions = {std::vector<int32_t>{1}, {2, 3}, {4}, {5, 6, 9}};
  const EvalBatch b = makeEvalBatch(EvalSet{"x", {e}}, 0, 1, 8, 6, 60);
  CHECK(std::vector<int32_t>(b.inputs.begin() + 6, b.inputs.begin() + 12) == std::vector<int32_t>{7, 8, 2, 3, 0, 0});
  CHECK(std::vector<int32_t>(b.targets.begin() + 6, b.targets.begin() + 12) == std::vector<int32_t>{0, 2, 3, 0, 0, 0});
  CHECK(std::vector<uint8_t>(b.mask.begin() + 18, b.mask.begin() + 24) == std::vector<uint8_t>{0, 1, 1, 1, 0, 0});
  CHECK(std::all_of(b.mask.begin() + 24, b.mask.end(), [](uint8_t m) { return m == 0; }));  // rows past the example
}

TEST_CASE("HellaSwag's accuracy: the lowest mean completion loss, against the labels", "[train][hellaswag]") {
  const Gpt2Config config{1, 16, 2, 16, 60, 64};
  InterpreterTrainer trainer(repoPath("diagrams"), randomGpt2TestWeights(config, 11), 8, 10);
  auto examples = randomExamples(7, 60, 4);
  // The answers the model gives, computed independently.
  std::vector<int> predicted;
  std::vector<std::array<double, kEvalCompletions>> reference;
  for (const auto& e : examples) {
    reference.push_back(referenceLosses(trainer, e));
    predicted.push_back(predictedCompletion(reference.back()));
  }
  // Labels: right for examples 0, 2, 3 and 6, wrong for the others.
  const std::vector<bool> right = {true, false, true, true, false, false, true};
  for (size_t i = 0; i < examples.size(); ++i)
    examples[i].label = right[i] ? predicted[i] : (predicted[i] + 1) % kEvalCompletions;
  const std::string path = scratch("accuracy.bin").string();
  writeEvalFile(path, examples);
  const EvalSet set = readEvalFile(path);

  const auto losses = completionLosses(trainer, set, 8, 10);
  REQUIRE(losses.size() == examples.size());
  for (size_t i = 0; i < losses.size(); ++i)
    for (size_t c = 0; c < kEvalCompletions; ++c) CHECK(losses[i][c] == Approx(reference[i][c]).epsilon(1e-5));

  const HellaSwagResult result = evaluateHellaSwag(trainer, set, 8, 10);
  CHECK(result.examples == 7);
  CHECK(result.correct == 4);
  CHECK(result.accuracy() == Approx(4.0 / 7.0));
  // Packing: one example a pass (B < 4, which llm.c refuses) scores the same.
  const HellaSwagResult narrow = evaluateHellaSwag(trainer, set, 2, 10);
  CHECK(narrow.correct == 4);
}

TEST_CASE("the first of equally likely completions is predicted, as llm.c", "[train][hellaswag]") {
  CHECK(predictedCompletion({1.0, 0.5, 0.5, 2.0}) == 1);
  CHECK(predictedCompletion({0.2, 0.2, 0.2, 0.2}) == 0);
  CHECK(predictedCompletion({3.0, 2.0, 1.0, 0.0}) == 3);
}
