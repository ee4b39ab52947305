// llmc-train's way to the GPU path, in a header that needs no CUDA toolkit:
// tools/llmc_train.cpp includes only this, so it builds either way. With the
// toolkit, gpu_path.cpp (library llmc_train_gpu) starts a GpuTrainer; an llmc
// built without it has gpu_path_absent.cpp instead, which sees no GPU and
// answers BuiltWithoutCuda where one is asked for.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <memory>
#include <string>

#include "gpt2_weights.h"
#include "planning/gpu_query.h"
#include "process_group.h"
#include "trainer.h"

namespace llmc {

// GPU work asked of an llmc built without the CUDA toolkit. A NoGpuError, so
// that --device auto falls back to the CPU path as it does on a machine
// without a GPU; the message says what to do.
class BuiltWithoutCuda : public NoGpuError {
 public:
  // `what`: what asked for the GPU ("--device cuda"), or empty; `hint`: what
  // to do instead, or empty.
  explicit BuiltWithoutCuda(const std::string& what, const std::string& hint = "");
};

// Throws BuiltWithoutCuda naming `what` in an llmc built without the toolkit
// (before any work, for what only the GPU path does); nothing otherwise.
void requireGpuPath(const std::string& what);

// The GPUs this node's driver shows: 0 without a driver, and 0 in an llmc
// built without the toolkit.
int gpusOnThisNode();

// GPU `gpu`'s CUDA context made on a thread beside the model's making (a
// second or so of the driver's start); the trainer's context is then the same
// one, and this keeps it for the run.
class EarlyGpuContext {
 public:
  explicit EarlyGpuContext(int gpu);
  ~EarlyGpuContext();
  EarlyGpuContext(const EarlyGpuContext&) = delete;
  EarlyGpuContext& operator=(const EarlyGpuContext&) = delete;
  // Waits for it. False where none could be made: the trainer meets the same
  // error and reports it.
  bool ready();

 private:
  struct Making;
  std::unique_ptr<Making> making_;
};

// What the command line says of the GPU path.
struct GpuPathOptions {
  bool bf16 = true;
  bool cudaGraph = true;
  bool recompute = true;
  bool holdLess = true;  // --hold-less
  int64_t tokenLossRows = 0;  // > 0: per-position losses of this many rows (HellaSwag)
  ProcessPlace place;  // size > 1: data-parallel, the NCCL id exchanged through place.rendezvousDir
  int zeroStage = 0;
  bool overlap = true;
  bool quiet = false;  // no start-up lines (llmc-train --quiet)
  // A fresh model: made on the device from this seed (device_start.h), and
  // `model` never asked for.
  std::optional<uint64_t> startSeed = {};
};

// The training step of `config` on the GPU, planned from `diagramsDir` and
// compiled; `model` is asked for only when its values go to the device. Prints
// what starting took (llmc-train's log). Throws NoGpuError without a usable
// GPU (BuiltWithoutCuda without the toolkit).
std::unique_ptr<DeviceTrainer> startGpuTrainer(const std::string& diagramsDir, const Gpt2Config& config,
                                               const std::function<const Gpt2Weights&()>& model, int64_t B,
                                               int64_t T, const GpuPathOptions& options);

}  // namespace llmc
