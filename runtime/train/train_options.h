// llmc-train's command line: llm.c's short flags where they mean the same, a
// long form for each, and llmc's own additions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lr_schedule.h"
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
  int64_t totalBatchTokens = 0;     // -d: tokens per optimizer step over all processes (0, or llm.c's -1: B*T*processes, no accumulation)
  int64_t maxSteps = -1;            // -x: optimizer steps (-1: one epoch)
  double learningRate = 3e-4;       // -l
  LrScheduleKind lrSchedule = LrScheduleKind::Cosine;  // -k
  int64_t warmupSteps = 0;          // -u
  double finalLrFraction = 1.0;     // -q: the decay ends at learningRate * this
  double weightDecay = 0.0;         // -c
  int64_t valEvery = 20;            // -v: steps between validations (0: never)
  int64_t valMaxSteps = 20;         // -m: batches per validation (-1: all)
  int64_t sampleEvery = 20;         // -s: steps between samples (0: never)
  int64_t genTokens = 64;           // -g: tokens per sample
  int64_t checkpointEvery = 0;      // -n: steps between checkpoints (0: only at the end)
  int64_t checkpointsToKeep = 0;    // -nk: checkpoints kept in -o, older ones deleted (0: all kept)
  int64_t majorCheckpointEvery = 0; // -nm: checkpoints at multiples of this are never deleted (0: none is major)
  bool hellaswag = false;           // -h 1: HellaSwag accuracy at validation time
  std::string hellaswagFile = "dev/data/hellaswag/hellaswag_val.bin";  // --hellaswag-file: llm.c's eval file
  bool overfitSingleBatch = false;  // -a 1: every step trains on the first batch(es) of the val data (else train)
  double skipUpdateLossZ = 0;       // -sl: skip the update when the loss's z-score exceeds this (0: never)
  double skipUpdateGradZ = 0;       // -sg: skip the update when the gradient norm's z-score exceeds this (0: never)
  bool resume = false;              // -y 1: continue from the newest checkpoint in -o
  bool holdLess = true;             // --hold-less (GPU path)
  int recompute = 1;                // -r: 0 store all, 1 or 2 the cost model chooses what the backward recomputes (GPU path)
  bool masterWeights = true;        // -w: fp32 master weights; 0 is refused where the weights are bf16 (GPU path)
  DeviceChoice device = DeviceChoice::Auto;
  bool bf16 = true;                 // --precision bf16|fp32: the GPU path's storage (mixed precision or fp32)
  bool cudaGraph = true;            // --cuda-graph 0|1: replay the GPU step as a CUDA graph
  uint64_t seed = 1337;             // --seed: initialisation, shuffling, sampling
  std::optional<int64_t> channels;  // --channels: override the width of a dN model
  std::optional<int64_t> heads;     // --heads: override the heads of a dN model
  bool checkpointBf16 = false;      // --checkpoint-bf16: write model files as bf16 (version 5)
  std::string tokenizerDir;         // --tokenizer: for printing samples
  double maxGradNorm = 1.0;         // --grad-clip
  bool shuffle = true;              // --shuffle 0|1: a new order of shards and windows each epoch (llm.c's default)
  ProcessGroupOptions processes;    // --gpus, -pn, -pr, -pg, -pf, -pi: data-parallel processes
  int zeroStage = 0;                // -z: 0 every process keeps the optimizer whole, 1 sharded (ZeRO-1)
  bool overlap = true;              // --overlap: ZeRO-0 averages the gradients beside the backward
  bool quiet = false;               // --quiet: no start-up, step or checkpoint lines
};

// Parses argv. Prints help and exits 0 for --help, and for -h without a
// number after it (-h 0|1 is llm.c's HellaSwag switch); throws
// std::invalid_argument with a message naming the flag for bad input.
TrainOptions parseTrainOptions(int argc, char** argv);

const char* trainUsage();

// The tokens per optimizer step: -d, or one micro-batch of every process.
// Throws std::invalid_argument when -d is not a multiple of B*T*processes.
int64_t resolveTotalBatch(const TrainOptions& options, int processes);

// The options given that only the CPU path does (skipped updates, -w 0 with
// bf16 weights), as the flags that asked for them: the GPU path refuses
// them, naming these.
std::vector<std::string> cpuPathOnlyFlags(const TrainOptions& options);

}  // namespace llmc
