#include "interpreter_trainer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "driver/pipeline.h"

namespace llmc {

namespace {

Graph compileEntry(const std::string& path, const std::string& entry, const SizeBindings& sizes, bool grad) {
  PipelineOptions options;
  options.path = path;
  options.entry = entry;
  options.sizes = sizes;
  options.grad = grad;
  return compileToIR(options);
}

HostTensor scalar(double v) { return HostTensor{Type{DType::F32, {}}, {v}}; }

}  // namespace

InterpreterTrainer::InterpreterTrainer(const std::string& diagramsDir, Gpt2Weights weights, int64_t B, int64_t T)
    : diagramsDir_(diagramsDir), weights_(std::move(weights)), B_(B), T_(T) {
  const Gpt2Config& config = weights_.config;
  if (T > config.T)
    throw std::invalid_argument(fmt::format("sequence length {} exceeds the model's maximum {}", T, config.T));
  const std::string model = diagramsDir_ + "/gpt2/model.dg";
  step_ = compileEntry(model, "gpt2", config.sizes(B, T), /*grad=*/true);
  lossOnly_ = compileEntry(model, "gpt2", config.sizes(B, T), /*grad=*/false);

  // Weight decay applies to the matrices (the parameters with an in and an
  // out axis: wte, wpe and the per-layer weights), as llm.c and nanoGPT do.
  for (const auto& p : gpt2Parameters(config)) {
    int64_t n = p.type.elementCount();
    bool matrix = p.type.axes.size() >= 2 && !(p.type.axes.size() == 2 && p.type.axes[0].name == "l");
    decayMask_.insert(decayMask_.end(), static_cast<size_t>(n), matrix ? 1.0 : 0.0);
    parameterCount_ += n;
  }
  optimizer_ = compileEntry(diagramsDir_ + "/gpt2/optimizer.dg", "optimizer_step", {{"N", parameterCount_}}, false);
  gradient_.assign(static_cast<size_t>(parameterCount_), 0.0);
  state_.m.assign(static_cast<size_t>(parameterCount_), 0.0);
  state_.v.assign(static_cast<size_t>(parameterCount_), 0.0);
}

HostTensor InterpreterTrainer::tokenTensor(const std::vector<int32_t>& tokens, int64_t rows, int64_t cols) const {
  if (static_cast<int64_t>(tokens.size()) != rows * cols)
    throw std::invalid_argument(fmt::format("expected {}x{} tokens, got {}", rows, cols, tokens.size()));
  HostTensor t{Type{DType::I32, {{"b", rows}, {"t", cols}}}, std::vector<double>(tokens.begin(), tokens.end())};
  for (int32_t id : tokens)
    if (id < 0 || id >= weights_.config.V)
      throw std::invalid_argument(fmt::format("token {} is outside the vocabulary of {}", id, weights_.config.V));
  return t;
}

std::map<std::string, HostTensor> InterpreterTrainer::inputs(const std::vector<int32_t>& tokens,
                                                             const std::vector<int32_t>& targets) {
  std::map<std::string, HostTensor> in = weights_.inputs();
  in["tokens"] = tokenTensor(tokens, B_, T_);
  in["targets"] = tokenTensor(targets, B_, T_);
  return in;
}

double InterpreterTrainer::forwardBackward(const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets,
                                           double gradScale) {
  std::vector<HostTensor> out = interpret(step_, inputs(tokens, targets), precision_);
  // Outputs: the loss, then the gradients in parameter order, each with its
  // parameter's type: they pack back to back like the optimizer's arrays.
  size_t offset = 0;
  for (size_t k = 1; k < out.size(); ++k)
    for (double g : out[k].data) gradient_[offset++] += g * gradScale;
  return out[0].data.at(0);
}

double InterpreterTrainer::loss(const std::vector<int32_t>& tokens, const std::vector<int32_t>& targets) {
  return interpret(lossOnly_, inputs(tokens, targets), precision_).at(0).data.at(0);
}

double InterpreterTrainer::optimizerStep(const OptimizerSettings& s) {
  const Type flat{DType::F32, {{"n", parameterCount_}}};
  std::vector<Gpt2Parameter> params = gpt2Parameters(weights_.config);
  HostTensor w{flat, {}};
  w.data.reserve(static_cast<size_t>(parameterCount_));
  for (const auto& p : params) {
    const auto& data = (weights_.*p.member).data;
    w.data.insert(w.data.end(), data.begin(), data.end());
  }
  state_.step += 1;
  std::map<std::string, HostTensor> in = {
      {"w", std::move(w)},
      {"g", HostTensor{flat, gradient_}},
      {"m", HostTensor{flat, state_.m}},
      {"v", HostTensor{flat, state_.v}},
      {"decay_mask", HostTensor{Type{DType::Bool, flat.axes}, decayMask_}},
      {"lr", scalar(s.learningRate)},
      {"beta1", scalar(s.beta1)},
      {"beta2", scalar(s.beta2)},
      {"eps", scalar(s.eps)},
      {"weight_decay", scalar(s.weightDecay)},
      {"t", scalar(static_cast<double>(state_.step))},
      {"max_norm", scalar(s.maxGradNorm)},
  };
  std::vector<HostTensor> out = interpret(optimizer_, in, precision_);
  size_t offset = 0;
  for (const auto& p : params)
    for (double& value : (weights_.*p.member).data) value = out[0].data[offset++];
  state_.m = std::move(out[1].data);
  state_.v = std::move(out[2].data);
  std::fill(gradient_.begin(), gradient_.end(), 0.0);
  return out[3].data.at(0);
}

std::vector<double> InterpreterTrainer::nextTokenLogits(const std::vector<int32_t>& context) {
  const int64_t length = static_cast<int64_t>(context.size());
  if (length < 1 || length > weights_.config.T)
    throw std::invalid_argument(fmt::format("a context of {} tokens does not fit the model (1 to {})", length,
                                            weights_.config.T));
  auto it = nextLogits_.find(length);
  if (it == nextLogits_.end())
    it = nextLogits_
             .emplace(length, compileEntry(diagramsDir_ + "/gpt2/model.dg", "gpt2_next_logits",
                                           weights_.config.sizes(1, length), false))
             .first;
  std::map<std::string, HostTensor> in = weights_.inputs();
  in["tokens"] = tokenTensor(context, 1, length);
  return interpret(it->second, in, precision_).at(0).data;
}

std::vector<double> InterpreterTrainer::tokenLosses(const std::vector<int32_t>& tokens,
                                                    const std::vector<int32_t>& targets, int64_t rows) {
  auto it = tokenLosses_.find(rows);
  if (it == tokenLosses_.end())
    it = tokenLosses_
             .emplace(rows, compileEntry(diagramsDir_ + "/gpt2/model.dg", "gpt2_token_losses",
                                         weights_.config.sizes(rows, T_), false))
             .first;
  std::map<std::string, HostTensor> in = weights_.inputs();
  in["tokens"] = tokenTensor(tokens, rows, T_);
  in["targets"] = tokenTensor(targets, rows, T_);
  return interpret(it->second, in, precision_).at(0).data;
}

double InterpreterTrainer::gradientNorm() {
  double sum = 0;
  for (double g : gradient_) sum += g * g;
  return std::sqrt(sum);
}

void InterpreterTrainer::skipUpdate() {
  std::fill(gradient_.begin(), gradient_.end(), 0.0);
  state_.step += 1;
}

void InterpreterTrainer::restoreOptimizerState(OptimizerState state) {
  if (static_cast<int64_t>(state.m.size()) != parameterCount_ || static_cast<int64_t>(state.v.size()) != parameterCount_)
    throw std::invalid_argument(fmt::format("optimizer state holds {} values, the model has {} parameters",
                                            state.m.size(), parameterCount_));
  state_ = std::move(state);
}

}  // namespace llmc
