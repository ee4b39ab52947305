// llmc-train's command line: llm.c's short flags where they mean the same, a
// long form for each, and llmc's own additions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "process_group.h"

namespace llmc {

enum class DeviceChoice { Auto, Cpu, Cuda };

// The most tokens one micro-batch may hold (B*T; B and T each at most this
// too): 2^31 - 1, so that token positions fit the 32-bit indices of the
// buffers and kernels.
constexpr int64_t kMaxMicroBatchTokens = (int64_t{1} << 31) - 1;

struct TrainOptions {
  std::string trainData;            // -i: shard glob
  std::string valData;              // -j: shard glob; empty: no validation
  std::string model = "d12";        // -e: dN for a fresh model, or an llm.c checkpoint file
  std::string outputDir;            // -o: logs and checkpoints; empty: none
  int64_t batchSize = 4;            // -b: micro-batch rows B
  int64_t seqLen = 1024;            // -t: tokens per row T
  int64_t totalBatchTokens = 0;     // -d: tokens per optimizer step over all processes (0: B*T*processes, no accumulation)
  int64_t maxSteps = -1;            // -x: optimizer steps (-1: one epoch)
  double learningRate = 3e-4;       // -l
  int64_t warmupSteps = 0;          // -u
  double finalLrFraction = 1.0;     // -q: the cosine decays to learningRate * this
  double weightDecay = 0.0;         // -c
  int64_t valEvery = 20;            // -v: steps between validations (0: never)
  int64_t valMaxSteps = 20;         // -m: batches per validation
  int64_t sampleEvery = 20;         // -s: steps between samples (0: never)
  int64_t genTokens = 64;           // -g: tokens per sample
  int64_t checkpointEvery = 0;      // -n: steps between checkpoints (0: only at the end)
  bool resume = false;              // -y 1: continue from the newest checkpoint in -o
  int recompute = 1;                // -r: recompute activations in backward (GPU path)
  DeviceChoice device = DeviceChoice::Auto;
  bool bf16 = true;                 // --precision bf16|fp32: the GPU path's storage (mixed precision or fp32)
  bool cudaGraph = true;            // --cuda-graph 0|1: replay the GPU step as a CUDA graph
  uint64_t seed = 1337;             // --seed: initialisation, shuffling, sampling
  std::optional<int64_t> channels;  // --channels: override the width of a dN model
  std::optional<int64_t> heads;     // --heads: override the heads of a dN model
  bool checkpointBf16 = false;      // --checkpoint-bf16: write model files as bf16 (version 5)
  std::string tokenizerDir;         // --tokenizer: for printing samples
  double maxGradNorm = 1.0;         // --grad-clip
  bool shuffle = false;             // --shuffle: permute windows each epoch
  ProcessGroupOptions processes;    // --gpus, -pn, -pr, -pg, -pf, -pi: data-parallel processes
  int zeroStage = 0;                // -z: 0 every process keeps the optimizer whole, 1 sharded (ZeRO-1)
  bool overlap = true;              // --overlap: ZeRO-0 averages the gradients beside the backward
};

// Parses argv. Prints help and exits 0 for -h/--help; throws
// std::invalid_argument with a message naming the flag for bad input.
TrainOptions parseTrainOptions(int argc, char** argv);

const char* trainUsage();

// The tokens per optimizer step: -d, or one micro-batch of every process.
// Throws std::invalid_argument when -d is not a multiple of B*T*processes.
int64_t resolveTotalBatch(const TrainOptions& options, int processes);

}  // namespace llmc
