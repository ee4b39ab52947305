// GPT-2's fresh weights made on the device: a kernel fills each parameter's
// part of the packed f32 master weights from its start (models/gpt2_weights.h:
// every value a function of its position, counter_normal.h), so that the
// host neither draws nor packs nor uploads the model (d48: 1.56B values, 5 s
// on 16 cores, on the way to the first step even when every plan and kernel
// comes from a cache). The values are the host's randomGpt2Weights but for
// the last bits of logf, sinf and cosf; some are read back and compared.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "cuda_driver.h"
#include "cuda_module.h"
#include "gpt2_weights.h"
#include "nvrtc_compiler.h"

namespace llmc {

// A parameter's start and where it lies in the packed array.
struct PackedStart {
  Gpt2ParameterStart start;
  int64_t offset = 0;  // its first element in the packed array
};

// The kernel that fills a parameter's range (llmc_gpt2_start), for `arch`.
cuda::KernelSource deviceStartSource(const std::string& arch);

// Fills elements [shardOffset, shardOffset + shardCount) of the packed array
// (of which `shard` holds exactly those, f32): each parameter's from its
// start, the pads between them 0. Asynchronous on `stream`.
void fillStart(cuda::Kernel& fill, CUdeviceptr shard, int64_t shardOffset, int64_t shardCount,
               const std::vector<PackedStart>& parameters, CUstream stream);

// Reads back a few values of each parameter in the shard (its first and
// last, and some between) after the fill, and throws naming the first that
// is not the host's value (within a few units in the last place): a fill
// that made another model is an error, not a training run.
void checkStart(CUdeviceptr shard, int64_t shardOffset, int64_t shardCount, const std::vector<PackedStart>& parameters);

}  // namespace llmc
