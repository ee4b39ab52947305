// GPT-2 training on the GPU: every kernel generated from the diagrams —
// the training step (forward, backward by autodiff, recomputation where the
// cost model chose it), the validation loss, the sampler's scores, gradient
// clipping and AdamW (gpt2/optimizer.dg) and the mixed-precision glue
// (gpt2/mixed_precision.dg) — compiled by NVRTC through the kernel cache and
// run on one stream, the step replayed as a CUDA graph.
//
// Mixed precision as llm.c: the step reads bf16 parameters and keeps its
// activations in bf16; it writes fp32 gradients for the optimizer, which
// keeps fp32 master weights and moments, then rounds the new weights to the
// step's bf16 copy. With fp32 storage every array is fp32.
//
// Data-parallel (GpuTrainerOptions::dataParallel): one trainer per process
// and GPU, each on its share of every batch. The gradients are averaged over
// the processes by NCCL before the optimizer; with ZeRO stage 1 each process
// keeps and updates only its shard of the master weights and moments (the
// gradient reduce-scattered, the squares for the global norm summed, the new
// bf16 weights all-gathered), with stage 0 every process updates them all.
//
// Device memory is planned once: the parameters and the optimizer's arrays
// packed into flat arrays (each parameter 128-element aligned), and one arena
// for everything else, shared by the modules since they never run at once,
// each module's arrays placed in it by the memory plan (compiler/planning/memory_plan.h).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cuda_context.h"
#include "cuda_stream.h"
#include "device_buffer.h"
#include "module_executor.h"
#include "nccl_communicator.h"
#include "nvml_library.h"
#include "overlapped_reduction.h"
#include "trainer.h"

namespace llmc {

struct Target;

struct GpuTrainerOptions {
  bool bf16 = true;        // storage of the step's arrays (false: fp32 everywhere)
  bool cudaGraph = true;   // replay the step as a CUDA graph
  bool recompute = true;   // the recompute pass decides what the backward remakes (false: it reads stored values)
  bool holdLess = true;    // and remakes, for a write, what would be held across the step's peak (ir/recompute.h)
  // > 0: also plan the per-position losses of this many rows of T tokens
  // (gpt2_token_losses), which HellaSwag scores (-h 1); 0: none, nothing planned.
  int64_t tokenLossRows = 0;
  std::filesystem::path kernelCache;  // empty: KernelCache::defaultDirectory()
  unsigned compileThreads = 0;        // 0: one per hardware thread
  int gpu = 0;
  struct DataParallel {
    cuda::NcclUniqueId id;  // from rank 0 (runtime/train/process_group.h)
    int rank = 0, processes = 1;
    int zeroStage = 0;      // 0: every process keeps the optimizer whole; 1: sharded
    // ZeRO-0: average the gradients beside the backward (overlapped_reduction.h)
    // rather than after the step.
    bool overlap = true;
  };
  std::optional<DataParallel> dataParallel;
  // A fresh model: the master weights made on the device from this seed
  // (device_start.h), the same values as randomGpt2Weights' but for the last
  // bits; the model function is then never called.
  std::optional<uint64_t> startSeed;
};

// What starting took, for the log.
struct GpuStartup {
  std::string device, arch;
  double planSeconds = 0;     // diagrams to planned, emitted kernels (or the module cache)
  int modules = 0, plansFromCache = 0;  // modules planned, and read back from the module cache
  double compileSeconds = 0;  // NVRTC or the cache, and loading
  cuda::JitSummary jit;       // NVRTC or the cache alone
  double loadSeconds = 0;     // the compiled kernels loaded into the context
  double allocateSeconds = 0; // device memory allocated and zeroed
  double weightsSeconds = 0;  // the model packed, uploaded and rounded to the step's copy
  // Of weightsSeconds, waiting for the master weights packed beside the
  // planning and the compiling (the model still in the making, or large).
  double packWaitSeconds = 0;
  bool weightsMadeOnDevice = false;  // a fresh model made from the seed there (device_start.h)
  double contextSeconds = 0;  // the GPU's context and stream (and NCCL's communicator)
  double executorsSeconds = 0;  // the modules' executors and memory plans
  int64_t stepLaunches = 0;
  int64_t arenaBytes = 0, arenaSeparateBytes = 0;  // the shared arena, and its arrays one by one
  int64_t deviceBytes = 0;    // everything the trainer allocated
  int64_t gradientBytes = 0;  // what the processes reduce each optimizer step (data-parallel)
  int reductionBuckets = 0;   // ZeRO-0 overlapped: buckets averaged beside the backward
  int64_t overlappedBytes = 0;  // of those, the bytes that start before the step's last launch
};

class GpuTrainer final : public DeviceTrainer {
 public:
  // Throws NoGpuError without a usable GPU, and std::runtime_error naming
  // the sizes when the model does not fit its memory.
  GpuTrainer(const std::string& diagramsDir, const Gpt2Weights& weights, int64_t B, int64_t T, GpuTrainerOptions options);
  // The model asked for only when its values go to the device, after the
  // kernels are planned and compiled: it may still be in the making.
  GpuTrainer(const std::string& diagramsDir, const Gpt2Config& config, const std::function<const Gpt2Weights&()>& model,
             int64_t B, int64_t T, GpuTrainerOptions options);
  ~GpuTrainer() override;

  double forwardBackward(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                         double gradScale) override;
  double loss(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets) override;
  double optimizerStep(const OptimizerSettings& settings) override;
  std::vector<double> nextTokenLogits(const std::vector<int32_t>& context) override;
  bool givesTokenLosses() const override { return options_.tokenLossRows > 0; }
  std::vector<double> tokenLosses(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                                  int64_t rows) override;

  const Gpt2Config& config() const override { return config_; }
  const Gpt2Weights& weights() override;
  const OptimizerState& optimizerState() override;
  void restoreOptimizerState(OptimizerState state) override;
  int64_t parameterCount() const override { return parameterCount_; }

  // The gradient the next optimizer step applies (the sum over this step's
  // micro-batches), in gpt2Parameters() order and layout: for checks.
  std::vector<double> gradient();

  const GpuStartup& startup() const { return startup_; }
  // Data-parallel: GPU time of the last optimizer step's communication (the
  // gradient's reduction, and with ZeRO-1 the norm's and the weights' gather),
  // in ms; none for one process, or where it ran beside the backward.
  std::optional<double> communicationMilliseconds() const override { return communicationMilliseconds_; }
  // Nominal dense bf16 tensor-core rate of the GPU (its target file), for MFU.
  double peakFlops() const override { return peakFlops_; }
  int64_t deviceBytes() const override { return startup_.deviceBytes; }
  std::optional<uint64_t> energyMillijoules() const override;

 private:
  struct Slice {
    std::string name;
    HostTensor Gpt2Weights::*member;
    int64_t offset = 0, count = 0;  // elements in the packed arrays
    bool decays = false;            // AdamW's weight decay applies: a matrix
  };
  struct Module;

  Module& module(const std::string& name);
  void planModules(const std::string& diagramsDir, const Target& target, int64_t B, int64_t T, bool sharded,
                   const std::set<std::string>& gradients);
  std::vector<float> packed(const std::vector<double>& perParameter) const;  // parameter order -> padded
  std::unique_ptr<float[]> packedMaster(const Gpt2Weights& weights) const;  // the model -> padded f32
  void setDecayMask();  // 1 over the decayed parameters' elements of the shard, 0 elsewhere
  std::vector<double> unpacked(const cuda::DeviceBuffer& buffer) const;     // padded -> parameter order
  void uploadTokens(cuda::DeviceBuffer& buffer, const std::vector<int32_t>& tokens, int64_t expected);
  void setScalar(int slot, float value);
  float readScalar(int slot) const;
  void runStep(bool reduceGradients);
  void averageScalar(int slot);  // over the processes
  bool sharded() const;          // ZeRO-1
  cuda::NcclDataType storageType() const;
  void gatherParameters();       // ZeRO-1: every shard of the step's parameters to every process
  // The gathered shards of a sharded f32 array, packed layout (ZeRO-1).
  std::vector<float> gathered(const cuda::DeviceBuffer& shard);
  std::vector<double> unpackedFlat(const std::vector<float>& flat) const;

  Gpt2Config config_;
  int64_t B_, T_;
  GpuTrainerOptions options_;
  std::chrono::steady_clock::time_point started_;  // for GpuStartup's figures
  cuda::Context context_;
  std::unique_ptr<cuda::Stream> stream_;
  std::vector<Slice> slices_;
  int64_t parameterCount_ = 0, packedCount_ = 0;
  // The optimizer's share of the packed arrays: all of them, or with ZeRO-1
  // this process's shard.
  int64_t shardOffset_ = 0, shardCount_ = 0;
  std::unique_ptr<cuda::NcclCommunicator> communicator_;
  std::unique_ptr<OverlappedReduction> overlappedReduction_;  // ZeRO-0 with overlap
  bool gradientReduced_ = false;  // the step averaged this optimizer step's gradient already
  std::optional<double> communicationMilliseconds_;
  double peakFlops_ = 0;
  std::unique_ptr<cuda::PowerMeter> powerMeter_;  // none where NVML is missing

  // Device arrays (packed: packedCount_ elements).
  cuda::DeviceBuffer params_;                // the step's copy, in its storage
  cuda::DeviceBuffer master_[2], m_[2], v_[2];  // f32, the optimizer's share; [current_] holds the present state ([1] unused in place)
  cuda::DeviceBuffer gradient_;              // f32, what the last step wrote
  cuda::DeviceBuffer accumulated_[2];        // f32 sums over micro-batches, allocated on first use
  cuda::DeviceBuffer decayMask_;              // the optimizer's share
  cuda::DeviceBuffer tokens_, targets_, sampleTokens_;
  cuda::DeviceBuffer evalTokens_, evalTargets_;  // tokenLossRows x T, where planned
  cuda::DeviceBuffer scalars_;               // 16-byte slots: losses, norm, the optimizer's settings
  cuda::DeviceBuffer arena_;
  int current_ = 0;
  bool stateInPlace_ = false;  // the optimizer writes master_[0], m_[0], v_[0] over themselves
  int accumulatedIn_ = -1;   // accumulated_[i] holds this optimizer step's sum; -1: none yet
  int64_t microBatches_ = 0;  // since the last optimizer step

  std::map<std::string, std::unique_ptr<Module>> modules_;
  std::unique_ptr<cuda::CapturedGraph> stepGraph_, reducingStepGraph_;
  int64_t stepRuns_ = 0;

  GpuStartup startup_;
  std::optional<Gpt2Weights> hostWeights_;  // weights() since the last update
  OptimizerState state_;                    // step count; m and v filled by optimizerState()
};

}  // namespace llmc
