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
#include "ir/ir.h"
#include "trainer.h"

namespace llmc {

class InterpreterTrainer final : public Trainer {
 public:
  // Compiles the training step for micro-batches of B rows of T tokens.
  // diagramsDir holds gpt2/model.dg and gpt2/optimizer.dg.
  InterpreterTrainer(const std::string& diagramsDir, Gpt2Weights weights, int64_t B, int64_t T);

  double forwardBackward(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                         double gradScale) override;
  double loss(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets) override;
  double optimizerStep(const OptimizerSettings& settings) override;
  std::vector<double> nextTokenLogits(const std::vector<int32_t>& context) override;
  bool givesTokenLosses() const override { return true; }
  std::vector<double> tokenLosses(const std::vector<int32_t>& inputs, const std::vector<int32_t>& targets,
                                  int64_t rows) override;
  bool canSkipUpdates() const override { return true; }
  double gradientNorm() override;
  void skipUpdate() override;

  const Gpt2Config& config() const override { return weights_.config; }
  const Gpt2Weights& weights() override { return weights_; }
  const OptimizerState& optimizerState() override { return state_; }
  void restoreOptimizerState(OptimizerState state) override;
  int64_t parameterCount() const override { return parameterCount_; }

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
  std::map<int64_t, Graph> tokenLosses_;  // by rows
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
