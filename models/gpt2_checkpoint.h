// llm.c's GPT-2 model checkpoint files, read and written, so that a model can
// move between llm.c, PyTorch scripts and llmc.
//
// Layout (little-endian): 256 int32 header words — magic 20240326, version
// (3: fp32 parameters, 5: bf16 parameters), maxT, V, L, H, C, Vp, the rest 0 —
// then the 16 parameters back to back, in gpt2Parameters() order and shapes.
#pragma once

#include <cstdint>
#include <string>

#include "gpt2_weights.h"

namespace llmc {

inline constexpr int32_t kCheckpointMagic = 20240326;
inline constexpr int32_t kCheckpointVersionF32 = 3;
inline constexpr int32_t kCheckpointVersionBF16 = 5;
inline constexpr int kCheckpointHeaderWords = 256;

// Writes weights to path, as fp32 or as bf16 (rounded to nearest, ties to
// even). The file appears whole or not at all: it is written to a fresh
// temporary beside it, synced, then renamed (common/atomic_file.h); a failure
// removes the temporary. Throws std::invalid_argument when a tensor's
// type does not match weights.config, std::runtime_error when writing fails.
void writeCheckpoint(const std::string& path, const Gpt2Weights& weights, bool bf16);

// Reads a checkpoint written by llm.c or by writeCheckpoint; bf16 parameters
// come back widened exactly. Throws std::runtime_error naming the file and
// what is wrong with it: missing or unreadable, a bad magic, an unknown
// version, sizes that do not make a GPT-2, too short (naming the parameter
// that is cut), longer than its parameters, or a parameter holding NaN or an
// infinity (named, with the value's index). Sizes are multiplied with checked
// arithmetic: a header's product too large for any file reads as too short.
Gpt2Weights readCheckpoint(const std::string& path);

}  // namespace llmc
