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

// How one parameter starts, as llm.c initialises GPT-2: weights normal with
// std 0.02, the projections back into the residual stream (attprojw,
// fcprojw) with 0.02/sqrt(2L), biases 0, layernorm gains 1; the padded rows
// of wte (V..Vp) 0. Element i (row-major) of a normal parameter is
// counter_normal::normal_at(key, i, mean, stddev) (runtime/cuda/device/llmc/
// counter_normal.h): a function of its position alone, which a GPU kernel
// makes the same (runtime/train/device_initialisation.h).
struct Gpt2ParameterStart {
  Gpt2Parameter parameter;
  enum class Kind { Normal, One, Zero } kind = Kind::Zero;
  float mean = 0, stddev = 0;
  uint64_t key = 0;     // the parameter's stream: drawn in order from one generator seeded with the seed
  int64_t drawn = 0;    // elements from the first that are drawn; the rest are 0 (wte's padded rows)
};

// Every parameter's start for a configuration and seed, in gpt2Parameters' order.
std::vector<Gpt2ParameterStart> gpt2Start(const Gpt2Config& config, uint64_t seed);

// The value of element i of a parameter at its start (a float).
float gpt2StartValue(const Gpt2ParameterStart& start, int64_t i);

// GPT-2 at its start (gpt2Start) on the host. Seeded and reproducible;
// values are floats, as a checkpoint stores them. (The values differ from
// llm.c's: its own generator.)
Gpt2Weights randomGpt2Weights(const Gpt2Config& config, uint64_t seed);

// Every parameter random and away from its initial value (biases and
// layernorm parameters included, the padded rows of wte too), scaled so that
// activations stay of order one: weights for tests in which every parameter
// must visibly change the output. Rounded to float.
Gpt2Weights randomGpt2TestWeights(const Gpt2Config& config, uint64_t seed);

}  // namespace llmc
