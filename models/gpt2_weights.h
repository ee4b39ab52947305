// GPT-2's parameters on the host: the 16 arrays diagrams/gpt2/model.dg takes
// as param inputs, with the types it declares (llm.c's layout, weights stored
// [out, in]), and their random initialisation.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpt2_config.h"
#include "tensor.h"

namespace llmc {

struct Gpt2Weights {
  Gpt2Config config;
  // Named as the diagram's inputs; the shapes are llm.c's.
  HostTensor wte;       // [Vp, C]: token embedding, also the classifier
  HostTensor wpe;       // [maxT, C]: position embedding
  HostTensor ln1w;      // [L, C]
  HostTensor ln1b;      // [L, C]
  HostTensor qkvw;      // [L, 3C, C]: q, k, v stacked, each [H, C/H]
  HostTensor qkvb;      // [L, 3C]
  HostTensor attprojw;  // [L, C, C]
  HostTensor attprojb;  // [L, C]
  HostTensor ln2w;      // [L, C]
  HostTensor ln2b;      // [L, C]
  HostTensor fcw;       // [L, 4C, C]
  HostTensor fcb;       // [L, 4C]
  HostTensor fcprojw;   // [L, C, 4C]
  HostTensor fcprojb;   // [L, C]
  HostTensor lnfw;      // [C]
  HostTensor lnfb;      // [C]

  // The parameters as interpreter inputs, keyed by the diagram's names.
  std::map<std::string, HostTensor> inputs() const;
};

// One parameter: its name, the type the diagram declares for it, and where a
// Gpt2Weights holds it.
struct Gpt2Parameter {
  std::string name;
  Type type;
  HostTensor Gpt2Weights::*member;
};

// The 16 parameters for a configuration, in llm.c's checkpoint order.
std::vector<Gpt2Parameter> gpt2Parameters(const Gpt2Config& config);

// Every parameter zero, with its declared type.
Gpt2Weights zeroGpt2Weights(const Gpt2Config& config);

// GPT-2's initialisation as llm.c does it: weights normal with std 0.02, the
// projections back into the residual stream (attprojw, fcprojw) with
// 0.02/sqrt(2L), biases 0, layernorm gains 1; the padded rows of wte (V..Vp)
// stay 0. Seeded and reproducible; values are rounded to float, as a
// checkpoint stores them. (The values differ from llm.c's: its own generator.)
Gpt2Weights randomGpt2Weights(const Gpt2Config& config, uint64_t seed);

// Every parameter random and away from its initial value (biases and
// layernorm parameters included, the padded rows of wte too), scaled so that
// activations stay of order one: weights for tests in which every parameter
// must visibly change the output. Rounded to float.
Gpt2Weights randomGpt2TestWeights(const Gpt2Config& config, uint64_t seed);

}  // namespace llmc
