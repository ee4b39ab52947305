// GPT-2 model sizes, as llm.c names them (d12 = 124M ... d48 = 1.6B).
#pragma once

#include <cstdint>
#include <string>

#include "frontend/program.h"

namespace llmc {

struct Gpt2Config {
  int64_t L = 12;      // layers
  int64_t C = 768;     // channels
  int64_t H = 12;      // heads
  int64_t T = 1024;    // maximum sequence length
  int64_t V = 50257;   // vocabulary
  int64_t Vp = 50304;  // vocabulary padded to a multiple of 64

  // d12, d24, d36, d48 as GPT-2; other depths (d2, d4, ... for tests) with
  // 64 channels and one head per layer of depth.
  static Gpt2Config fromDepth(int64_t depth);
  // Parses "d12"; throws std::invalid_argument with a message otherwise.
  static Gpt2Config fromName(const std::string& name);

  // Parameters, with the padded vocabulary (llm.c's count).
  int64_t parameterCount() const;
  // The size bindings diagrams/gpt2/model.dg needs, for a batch of B rows of T tokens.
  SizeBindings sizes(int64_t B, int64_t T) const;
};

// Rounds a vocabulary up to a multiple of 64.
int64_t padVocabulary(int64_t V);

}  // namespace llmc
