// GPT-2 training on the CPU path: the diagrams' training step (forward,
// backward by autodiff, and the optimizer diagram) run by the reference
// interpreter. For small models: it is the oracle's speed, not a GPU's.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "gpt2_weights.h"
#include "interpreter.h"
#include "ir.h"

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

class InterpreterTrainer {
 public:
  // Compiles the training step for micro-batches of B rows of T tokens.
  // diagramsDir holds gpt2/model.dg and gpt2/optimizer.dg.
  InterpreterTrainer(const std::string& diagramsDir, Gpt2Weights weights, int64_t B, int64_t T);

  // Forward and backward on one micro-batch (B*T inputs and targets); adds the
  // gradients times gradScale to the accumulated gradient. Returns the loss.
  double forwardBackward(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets, double gradScale);
  // The loss alone (validation).
  double loss(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets);
  // Clips and applies the accumulated gradient with AdamW, then clears it.
  // Returns the gradient's global norm before clipping.
  double optimizerStep(const OptimizerSettings& settings);
  // Scores for the token after `context` (1..maxT tokens), over the padded
  // vocabulary.
  std::vector<double> nextTokenLogits(const std::vector<int32_t>& context);

  const Gpt2Weights& weights() const { return weights_; }
  const OptimizerState& optimizerState() const { return state_; }
  void restoreOptimizerState(OptimizerState state);
  int64_t parameterCount() const { return parameterCount_; }

 private:
  HostTensor tokenTensor(const std::vector<int32_t>& tokens, int64_t rows, int64_t cols) const;
  std::map<std::string, HostTensor> inputs(const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets);

  std::string diagramsDir_;
  Gpt2Weights weights_;
  int64_t B_, T_;
  int64_t parameterCount_ = 0;
  Graph step_;         // loss and every parameter's gradient
  Graph lossOnly_;     // the loss
  Graph optimizer_;    // clip + AdamW over all parameters packed together
  std::map<int64_t, Graph> nextLogits_;  // by context length
  std::vector<double> gradient_;  // accumulated, packed like the optimizer's arrays
  std::vector<double> decayMask_;
  OptimizerState state_;
  // f32 arithmetic; bf16 and f16 values rounded as stored (the defaults otherwise).
  InterpreterOptions precision_ = [] {
    InterpreterOptions o;
    o.precision = Precision::F32;
    return o;
  }();
};

}  // namespace llmc
