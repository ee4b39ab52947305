// HellaSwag (and any multiple-choice eval) as llm.c runs it (-h 1): the file
// dev/data/hellaswag.py writes, read whole, and each example scored by the
// mean loss over each candidate completion's tokens, the lowest predicted.
//
// File (llm.c's write_evalfile, little-endian): 256 int32 header words —
// magic 20240522, version 1, the number of examples, the longest example's
// bytes — then each example as uint16 words: 65535 (start of example), the
// example's bytes (these words included), its index (0, 1, ...), the label
// (the right completion), the number of completions (4), the context's length
// and tokens, then each completion's length and tokens.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trainer.h"

namespace llmc {

constexpr int32_t kEvalFileMagic = 20240522;
// llm.c's loader takes four completions an example, and so does this one.
constexpr int kEvalCompletions = 4;

struct MultipleChoiceExample {
  int label = 0;
  std::vector<int32_t> context;
  std::array<std::vector<int32_t>, kEvalCompletions> completions;
};

struct EvalSet {
  std::string path;
  std::vector<MultipleChoiceExample> examples;
};

// Throws std::runtime_error naming the file (and the example, by index) for
// a missing or short file, a bad magic number or version, an example whose
// delimiter, byte count, index, label or completion count is wrong, and bytes
// after the last example.
EvalSet readEvalFile(const std::string& path);

// The rows of llm.c's EvalLoader for a group of examples: example e's
// completion c is row 4e+c, the context then the completion; the target of
// the position before each completion token is that token, and only those
// positions are masked in. Rows past the examples are inactive (all 0).
struct EvalBatch {
  int64_t rows = 0, T = 0;
  std::vector<int32_t> inputs, targets;
  std::vector<uint8_t> mask;
};
// Throws std::runtime_error naming the file and example when an example does
// not fit in T tokens, or holds a token outside the vocabulary of `vocab`.
EvalBatch makeEvalBatch(const EvalSet& set, size_t first, size_t count, int64_t rows, int64_t T, int64_t vocab);

struct HellaSwagResult {
  int64_t correct = 0, examples = 0;
  double accuracy() const { return examples ? static_cast<double>(correct) / static_cast<double>(examples) : 0.0; }
};

// The rows of a forward pass that scores examples for micro-batches of B
// rows: max(1, B/4) examples of 4 completions (llm.c packs B/4 and needs
// B >= 4).
int64_t hellaswagRows(int64_t B);

// The mean loss of each completion of each example (llm.c's score: lower is
// likelier), from the trainer's per-position losses, hellaswagRows(B) rows of
// the trainer's T tokens a forward pass.
std::vector<std::array<double, kEvalCompletions>> completionLosses(Trainer& trainer, const EvalSet& set, int64_t B,
                                                                    int64_t T);
// The completion with the lowest mean loss; the first of equal ones, as llm.c.
int predictedCompletion(const std::array<double, kEvalCompletions>& losses);
HellaSwagResult evaluateHellaSwag(Trainer& trainer, const EvalSet& set, int64_t B, int64_t T);

}  // namespace llmc
