// The front-end fuzzer's inputs: a corpus of diagram files (the repository's
// diagrams and the error tests) and the mutations made of them.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace llmc::fuzz {

// One corpus file: its text with relative imports made absolute (the mutated
// copy is written elsewhere), and the sizes its RUN lines bind (--set).
struct Seed {
  std::string path;
  std::string text;
  std::string sizes;  // "B=2,T=8": from '# RUN: ... --set ...', else ""
  bool grad = false;  // a RUN line differentiates it
};

// Every .dg file under each of `roots` (files over 64 KiB skipped).
std::vector<Seed> loadCorpus(const std::vector<std::string>& roots);

// One input to try: the diagram text and the sizes to bind.
struct Input {
  std::string text;
  std::string sizes;
  bool grad = false;
  std::vector<std::string> mutations;  // what was done, for the failure report
};

// Mutates a corpus file: one to four of byte flips, token splices from
// another file, line duplications and deletions, size values (0, 2^31, 2^40,
// 2^62, ...), deep nesting (parentheses, 'for' loops), long names and import
// lines (other corpus files, itself, devices, a FIFO, a directory, files that
// are not diagrams).
Input mutate(const std::vector<Seed>& corpus, std::mt19937_64& rng);

}  // namespace llmc::fuzz
