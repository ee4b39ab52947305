// llmc-train: trains GPT-2 from llm.c token shards with the training step the
// diagrams define. This file is the training loop: data, schedule, evaluation,
// sampling, logs and checkpoints around an executor of the step.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "data_loader.h"
#include "gpt2_checkpoint.h"
#include "interpreter_trainer.h"
#include "lr_schedule.h"
#include "tokenizer.h"
#include "train_options.h"
#include "train_state.h"

namespace fs = std::filesystem;
using namespace llmc;

namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::string diagramsDir() {
  if (const char* env = std::getenv("LLMC_DIAGRAMS")) return env;
  return LLMC_DIAGRAMS_DIR;
}

// A tokenizer for printing samples, from --tokenizer or the usual places; none
// if there is none (samples are then printed as ids).
std::optional<Tokenizer> findTokenizer(const std::string& given) {
  if (!given.empty()) return Tokenizer(given);  // its errors name the missing file
  for (const fs::path& dir : {fs::path(LLMC_SOURCE_DIR) / ".." / "shared" / "data" / "gpt2-bpe",
                              fs::path(LLMC_SOURCE_DIR) / "data" / "gpt2-bpe"})
    if (fs::exists(dir / "encoder.json")) return Tokenizer(dir);
  return std::nullopt;
}

Gpt2Weights loadOrCreateModel(const TrainOptions& o) {
  bool isFile = fs::exists(o.model);
  bool looksLikePath = o.model.find('/') != std::string::npos || o.model.find('.') != std::string::npos;
  if (!isFile && !looksLikePath) {
    Gpt2Config config = Gpt2Config::fromName(o.model);
    if (o.channels) config.C = *o.channels;
    if (o.heads) config.H = *o.heads;
    if (config.C % config.H != 0)
      throw std::invalid_argument(fmt::format("{} channels do not split into {} heads", config.C, config.H));
    config.T = std::max<int64_t>(1024, o.seqLen);
    return randomGpt2Weights(config, o.seed);
  }
  if (!isFile) throw std::runtime_error(fmt::format("-e {}: no such checkpoint file (or dN for a fresh model)", o.model));
  if (o.channels || o.heads) throw std::invalid_argument("--channels and --heads apply to a fresh dN model only");
  return readCheckpoint(o.model);
}

std::vector<uint8_t> packLoaderState(const DataLoaderState& s) {
  std::vector<uint8_t> bytes(sizeof(int64_t) * 3);
  int64_t words[3] = {s.epoch, s.shardCursor, s.batchCursor};
  std::memcpy(bytes.data(), words, bytes.size());
  return bytes;
}

DataLoaderState unpackLoaderState(const std::vector<uint8_t>& bytes, const std::string& path) {
  if (bytes.size() != sizeof(int64_t) * 3)
    throw std::runtime_error(fmt::format("{}: loader state of {} bytes (expected 24)", path, bytes.size()));
  int64_t words[3];
  std::memcpy(words, bytes.data(), bytes.size());
  return DataLoaderState{words[0], words[1], words[2]};
}

// A log that llm.c's plotting scripts read: "s:STEP trl:LOSS" for training,
// "s:STEP tel:LOSS" for validation.
class TrainLog {
 public:
  explicit TrainLog(const std::string& dir, bool append) {
    if (dir.empty()) return;
    file_.open(dir + "/main.log", append ? std::ios::app : std::ios::trunc);
    if (!file_) throw std::runtime_error(fmt::format("{}/main.log: cannot open for writing", dir));
  }
  void line(const std::string& text) {
    if (!file_.is_open()) return;
    file_ << text << '\n';
    file_.flush();
  }

 private:
  std::ofstream file_;
};

class TrainingRun {
 public:
  explicit TrainingRun(const TrainOptions& o) : o_(o) {}

  int run() {
    chooseDevice();
    auto start = Clock::now();
    Gpt2Weights weights = loadOrCreateModel(o_);
    const Gpt2Config& c = weights.config;
    fmt::print("model: L={} C={} H={} maxT={} V={} Vp={}, {:.2f}M parameters\n", c.L, c.C, c.H, c.T, c.V, c.Vp,
               static_cast<double>(c.parameterCount()) / 1e6);

    train_.emplace(o_.trainData, static_cast<int>(o_.batchSize), static_cast<int>(o_.seqLen),
                   DataLoaderOptions{o_.shuffle, o_.seed, 0, 1});
    fmt::print("train data: {} shard(s), {} batches of {}x{} per epoch\n", train_->shardPaths().size(),
               train_->batchesPerEpoch(), o_.batchSize, o_.seqLen);
    if (!o_.valData.empty()) {
      val_.emplace(o_.valData, static_cast<int>(o_.batchSize), static_cast<int>(o_.seqLen));
      fmt::print("val data: {} shard(s), {} batches\n", val_->shardPaths().size(), val_->batchesPerEpoch());
    }
    tokenizer_ = findTokenizer(o_.tokenizerDir);

    accumulation_ = o_.totalBatchTokens / (o_.batchSize * o_.seqLen);
    totalSteps_ = o_.maxSteps >= 0 ? o_.maxSteps : std::max<int64_t>(1, train_->batchesPerEpoch() / accumulation_);
    fmt::print("batch: {} tokens per step = {} micro-batch(es) of {}x{}; {} steps\n", o_.totalBatchTokens,
               accumulation_, o_.batchSize, o_.seqLen, totalSteps_);

    auto compileStart = Clock::now();
    trainer_.emplace(diagramsDir(), std::move(weights), o_.batchSize, o_.seqLen);
    fmt::print("compiled the training step from {} in {:.2f} s (CPU path: reference interpreter)\n", diagramsDir(),
               secondsSince(compileStart));

    int64_t firstStep = 0;
    if (o_.resume) firstStep = resumeFromCheckpoint();
    if (!o_.outputDir.empty()) {
      fs::create_directories(o_.outputDir);
      if (!o_.resume) fs::remove(o_.outputDir + "/samples.txt");  // a fresh run starts its samples anew
    }
    TrainLog log(o_.outputDir, o_.resume);
    log_ = &log;
    fmt::print("ready in {:.2f} s\n", secondsSince(start));

    double lastVal = NAN;
    for (int64_t step = firstStep; step <= totalSteps_; ++step) {
      const bool last = step == totalSteps_;
      if (val_ && o_.valEvery > 0 && (step % o_.valEvery == 0 || last)) lastVal = validate(step);
      if (o_.sampleEvery > 0 && step > firstStep && (step % o_.sampleEvery == 0 || last)) sample(step);
      if (!o_.outputDir.empty() && step > firstStep &&
          ((o_.checkpointEvery > 0 && step % o_.checkpointEvery == 0) || last))
        writeCheckpoint(step);
      if (last) break;
      trainStep(step);
    }
    fmt::print("done: {} steps in {:.1f} s{}\n", totalSteps_ - firstStep, secondsSince(start),
               std::isnan(lastVal) ? "" : fmt::format(", final val loss {:.4f}", lastVal));
    return 0;
  }

 private:
  void chooseDevice() {
    // The GPU executor is not built yet: the CPU path runs the diagrams in the
    // reference interpreter. Asking for CUDA explicitly is an error, not a
    // silent fallback.
    if (o_.device == DeviceChoice::Cuda)
      throw std::runtime_error("--device cuda: the GPU path is not available in this build yet; use --device cpu");
    fmt::print("device: cpu (reference interpreter){}\n",
               o_.device == DeviceChoice::Auto ? "; the GPU path is not available in this build yet" : "");
  }

  void trainStep(int64_t step) {
    auto start = Clock::now();
    double loss = 0;
    for (int64_t micro = 0; micro < accumulation_; ++micro) {
      const TokenBatch& batch = train_->next();
      loss += trainer_->forwardBackward(batch.inputs, batch.targets, 1.0 / static_cast<double>(accumulation_));
    }
    loss /= static_cast<double>(accumulation_);
    OptimizerSettings settings;
    settings.learningRate = schedule().at(step);
    settings.weightDecay = o_.weightDecay;
    settings.maxGradNorm = o_.maxGradNorm;
    double norm = trainer_->optimizerStep(settings);
    double seconds = secondsSince(start);
    fmt::print("step {:5d}/{} | loss {:.6f} | norm {:.4f} | lr {:.2e} | {:.1f} ms | {:.0f} tok/s\n", step + 1,
               totalSteps_, loss, norm, settings.learningRate, seconds * 1e3,
               static_cast<double>(o_.totalBatchTokens) / seconds);
    std::fflush(stdout);
    log_->line(fmt::format("s:{} trl:{:.6f} norm:{:.4f} lr:{:.6e} ms:{:.1f}", step + 1, loss, norm,
                           settings.learningRate, seconds * 1e3));
  }

  LrSchedule schedule() const {
    return LrSchedule{o_.learningRate, o_.warmupSteps, totalSteps_, o_.finalLrFraction};
  }

  double validate(int64_t step) {
    auto start = Clock::now();
    val_->reset();
    int64_t batches = std::min(o_.valMaxSteps, val_->batchesPerEpoch());
    double sum = 0;
    for (int64_t i = 0; i < batches; ++i) {
      const TokenBatch& batch = val_->next();
      sum += trainer_->loss(batch.inputs, batch.targets);
    }
    double loss = sum / static_cast<double>(batches);
    fmt::print("val loss {:.6f} ({} batches, {:.1f} s)\n", loss, batches, secondsSince(start));
    log_->line(fmt::format("s:{} tel:{:.6f}", step, loss));
    return loss;
  }

  // Samples from the model after an <|endoftext|>, at temperature 1 over the
  // real vocabulary; the generator is seeded from (seed, step), so a resumed
  // run prints the same samples.
  void sample(int64_t step) {
    const Gpt2Config& c = trainer_->weights().config;
    std::mt19937_64 rng(o_.seed * 1000003u + static_cast<uint64_t>(step));
    std::vector<int32_t> context = {static_cast<int32_t>(c.V - 1)};  // <|endoftext|>
    std::vector<int> generated;
    for (int64_t i = 0; i < o_.genTokens; ++i) {
      std::vector<int32_t> window = context;
      if (static_cast<int64_t>(window.size()) > o_.seqLen) window.erase(window.begin(), window.end() - o_.seqLen);
      std::vector<double> logits = trainer_->nextTokenLogits(window);
      double top = *std::max_element(logits.begin(), logits.begin() + c.V);
      std::vector<double> weights(logits.begin(), logits.begin() + c.V);
      for (auto& w : weights) w = std::exp(w - top);
      std::discrete_distribution<int> pick(weights.begin(), weights.end());
      int token = pick(rng);
      context.push_back(token);
      generated.push_back(token);
    }
    std::string text;
    if (tokenizer_ && c.V <= tokenizer_->vocabSize()) {
      text = tokenizer_->decode(generated);
    } else {
      for (int id : generated) text += fmt::format("{} ", id);
    }
    fmt::print("sample at step {}:\n---\n{}\n---\n", step, text);
    if (!o_.outputDir.empty()) {
      std::ofstream out(o_.outputDir + "/samples.txt", std::ios::app);
      out << fmt::format("step {}:\n{}\n\n", step, text);
    }
  }

  void writeCheckpoint(int64_t step) {
    llmc::writeCheckpoint(modelCheckpointPath(o_.outputDir, step), trainer_->weights(), o_.checkpointBf16);
    writeTrainState(stateCheckpointPath(o_.outputDir, step),
                    TrainState{trainer_->optimizerState(), packLoaderState(train_->state())});
    fmt::print("checkpoint: {} and {}\n", modelCheckpointPath(o_.outputDir, step),
               stateCheckpointPath(o_.outputDir, step));
  }

  int64_t resumeFromCheckpoint() {
    int64_t step = newestCheckpointStep(o_.outputDir);
    if (step < 0) {
      fmt::print("resume: no checkpoint in {}; starting from step 0\n", o_.outputDir);
      return 0;
    }
    const std::string modelPath = modelCheckpointPath(o_.outputDir, step);
    const std::string statePath = stateCheckpointPath(o_.outputDir, step);
    Gpt2Weights weights = readCheckpoint(modelPath);
    const Gpt2Config& want = trainer_->weights().config;
    const Gpt2Config& have = weights.config;
    if (have.L != want.L || have.C != want.C || have.H != want.H || have.V != want.V || have.Vp != want.Vp ||
        have.T != want.T)
      throw std::runtime_error(fmt::format("{}: the checkpoint is a model of L={} C={} H={} maxT={} V={}, not the "
                                           "L={} C={} H={} maxT={} V={} of this run",
                                           modelPath, have.L, have.C, have.H, have.T, have.V, want.L, want.C,
                                           want.H, want.T, want.V));
    TrainState state = readTrainState(statePath);
    if (state.optimizer.step != step)
      throw std::runtime_error(fmt::format("{}: holds step {}, but its name says {}", statePath, state.optimizer.step, step));
    trainer_.emplace(diagramsDir(), std::move(weights), o_.batchSize, o_.seqLen);
    trainer_->restoreOptimizerState(state.optimizer);
    train_->restore(unpackLoaderState(state.loaderState, statePath));
    fmt::print("resumed from {} (step {})\n", modelPath, step);
    return step;
  }

  const TrainOptions& o_;
  std::optional<DataLoader> train_, val_;
  std::optional<Tokenizer> tokenizer_;
  std::optional<InterpreterTrainer> trainer_;
  TrainLog* log_ = nullptr;
  int64_t accumulation_ = 1;
  int64_t totalSteps_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  TrainOptions options;
  try {
    options = parseTrainOptions(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "llmc-train: %s\n(see llmc-train --help)\n", e.what());
    return 2;
  }
  try {
    return TrainingRun(options).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmc-train: error: %s\n", e.what());
    return 1;
  }
}
