// What llmc-train's loop asks of an executor of the training step: the CPU
// path (InterpreterTrainer: the reference interpreter) and the GPU path
// (GpuTrainer: generated kernels) answer the same questions.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <vector>

#include "gpt2_weights.h"

namespace llmc {

struct OptimizerSettings {
  double learningRate = 3e-4;
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double weightDecay = 0.0;  // applied to the matrices only
  double maxGradNorm = 1.0;
};

// The optimizer's state besides the weights: AdamW's moments, one value per
// parameter in gpt2Parameters() order, and the number of steps taken.
struct OptimizerState {
  std::vector<double> m, v;
  int64_t step = 0;
};

class Trainer {
 public:
  virtual ~Trainer() = default;

  // Forward and backward on one micro-batch (B*T inputs and targets); adds the
  // gradients times gradScale to the accumulated gradient. Returns the loss.
  virtual double forwardBackward(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                                 double gradScale) = 0;
  // The loss alone (validation).
  virtual double loss(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets) = 0;
  // Clips and applies the accumulated gradient with AdamW, then clears it.
  // Returns the gradient's global norm before clipping.
  virtual double optimizerStep(const OptimizerSettings& settings) = 0;
  // Scores for the token after `context` (1..maxT tokens), over the padded
  // vocabulary.
  virtual std::vector<double> nextTokenLogits(const std::vector<int32_t>& context) = 0;

  // Per-position losses for `rows` rows of the executor's T tokens (row-major,
  // rows*T values): what HellaSwag scores (-h 1). Only where givesTokenLosses.
  virtual bool givesTokenLosses() const { return false; }
  virtual std::vector<double> tokenLosses(const std::vector<int32_t>& /*inputs*/,
                                          const std::vector<int32_t>& /*targets*/, int64_t /*rows*/) {
    throw std::logic_error("this executor gives no per-position losses");
  }

  // Skipping an update (-sl, -sg), only where canSkipUpdates: the accumulated
  // gradient's global norm before any clipping, and dropping the gradient
  // without an update. A skipped step still counts as a step for AdamW's bias
  // correction, as in llm.c, whose update takes the step number.
  virtual bool canSkipUpdates() const { return false; }
  virtual double gradientNorm() { throw std::logic_error("this executor cannot skip updates"); }
  virtual void skipUpdate() { throw std::logic_error("this executor cannot skip updates"); }

  virtual const Gpt2Config& config() const = 0;
  // The model and the optimizer's state as they are now (the GPU path copies
  // them to the host).
  virtual const Gpt2Weights& weights() = 0;
  virtual const OptimizerState& optimizerState() = 0;
  virtual void restoreOptimizerState(OptimizerState state) = 0;
  virtual int64_t parameterCount() const = 0;
};

// The GPU path's executor (GpuTrainer) answers these too, for the log's MFU,
// memory and communication columns; declared here, without its CUDA types, so
// that the training loop builds where the CUDA toolkit is missing.
class DeviceTrainer : public Trainer {
 public:
  // Nominal dense bf16 tensor-core rate of the GPU (its target file), for MFU.
  virtual double peakFlops() const = 0;
  // Device memory the trainer allocated.
  virtual int64_t deviceBytes() const = 0;
  // Data-parallel: GPU time of the last optimizer step's communication in ms;
  // none for one process, or where it ran beside the backward.
  virtual std::optional<double> communicationMilliseconds() const = 0;
  // The GPU board's energy counter now, in millijoules (NVML); none where the
  // driver has no NVML. Readings between steps give their energy
  // (step_energy.h): at the board's power limit a step's time is that energy
  // over the limit.
  virtual std::optional<uint64_t> energyMillijoules() const = 0;
};

}  // namespace llmc
