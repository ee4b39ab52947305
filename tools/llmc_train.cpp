// llmc-train: trains GPT-2 from llm.c token shards with the training step the
// diagrams define. This file is the training loop: data, schedule, evaluation,
// sampling, logs and checkpoints around an executor of the step.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <memory>
#include <optional>
#include <random>

#include "data_folder.h"
#include "data_loader.h"
#include "gpt2_checkpoint.h"
#include "gpu_path.h"
#include "hellaswag.h"
#include "interpreter_trainer.h"
#include "loss_plot.h"
#include "lr_schedule.h"
#include "outlier_detector.h"
#include "process_group.h"
#include "step_energy.h"
#include "tokenizer.h"
#include "train_options.h"
#include "train_state.h"

namespace fs = std::filesystem;
using namespace llmc;

namespace {

using Clock = std::chrono::steady_clock;

// When the process started: the time to the first step counts from here.
const Clock::time_point processStart = Clock::now();

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// The diagrams of the training step: installed beside the executable, else the
// source tree's (common/data_folder.h); $LLMC_DIAGRAMS overrides both.
std::string diagramsDir() {
  return findDataFolder({"LLMC_DIAGRAMS", "diagrams", LLMC_DIAGRAMS_DIR, "diagrams"}).string();
}

// A tokenizer for printing samples, from --tokenizer or the usual places; none
// if there is none (samples are then printed as ids).
// The tokenizer for printing samples: --tokenizer, else llm.c's
// gpt2_tokenizer.bin in the training shards' folder (llmc-data writes it
// there), else GPT-2's BPE files beside the repository.
std::optional<Tokenizer> findTokenizer(const std::string& given, const std::string& trainData) {
  if (!given.empty()) return Tokenizer(given);  // its errors name the missing file
  const fs::path shards = fs::path(trainData).parent_path();
  const fs::path beside = (shards.empty() ? fs::path(".") : shards) / kLlmcTokenizerFileName;
  if (fs::is_regular_file(beside)) return Tokenizer(beside);
  for (const fs::path& dir : {fs::path(LLMC_SOURCE_DIR) / ".." / "shared" / "data" / "gpt2-bpe",
                              fs::path(LLMC_SOURCE_DIR) / "data" / "gpt2-bpe"})
    if (fs::exists(dir / "encoder.json")) return Tokenizer(dir);
  return std::nullopt;
}

// The model of -e: a fresh dN (made from the seed: its configuration known at
// once, its values on the device by the GPU path, on the host only where the
// CPU path asks for them), or a checkpoint, read.
struct ModelSource {
  Gpt2Config config;
  std::shared_future<Gpt2Weights> weights;
  bool fresh = false;
};

std::shared_future<Gpt2Weights> ready(Gpt2Weights weights) {
  std::promise<Gpt2Weights> promise;
  promise.set_value(std::move(weights));
  return promise.get_future().share();
}

ModelSource openModel(const TrainOptions& o) {
  bool isFile = fs::exists(o.model);
  bool looksLikePath = o.model.find('/') != std::string::npos || o.model.find('.') != std::string::npos;
  if (!isFile && !looksLikePath) {
    Gpt2Config config = Gpt2Config::fromName(o.model);
    if (o.channels) config.C = *o.channels;
    if (o.heads) config.H = *o.heads;
    if (config.C % config.H != 0)
      throw std::invalid_argument(fmt::format("{} channels do not split into {} heads", config.C, config.H));
    config.T = std::max<int64_t>(1024, o.seqLen);
    // Deferred: made on the host only where asked for (the CPU path); the GPU
    // path makes a fresh model on the device (runtime/train/device_start.h).
    return {config, std::async(std::launch::deferred, [config, seed = o.seed] { return randomGpt2Weights(config, seed); }).share(),
            true};
  }
  if (!isFile) throw std::runtime_error(fmt::format("-e {}: no such checkpoint file (or dN for a fresh model)", o.model));
  if (o.channels || o.heads) throw std::invalid_argument("--channels and --heads apply to a fresh dN model only");
  Gpt2Weights weights = readCheckpoint(o.model);
  const Gpt2Config config = weights.config;
  return {config, ready(std::move(weights)), false};
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

// A log that llm.c's plotting scripts read, with llm.c's step numbers:
// "s:STEP trl:LOSS" for the training step STEP (counted from 0), "s:STEP
// tel:LOSS" for validation and "s:STEP eval:ACC" for HellaSwag after STEP
// steps.
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
  TrainingRun(const TrainOptions& o, ProcessPlace place)
      : o_(o), place_(std::move(place)), totalBatchTokens_(resolveTotalBatch(o, place_.size)) {}

  int run() {
    auto start = Clock::now();
    // The driver's start and the GPU's context (a second or so) beside the
    // model's making or reading; the trainer's context is then the same one.
    std::optional<EarlyGpuContext> earlyContext;
    if (o_.device != DeviceChoice::Cpu) earlyContext.emplace(place_.gpu);
    // The data first: a glob that matches nothing is said before a model is made.
    // -a 1 overfits the first batch of the val data, as llm.c does (val is
    // the smaller split), or of the training data where there is no val data.
    const std::string& trainData = o_.overfitSingleBatch && !o_.valData.empty() ? o_.valData : o_.trainData;
    train_.emplace(trainData, static_cast<int>(o_.batchSize), static_cast<int>(o_.seqLen),
                   DataLoaderOptions{o_.shuffle, o_.seed, place_.rank, place_.size});
    info("train data: {} shard(s), {} batches of {}x{} per epoch{}\n", train_->shardPaths().size(),
               train_->batchesPerEpoch(), o_.batchSize, o_.seqLen,
               o_.overfitSingleBatch ? fmt::format(" (-a 1: every step trains on its first {})",
                                                   accumulationOf(o_, place_.size) > 1 ? "batches" : "batch")
               : o_.shuffle ? ", shuffled" : "");
    if (!o_.valData.empty()) {
      val_.emplace(o_.valData, static_cast<int>(o_.batchSize), static_cast<int>(o_.seqLen),
                   DataLoaderOptions{false, 0, place_.rank, place_.size});
      info("val data: {} shard(s), {} batches\n", val_->shardPaths().size(), val_->batchesPerEpoch());
    }
    if (o_.hellaswag) {
      if (!fs::exists(o_.hellaswagFile))
        throw std::runtime_error(fmt::format("-h 1: no HellaSwag eval file {} (llm.c's dev/data/hellaswag.py writes "
                                             "it; --hellaswag-file FILE names another)",
                                             o_.hellaswagFile));
      hellaswag_ = readEvalFile(o_.hellaswagFile);
      info("HellaSwag: {} examples from {}\n", hellaswag_->examples.size(), o_.hellaswagFile);
    }
    ModelSource model = openModel(o_);
    const Gpt2Config c = model.config;
    info("model: L={} C={} H={} maxT={} V={} Vp={}, {:.2f}M parameters ({})\n", c.L, c.C, c.H, c.T, c.V, c.Vp,
               static_cast<double>(c.parameterCount()) / 1e6,
               model.fresh ? fmt::format("fresh, from seed {}", o_.seed)
                           : fmt::format("read in {:.2f} s", secondsSince(start)));

    tokenizer_ = findTokenizer(o_.tokenizerDir, o_.trainData);

    accumulation_ = accumulationOf(o_, place_.size);
    totalSteps_ = o_.maxSteps >= 0 ? o_.maxSteps : std::max<int64_t>(1, train_->batchesPerEpoch() / accumulation_);
    info("batch: {} tokens per step = {} micro-batch(es) of {}x{}{}; {} steps\n", totalBatchTokens_,
               accumulation_, o_.batchSize, o_.seqLen,
               place_.size > 1 ? fmt::format(" on each of {} processes", place_.size) : "", totalSteps_);

    // A resumed run starts from the checkpoint's model; the trainer is made
    // once, for it.
    std::optional<TrainState> resumed;
    int64_t firstStep = 0;
    if (o_.resume) firstStep = readResumePoint(model, resumed);

    const auto contextWait = Clock::now();
    if (earlyContext && earlyContext->ready()) info("CUDA context ready {:.2f} s later\n", secondsSince(contextWait));
    makeTrainer(model);
    if (gpu_)
      if (std::vector<std::string> cpuOnly = cpuPathOnlyFlags(o_); !cpuOnly.empty())
        throw std::runtime_error(fmt::format("{} runs on the CPU path only, and the GPU path was chosen: give --device "
                                             "cpu (llmc-train --help says why)",
                                             cpuOnly.front()));
    if (resumed) {
      trainer_->restoreOptimizerState(resumed->optimizer);
      train_->restore(unpackLoaderState(resumed->loaderState, stateCheckpointPath(o_.outputDir, firstStep)));
      info("resumed from {} (step {})\n", modelCheckpointPath(o_.outputDir, firstStep), firstStep);
    }
    // Rank 0 writes the files: log, samples, checkpoints, the plot.
    const bool writes = place_.rank == 0 && !o_.outputDir.empty();
    if (writes) {
      fs::create_directories(o_.outputDir);
      if (!o_.resume) fs::remove(o_.outputDir + "/samples.txt");  // a fresh run starts its samples anew
    }
    TrainLog log(writes ? o_.outputDir : "", o_.resume);
    log_ = &log;
    info("ready in {:.2f} s\n", secondsSince(start));

    double lastVal = NAN;
    firstStep_ = firstStep;
    for (int64_t step = firstStep; step <= totalSteps_; ++step) {
      const bool last = step == totalSteps_;
      bool otherWork = step == firstStep;  // work between this step and the last one (none before the first)
      if (val_ && o_.valEvery > 0 && (step % o_.valEvery == 0 || last)) lastVal = validate(step), otherWork = true;
      // llm.c's HellaSwag schedule: the validation steps but step 0, and the last.
      if (hellaswag_ && ((step > 0 && o_.valEvery > 0 && step % o_.valEvery == 0) || last))
        hellaswagEval(step), otherWork = true;
      if (o_.sampleEvery > 0 && place_.rank == 0 && step > firstStep && (step % o_.sampleEvery == 0 || last))
        sample(step), otherWork = true;
      if (!o_.outputDir.empty() && step > firstStep &&
          ((o_.checkpointEvery > 0 && step % o_.checkpointEvery == 0) || last))
        writeCheckpoint(step), otherWork = true;
      if (last) break;
      trainStep(step, otherWork);
    }
    plotLosses();
    info("done: {} steps in {:.1f} s{}\n", totalSteps_ - firstStep, secondsSince(start),
               std::isnan(lastVal) ? "" : fmt::format(", final val loss {:.4f}", lastVal));
    printResult();
    return 0;
  }

 private:
  // Progress and start-up lines, which --quiet leaves out.
  template <typename... Args>
  void info(fmt::format_string<Args...> format, Args&&... args) const {
    if (!o_.quiet) fmt::print(format, std::forward<Args>(args)...);
  }

  // The GPU path where there is a GPU (or where --device cuda asks for it:
  // then its absence is an error), else the CPU path.
  void makeTrainer(const ModelSource& model) {
    auto start = Clock::now();
    if (o_.device != DeviceChoice::Cpu) {
      try {
        std::unique_ptr<DeviceTrainer> gpu = startGpuTrainer(
            diagramsDir(), model.config, [&model]() -> const Gpt2Weights& { return model.weights.get(); },
            o_.batchSize, o_.seqLen,
            {.bf16 = o_.bf16, .cudaGraph = o_.cudaGraph, .recompute = o_.recompute != 0, .holdLess = o_.holdLess,
             .tokenLossRows = o_.hellaswag ? hellaswagRows(o_.batchSize) : 0, .place = place_,
             .zeroStage = o_.zeroStage, .overlap = o_.overlap, .quiet = o_.quiet,
             .startSeed = model.fresh ? std::optional<uint64_t>(o_.seed) : std::nullopt});
        gpu_ = gpu.get();
        trainer_ = std::move(gpu);
        return;
      } catch (const NoGpuError& e) {
        if (o_.device == DeviceChoice::Cuda) throw std::runtime_error(fmt::format("--device cuda: {}", e.what()));
        if (place_.size > 1)
          throw std::runtime_error(fmt::format("{} processes train on GPUs only: {}", place_.size, e.what()));
        info("device: cpu (reference interpreter): no GPU ({})\n", e.what());
      }
    } else {
      info("device: cpu (reference interpreter)\n");
    }
    trainer_ = std::make_unique<InterpreterTrainer>(diagramsDir(), model.weights.get(), o_.batchSize, o_.seqLen);
    info("compiled the training step from {} in {:.2f} s (CPU path: reference interpreter)\n", diagramsDir(),
               secondsSince(start));
  }

  int64_t accumulationOf(const TrainOptions& o, int processes) const {
    return totalBatchTokens_ / (o.batchSize * o.seqLen * processes);
  }

  static double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }

  // `otherWork`: something else ran since the last step (or there was none),
  // whose energy is no step's.
  void trainStep(int64_t step, bool otherWork) {
    auto start = Clock::now();
    if (gpu_ && otherWork) energy_.restart(step, secondsSince(processStart), gpu_->energyMillijoules());
    // -a 1: every step starts again from the first batch, as llm.c resets its loader.
    if (o_.overfitSingleBatch) train_->reset();
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
    if (!std::isfinite(loss))
      throw std::runtime_error(fmt::format("step {}: the loss is {} (diverged: try a lower -l, or warmup -u)", step + 1, loss));
    // -sl, -sg: llm.c's outlier detection decides before the update whether
    // there is one.
    const bool detecting = o_.skipUpdateLossZ > 0 || o_.skipUpdateGradZ > 0;
    double norm = NAN, lossZ = NAN, normZ = NAN;
    std::optional<std::string> skipReason;
    if (detecting) {
      lossZ = lossOutliers_.update(loss);
      norm = trainer_->gradientNorm();
      normZ = normOutliers_.update(norm);
      skipReason = skipUpdateReason(lossZ, normZ, o_.skipUpdateLossZ, o_.skipUpdateGradZ);
    }
    if (skipReason) {
      trainer_->skipUpdate();
      fmt::print("{}\n", *skipReason);
    } else {
      norm = trainer_->optimizerStep(settings);
    }
    if (!std::isfinite(norm))
      throw std::runtime_error(fmt::format("step {}: the gradient norm is {} (diverged: try a lower -l, or warmup -u)",
                                           step + 1, norm));
    double seconds = secondsSince(start);
    if (!firstStepSeconds_) firstStepSeconds_ = secondsSince(processStart);
    stepMilliseconds_.push_back(seconds * 1e3);
    finalLoss_ = loss;
    const double tokensPerSecond = static_cast<double>(totalBatchTokens_) / seconds;
    std::string device;
    if (gpu_) {
      // MFU as llm.c counts it (docs/training.md §4): 6N + 6LCT FLOPs per token,
      // N with the padded vocabulary, against the GPUs' nominal bf16 peak.
      const Gpt2Config& c = trainer_->config();
      const double flopsPerToken = 6.0 * static_cast<double>(c.parameterCount()) +
                                   6.0 * static_cast<double>(c.L * c.C * o_.seqLen);
      device = fmt::format(" | MFU {:.1f}% | {:.2f} GiB{}",
                           100.0 * flopsPerToken * tokensPerSecond / (gpu_->peakFlops() * place_.size),
                           gib(gpu_->deviceBytes()),
                           place_.size == 1                          ? ""
                           : gpu_->communicationMilliseconds() ? fmt::format(" per GPU | comm {:.2f} ms", *gpu_->communicationMilliseconds())
                                                               : " per GPU | comm beside the backward");
      if (gpu_->communicationMilliseconds()) communicationMilliseconds_.push_back(*gpu_->communicationMilliseconds());
      // The step's energy: the board's counter read after it (the loss read
      // back and the update queued, so its work is done), a step the rise
      // over the last second of steps (step_energy.h: the counter moves in
      // jumps longer than a step). Until a second has passed, or after a
      // reading lost, the column is left out.
      energy_.record(step + 1, secondsSince(processStart), gpu_->energyMillijoules());
      if (const std::optional<double> joules = energy_.recentJoulesPerStep(kEnergyWindowSeconds))
        device += fmt::format(" | {:.1f} J", *joules);
    }
    auto zScore = [&](double z) { return detecting ? fmt::format(" ({:+.2f}z)", z) : std::string(); };
    info("step {:5d}/{} | loss {:.6f}{} | norm {:.4f}{} | lr {:.2e} | {:.1f} ms | {:.0f} tok/s{}\n", step + 1,
               totalSteps_, loss, zScore(lossZ), norm, zScore(normZ), settings.learningRate, seconds * 1e3,
               tokensPerSecond, device);
    std::fflush(stdout);
    // llm.c logs a training step at its index from 0 (the step line above
    // counts from 1, as llm.c's does).
    log_->line(fmt::format("s:{} trl:{:.6f} norm:{:.4f} lr:{:.6e} ms:{:.1f}", step, loss, norm, settings.learningRate,
                           seconds * 1e3));
  }

  LrSchedule schedule() const {
    return LrSchedule{o_.learningRate, o_.warmupSteps, totalSteps_, o_.finalLrFraction, o_.lrSchedule};
  }

  double validate(int64_t step) {
    auto start = Clock::now();
    val_->reset();
    const int64_t batches = o_.valMaxSteps < 0 ? val_->batchesPerEpoch() : std::min(o_.valMaxSteps, val_->batchesPerEpoch());
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

  // HellaSwag's accuracy (-h 1), printed and logged as llm.c does.
  void hellaswagEval(int64_t step) {
    auto start = Clock::now();
    const HellaSwagResult result = evaluateHellaSwag(*trainer_, *hellaswag_, o_.batchSize, o_.seqLen);
    fmt::print("HellaSwag: {}/{} = {:.6f} ({:.1f} s)\n", result.correct, result.examples, result.accuracy(),
               secondsSince(start));
    log_->line(fmt::format("s:{} eval:{:.4f}", step, result.accuracy()));
  }

  // Samples from the model after an <|endoftext|>, at temperature 1 over the
  // real vocabulary; the generator is seeded from (seed, step), so a resumed
  // run prints the same samples.
  void sample(int64_t step) {
    const Gpt2Config& c = trainer_->config();
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

  // Every process comes here (gathering a sharded optimizer's state is a
  // collective); rank 0 writes.
  void writeCheckpoint(int64_t step) {
    const Gpt2Weights& weights = trainer_->weights();
    const OptimizerState& optimizer = trainer_->optimizerState();
    if (place_.rank != 0) return;
    llmc::writeCheckpoint(modelCheckpointPath(o_.outputDir, step), weights, o_.checkpointBf16);
    writeTrainState(stateCheckpointPath(o_.outputDir, step), TrainState{optimizer, packLoaderState(train_->state())});
    info("checkpoint: {} and {}\n", modelCheckpointPath(o_.outputDir, step),
               stateCheckpointPath(o_.outputDir, step));
    for (int64_t old : checkpointsToDelete(checkpointSteps(o_.outputDir), step, o_.checkpointsToKeep,
                                           o_.majorCheckpointEvery)) {
      deleteCheckpoint(o_.outputDir, old);
      info("checkpoint: deleted {} and {} (-nk {})\n", modelCheckpointPath(o_.outputDir, old),
                 stateCheckpointPath(o_.outputDir, old), o_.checkpointsToKeep);
    }
    plotLosses();
  }

  // The loss curve as a picture, OUTDIR/loss.svg. A log it cannot read costs
  // the picture, not the run.
  void plotLosses() const {
    if (o_.outputDir.empty() || place_.rank != 0) return;
    try {
      writeLossPlot(o_.outputDir);
    } catch (const std::exception& e) {
      fmt::print(stderr, "llmc-train: warning: no loss plot: {}\n", e.what());
    }
  }

  // The newest checkpoint in -o, checked against the model of this run:
  // its weights replace `weights`, its state goes to `state`. Returns its step
  // (0 when there is none).
  int64_t readResumePoint(ModelSource& model, std::optional<TrainState>& state) {
    int64_t step = newestCheckpointStep(o_.outputDir);
    if (step < 0) {
      info("resume: no checkpoint in {}; starting from step 0\n", o_.outputDir);
      return 0;
    }
    const std::string modelPath = modelCheckpointPath(o_.outputDir, step);
    const std::string statePath = stateCheckpointPath(o_.outputDir, step);
    Gpt2Weights saved = readCheckpoint(modelPath);
    const Gpt2Config& want = model.config;
    const Gpt2Config& have = saved.config;
    if (have.L != want.L || have.C != want.C || have.H != want.H || have.V != want.V || have.Vp != want.Vp ||
        have.T != want.T)
      throw std::runtime_error(fmt::format("{}: the checkpoint is a model of L={} C={} H={} maxT={} V={}, not the "
                                           "L={} C={} H={} maxT={} V={} of this run",
                                           modelPath, have.L, have.C, have.H, have.T, have.V, want.L, want.C,
                                           want.H, want.T, want.V));
    state = readTrainState(statePath);
    if (state->optimizer.step != step)
      throw std::runtime_error(fmt::format("{}: holds step {}, but its name says {}", statePath, state->optimizer.step, step));
    model.weights = ready(std::move(saved));
    model.fresh = false;  // the checkpoint's values, not the seed's
    return step;
  }

  // One line for benchmarks/train: the median step time (after the first
  // three, which include warm-up and graph capture, where there are more),
  // tokens/s, device memory, the time from start to the end of the first step.
  void printResult() const {
    if (stepMilliseconds_.empty()) return;
    std::vector<double> timed(stepMilliseconds_.begin() + (stepMilliseconds_.size() > 5 ? 3 : 0), stepMilliseconds_.end());
    std::sort(timed.begin(), timed.end());
    const double median = timed[timed.size() / 2];
    std::string communication;
    if (communicationMilliseconds_.size() == stepMilliseconds_.size()) {
      std::vector<double> c(communicationMilliseconds_.begin() + static_cast<long>(stepMilliseconds_.size() - timed.size()),
                            communicationMilliseconds_.end());
      std::sort(c.begin(), c.end());
      communication = fmt::format(", \"communication_ms\": {:.3f}", c[c.size() / 2]);
    }
    // The energy of the timed steps together (since the last other work),
    // where they span a second.
    std::string energy;
    const int64_t untimed = static_cast<int64_t>(stepMilliseconds_.size() - timed.size());
    if (const std::optional<double> joules = energy_.joulesPerStepSince(firstStep_ + untimed, kEnergyWindowSeconds))
      energy = fmt::format(", \"joules_per_step\": {:.2f}", *joules);
    fmt::print("RESULT {{\"implementation\": \"llmc\", \"device\": \"{}\", \"processes\": {}, \"ms_per_step\": {:.3f}, "
               "\"tokens_per_s\": {:.0f}, \"peak_memory_bytes\": {}, \"time_to_first_step_s\": {:.2f}, "
               "\"final_loss\": {:.6f}, \"steps\": {}{}{}}}\n",
               gpu_ ? "cuda" : "cpu", place_.size, median, static_cast<double>(totalBatchTokens_) / (median / 1e3),
               gpu_ ? gpu_->deviceBytes() : 0, firstStepSeconds_.value_or(0), finalLoss_, stepMilliseconds_.size(),
               communication, energy);
  }

  const TrainOptions& o_;
  const ProcessPlace place_;
  const int64_t totalBatchTokens_;  // over all processes
  std::vector<double> communicationMilliseconds_;  // per step, data-parallel
  std::optional<DataLoader> train_, val_;
  std::optional<Tokenizer> tokenizer_;
  std::optional<EvalSet> hellaswag_;  // -h 1
  OutlierDetector lossOutliers_, normOutliers_;  // -sl, -sg
  std::unique_ptr<Trainer> trainer_;
  DeviceTrainer* gpu_ = nullptr;  // trainer_, where it is the GPU path
  std::vector<double> stepMilliseconds_;
  // The steps' energy where the GPU's energy counter can be read, in windows of
  // at least a second (the counter's jumps are about 0.1 s).
  static constexpr double kEnergyWindowSeconds = 1.0;
  StepEnergy energy_;
  int64_t firstStep_ = 0;  // of this run (a resumed one starts later)
  std::optional<double> firstStepSeconds_;
  double finalLoss_ = NAN;
  TrainLog* log_ = nullptr;
  int64_t accumulation_ = 1;
  int64_t totalSteps_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it comes, through a pipe too (run.sh's tee)
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--version") {
      std::printf("llmc-train %s\n", LLMC_VERSION);
      return 0;
    }
  TrainOptions options;
  try {
    options = parseTrainOptions(argc, argv);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "llmc-train: %s\n(see llmc-train --help)\n", e.what());
    return 2;
  }
  try {
    // What only the GPU path does is refused at once by an llmc built without it.
    if (options.device == DeviceChoice::Cuda) requireGpuPath("--device cuda");
    if (options.processes.localProcesses > 1 || options.processes.processes > 1)
      requireGpuPath("several processes (--gpus, -pn)");
    const int gpus = gpusOnThisNode();
    if (options.processes.localProcesses > 1 && options.processes.localProcesses > gpus)
      throw std::runtime_error(fmt::format("--gpus {}: this node has {} GPU(s)", options.processes.localProcesses, gpus));
    if (std::optional<int> status = launchLocalProcesses(options.processes, argv)) return *status;
    ProcessPlace place = placeThisProcess(options.processes, gpus);
    // One log, rank 0's: the others keep stderr for their errors.
    if (place.rank > 0 && !std::freopen("/dev/null", "w", stdout))
      std::fprintf(stderr, "llmc-train: rank %d: cannot silence stdout\n", place.rank);
    return TrainingRun(options, std::move(place)).run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llmc-train: error: %s\n", e.what());
    return 1;
  }
}
