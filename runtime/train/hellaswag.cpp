#include "hellaswag.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

namespace llmc {

namespace {

constexpr int kHeaderWords = 256;
constexpr uint16_t kExampleStart = 65535;
constexpr int32_t kShardMagic = 20240520;  // a token shard, given where an eval file belongs

// Reads the uint16 words of the examples one at a time, naming the file and
// the example in what it throws.
class ExampleReader {
 public:
  ExampleReader(const std::string& path, const std::vector<uint16_t>& words) : path_(path), words_(words) {}

  bool done() const { return at_ == words_.size(); }
  size_t position() const { return at_; }

  uint16_t next(int64_t example, const char* what) {
    if (at_ >= words_.size())
      throw std::runtime_error(fmt::format("{}: example {} ends early, in its {} (truncated file)", path_, example, what));
    return words_[at_++];
  }

  std::vector<int32_t> tokens(int64_t example, const char* what) {
    const uint16_t length = next(example, what);
    if (length == 0) throw std::runtime_error(fmt::format("{}: example {} has an empty {}", path_, example, what));
    std::vector<int32_t> out;
    for (uint16_t i = 0; i < length; ++i) out.push_back(next(example, what));
    return out;
  }

 private:
  const std::string& path_;
  const std::vector<uint16_t>& words_;
  size_t at_ = 0;
};

MultipleChoiceExample readExample(ExampleReader& in, const std::string& path, int64_t index, int32_t longestBytes) {
  const size_t start = in.position();
  if (const uint16_t delimiter = in.next(index, "start"); delimiter != kExampleStart)
    throw std::runtime_error(fmt::format("{}: example {} starts with {}, not the delimiter {}", path, index, delimiter,
                                         kExampleStart));
  const uint16_t bytes = in.next(index, "byte count");
  if (const uint16_t stored = in.next(index, "index"); stored != static_cast<uint16_t>(index))
    throw std::runtime_error(fmt::format("{}: example {} says it is example {}", path, index, stored));
  MultipleChoiceExample example;
  example.label = in.next(index, "label");
  if (const uint16_t completions = in.next(index, "completion count"); completions != kEvalCompletions)
    throw std::runtime_error(fmt::format("{}: example {} has {} completions; llm.c's format here has {}", path, index,
                                         completions, kEvalCompletions));
  if (example.label >= kEvalCompletions)
    throw std::runtime_error(fmt::format("{}: example {} has label {}, not a completion (0 to {})", path, index,
                                         example.label, kEvalCompletions - 1));
  example.context = in.tokens(index, "context");
  for (auto& completion : example.completions) completion = in.tokens(index, "completion");
  const size_t read = (in.position() - start) * sizeof(uint16_t);
  if (read != bytes)
    throw std::runtime_error(
        fmt::format("{}: example {} says it has {} bytes, but its fields take {}", path, index, bytes, read));
  if (static_cast<int64_t>(read) > longestBytes)
    throw std::runtime_error(fmt::format("{}: example {} has {} bytes, more than the header's longest, {}", path, index,
                                         read, longestBytes));
  return example;
}

}  // namespace

EvalSet readEvalFile(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    throw std::runtime_error(fmt::format("{}: cannot open the HellaSwag eval file: {}", path, std::strerror(errno)));
  const std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  int32_t header[kHeaderWords];
  if (bytes.size() < sizeof(header))
    throw std::runtime_error(fmt::format("{}: {} bytes, shorter than the eval file's header of {} (truncated or not "
                                         "an eval file)",
                                         path, bytes.size(), sizeof(header)));
  std::memcpy(header, bytes.data(), sizeof(header));
  if (header[0] != kEvalFileMagic)
    throw std::runtime_error(fmt::format("{}: bad magic {} (an eval file has {}{})", path, header[0], kEvalFileMagic,
                                         header[0] == kShardMagic ? "; this is a token shard" : ""));
  if (header[1] != 1) throw std::runtime_error(fmt::format("{}: eval file version {} (expected 1)", path, header[1]));
  if (header[2] <= 0) throw std::runtime_error(fmt::format("{}: the header says {} examples", path, header[2]));
  if (header[3] <= 0)
    throw std::runtime_error(fmt::format("{}: the header's longest example is {} bytes", path, header[3]));
  if ((bytes.size() - sizeof(header)) % sizeof(uint16_t) != 0)
    throw std::runtime_error(fmt::format("{}: {} bytes is not the header and whole uint16 words", path, bytes.size()));
  std::vector<uint16_t> words((bytes.size() - sizeof(header)) / sizeof(uint16_t));
  std::memcpy(words.data(), bytes.data() + sizeof(header), words.size() * sizeof(uint16_t));

  EvalSet set{path, {}};
  ExampleReader in(path, words);
  for (int64_t i = 0; i < header[2]; ++i) set.examples.push_back(readExample(in, path, i, header[3]));
  if (!in.done())
    throw std::runtime_error(fmt::format("{}: {} bytes after the last of the header's {} examples", path,
                                         (words.size() - in.position()) * sizeof(uint16_t), header[2]));
  return set;
}

EvalBatch makeEvalBatch(const EvalSet& set, size_t first, size_t count, int64_t rows, int64_t T, int64_t vocab) {
  EvalBatch batch{rows, T, std::vector<int32_t>(static_cast<size_t>(rows * T), 0),
                  std::vector<int32_t>(static_cast<size_t>(rows * T), 0), std::vector<uint8_t>(static_cast<size_t>(rows * T), 0)};
  if (static_cast<int64_t>(count) * kEvalCompletions > rows)
    throw std::logic_error("makeEvalBatch: more examples than the rows hold");
  for (size_t e = 0; e < count; ++e) {
    const size_t index = first + e;
    const MultipleChoiceExample& example = set.examples.at(index);
    auto check = [&](const std::vector<int32_t>& tokens) {
      for (int32_t t : tokens)
        if (t >= vocab)
          throw std::runtime_error(fmt::format("{}: example {} holds token {}, outside the model's vocabulary of {}",
                                               set.path, index, t, vocab));
    };
    check(example.context);
    const auto contextLength = static_cast<int64_t>(example.context.size());
    for (int c = 0; c < kEvalCompletions; ++c) {
      const std::vector<int32_t>& completion = example.completions[static_cast<size_t>(c)];
      check(completion);
      const int64_t length = contextLength + static_cast<int64_t>(completion.size());
      if (length > T)
        throw std::runtime_error(fmt::format("{}: example {} takes {} tokens (context and completion {}); the rows "
                                             "hold T = {} (-t)",
                                             set.path, index, length, c, T));
      const int64_t row = (static_cast<int64_t>(e) * kEvalCompletions + c) * T;
      std::copy(example.context.begin(), example.context.end(), batch.inputs.begin() + row);
      for (int64_t j = 0; j < static_cast<int64_t>(completion.size()); ++j) {
        const auto at = static_cast<size_t>(row + contextLength + j);
        batch.inputs[at] = completion[static_cast<size_t>(j)];
        // The position before each completion token predicts it.
        batch.targets[at - 1] = completion[static_cast<size_t>(j)];
        batch.mask[at - 1] = 1;
      }
    }
  }
  return batch;
}

int64_t hellaswagRows(int64_t B) { return std::max<int64_t>(1, B / kEvalCompletions) * kEvalCompletions; }

std::vector<std::array<double, kEvalCompletions>> completionLosses(Trainer& trainer, const EvalSet& set, int64_t B,
                                                                    int64_t T) {
  const int64_t rows = hellaswagRows(B);
  const auto perPass = static_cast<size_t>(rows / kEvalCompletions);
  std::vector<std::array<double, kEvalCompletions>> out;
  for (size_t first = 0; first < set.examples.size(); first += perPass) {
    const size_t count = std::min(perPass, set.examples.size() - first);
    const EvalBatch batch = makeEvalBatch(set, first, count, rows, T, trainer.config().V);
    const std::vector<double> losses = trainer.tokenLosses(batch.inputs, batch.targets, rows);
    for (size_t e = 0; e < count; ++e) {
      std::array<double, kEvalCompletions> mean{};
      for (int c = 0; c < kEvalCompletions; ++c) {
        const auto row = static_cast<size_t>((static_cast<int64_t>(e) * kEvalCompletions + c) * T);
        double sum = 0;
        int64_t n = 0;
        for (size_t t = 0; t < static_cast<size_t>(T); ++t)
          if (batch.mask[row + t]) sum += losses[row + t], ++n;
        mean[static_cast<size_t>(c)] = sum / static_cast<double>(n);
      }
      out.push_back(mean);
    }
  }
  return out;
}

int predictedCompletion(const std::array<double, kEvalCompletions>& losses) {
  int best = 0;
  for (int c = 1; c < kEvalCompletions; ++c)
    if (losses[static_cast<size_t>(c)] < losses[static_cast<size_t>(best)]) best = c;
  return best;
}

HellaSwagResult evaluateHellaSwag(Trainer& trainer, const EvalSet& set, int64_t B, int64_t T) {
  HellaSwagResult result;
  const auto losses = completionLosses(trainer, set, B, T);
  for (size_t i = 0; i < losses.size(); ++i) {
    result.correct += predictedCompletion(losses[i]) == set.examples[i].label;
    ++result.examples;
  }
  return result;
}

}  // namespace llmc
