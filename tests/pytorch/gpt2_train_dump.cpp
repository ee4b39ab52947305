// gpt2-train-dump: llmc's GPT-2 training step for a small random model,
// written to files that compare_gpt2_train.py checks against PyTorch: on the
// CPU (the reference interpreter, fp32) or on the GPU (GpuTrainer, fp32 or
// bf16 mixed precision).
//
// usage: gpt2-train-dump --out DIR [--seed N] [--sizes B=4,T=32,...] [--steps 10]
//                        [--lr 1e-3] [--weight-decay 0.1] [--grad-clip 5] [--diagrams DIR]
//                        [--device cpu|cuda] [--precision fp32|bf16]
//
// --device cpu (the default): the step-0 gradient from the interpreter, the
// steps from an InterpreterTrainer, all in fp32. --device cuda: everything from
// one GpuTrainer (generated kernels): the step-0 loss and gradient are its
// first forwardBackward (gradScale 1) and gradient(), read before that step's
// optimizerStep; --precision bf16 (cuda only) keeps the step's parameters and
// activations in bf16, its gradients, master weights and AdamW in fp32. Without
// a usable GPU, --device cuda prints "skipped: ..." and exits 77 (ctest's skip).
//
// Writes, in DIR (all little-endian, no headers except model.bin's):
//   model.bin       llm.c fp32 checkpoint of the random starting weights
//                   (randomGpt2TestWeights: every parameter matters)
//   tokens.bin      int32 [B, T], row-major, token ids in [0, V)
//   targets.bin     int32 [B, T], row-major, the next-token targets in [0, V)
//   grads.bin       float32: the gradient of the step-0 loss with respect to
//                   every parameter, llm.c's order and layout (as model.bin's
//                   parameters); on the CPU from model.dg's entry gpt2 compiled
//                   with autodiff and run by the interpreter in fp32, as
//                   InterpreterTrainer::forwardBackward computes it; on the GPU
//                   GpuTrainer::gradient() after the first forwardBackward
//   loss0.txt       that step-0 loss, 9 significant digits
//   losses.txt      steps + 1 lines: the loss before each of the trainer's
//                   optimizer steps (forwardBackward, gradScale 1, on the same
//                   batch every step), then the loss after the last one
//   grad_norms.txt  steps lines: each step's global gradient norm before clipping
//   config.json     the sizes, the seed, the steps, the optimizer's settings,
//                   "device" ("cpu" or "cuda", and "gpu": its name) and
//                   "precision" ("f32" or "bf16")
//
// The default gradient clip (5) clips the first steps of the default model
// and not the last ones, so both branches of the clip are compared.
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "dump_support.h"
#include "gpt2_checkpoint.h"
#include "interpreter.h"
#include "interpreter_trainer.h"
#include "planning/gpu_query.h"
#ifdef LLMC_HAVE_CUDA  // the GPU path; built without the CUDA toolkit, --device cuda skips
#include "gpu_trainer.h"
#endif

namespace {

using llmc::dump_support::parseSizes;
using llmc::dump_support::parseWholeNumber;
using llmc::dump_support::writeText;

using namespace llmc;

constexpr const char* kUsage =
    "usage: gpt2-train-dump --out DIR [--seed N] [--sizes B=4,T=32,maxT=64,L=2,C=64,H=4,V=500,Vp=512]\n"
    "                       [--steps 10] [--lr 1e-3] [--weight-decay 0.1] [--grad-clip 5]\n"
    "                       [--diagrams DIR] [--device cpu|cuda] [--precision fp32|bf16]\n"
    "Writes model.bin, tokens.bin, targets.bin, grads.bin, loss0.txt, losses.txt, grad_norms.txt\n"
    "and config.json to DIR: llmc's GPT-2 gradient and AdamW steps for a random model,\n"
    "for compare_gpt2_train.py. --diagrams holds gpt2/model.dg and gpt2/optimizer.dg.\n"
    "--device cpu (default): the reference interpreter, fp32. --device cuda: the GPU path\n"
    "(GpuTrainer), --precision fp32 (default) or bf16 (mixed precision); without a GPU it\n"
    "prints 'skipped: ...' and exits 77.\n";

struct Options {
  std::string out;
  uint64_t seed = 1;
  SizeBindings sizes = {{"B", 4}, {"T", 32}, {"maxT", 64}, {"L", 2}, {"C", 64}, {"H", 4}, {"V", 500}, {"Vp", 512}};
  int64_t steps = 10;
  OptimizerSettings optimizer{/*learningRate=*/1e-3, 0.9, 0.95, 1e-8, /*weightDecay=*/0.1, /*maxGradNorm=*/5.0};
  std::string diagrams = LLMC_SOURCE_DIR "/diagrams";
  bool cuda = false;  // --device cuda: GpuTrainer; otherwise the interpreter
  bool bf16 = false;  // --precision bf16 (cuda only)
};


double parseNonNegative(const std::string& name, const std::string& text) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !(value >= 0))
    throw std::invalid_argument(fmt::format("{}: '{}' is not a number >= 0", name, text));
  return value;
}


// Returns nothing for --help.
std::optional<Options> parseOptions(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help")
      return std::nullopt;
    else if (arg == "--out")
      options.out = value();
    else if (arg == "--seed")
      options.seed = static_cast<uint64_t>(parseWholeNumber("--seed", value(), 0));
    else if (arg == "--sizes")
      parseSizes(value(), options.sizes);
    else if (arg == "--steps")
      options.steps = parseWholeNumber("--steps", value(), 0);
    else if (arg == "--lr")
      options.optimizer.learningRate = parseNonNegative("--lr", value());
    else if (arg == "--weight-decay")
      options.optimizer.weightDecay = parseNonNegative("--weight-decay", value());
    else if (arg == "--grad-clip")
      options.optimizer.maxGradNorm = parseNonNegative("--grad-clip", value());
    else if (arg == "--diagrams")
      options.diagrams = value();
    else if (arg == "--device") {
      const std::string device = value();
      if (device != "cpu" && device != "cuda")
        throw std::invalid_argument(fmt::format("--device: '{}' is not cpu or cuda", device));
      options.cuda = device == "cuda";
    } else if (arg == "--precision") {
      const std::string precision = value();
      if (precision != "fp32" && precision != "bf16")
        throw std::invalid_argument(fmt::format("--precision: '{}' is not fp32 or bf16", precision));
      options.bf16 = precision == "bf16";
    } else
      throw std::invalid_argument(fmt::format("unknown option '{}'", arg));
  }
  if (options.out.empty()) throw std::invalid_argument("--out DIR is required");
  if (options.bf16 && !options.cuda)
    throw std::invalid_argument("--precision bf16 needs --device cuda (the interpreter computes in fp32)");
  if (options.sizes.at("T") > options.sizes.at("maxT"))
    throw std::invalid_argument("--sizes: T must not exceed maxT");
  if (options.sizes.at("V") > options.sizes.at("Vp")) throw std::invalid_argument("--sizes: V must not exceed Vp");
  if (options.sizes.at("C") % options.sizes.at("H") != 0)
    throw std::invalid_argument("--sizes: C must be a multiple of H");
  return options;
}

Gpt2Config configFromSizes(const SizeBindings& sizes) {
  Gpt2Config config;
  config.T = sizes.at("maxT");
  config.L = sizes.at("L");
  config.C = sizes.at("C");
  config.H = sizes.at("H");
  config.V = sizes.at("V");
  config.Vp = sizes.at("Vp");
  return config;
}

template <class T>
void writeRaw(const std::filesystem::path& path, const std::vector<double>& data) {
  std::vector<T> values(data.begin(), data.end());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out) throw std::runtime_error(fmt::format("{}: write failed", path.string()));
}


std::vector<int32_t> toTokens(const HostTensor& tensor) { return {tensor.data.begin(), tensor.data.end()}; }

// The step-0 loss and gradient as InterpreterTrainer::forwardBackward computes
// them: model.dg's entry gpt2 with autodiff, run in fp32. The gradient comes
// back packed in gpt2Parameters() order, each parameter in its declared layout.
double lossAndGradient(const Options& options, const Gpt2Weights& weights, const HostTensor& tokens,
                       const HostTensor& targets, std::vector<double>& gradient) {
  PipelineOptions pipeline;
  pipeline.path = options.diagrams + "/gpt2/model.dg";
  pipeline.entry = "gpt2";
  pipeline.sizes = options.sizes;
  pipeline.grad = true;
  const Graph graph = compileToIR(pipeline);

  std::map<std::string, HostTensor> inputs = weights.inputs();
  inputs["tokens"] = tokens;
  inputs["targets"] = targets;
  InterpreterOptions f32;
  f32.precision = Precision::F32;
  const std::vector<HostTensor> out = interpret(graph, inputs, f32);

  const std::vector<Gpt2Parameter> params = gpt2Parameters(weights.config);
  if (out.size() != params.size() + 1)
    throw std::runtime_error(fmt::format("the gradient graph has {} outputs, expected the loss and {} gradients",
                                         out.size(), params.size()));
  gradient.clear();
  for (size_t k = 0; k < params.size(); ++k) {
    if (!out[k + 1].type.sameAxisSet(params[k].type))
      throw std::runtime_error(fmt::format("output {} ({}) has type {}, expected the gradient of {} {}", k + 1,
                                           graph.outputs[k + 1].name, out[k + 1].type.str(), params[k].name,
                                           params[k].type.str()));
    const HostTensor g = permuteTo(out[k + 1], params[k].type);
    gradient.insert(gradient.end(), g.data.begin(), g.data.end());
  }
  return out[0].data.at(0);
}

void dump(const Options& options) {
  const Gpt2Config config = configFromSizes(options.sizes);
  const int64_t B = options.sizes.at("B"), T = options.sizes.at("T");
  const std::filesystem::path out = options.out;

  const Gpt2Weights weights = randomGpt2TestWeights(config, options.seed);
  const Type tokenType{DType::I32, {{"b", B}, {"t", T}}};
  const HostTensor tokens = randomUniform(tokenType, options.seed + 1, 0, static_cast<double>(config.V));
  const HostTensor targets = randomUniform(tokenType, options.seed + 2, 0, static_cast<double>(config.V));
  const std::vector<int32_t> tokenIds = toTokens(tokens), targetIds = toTokens(targets);

  // On the GPU the trainer starts first: without a GPU (NoGpuError, a skip)
  // nothing is written.
#ifdef LLMC_HAVE_CUDA
  std::unique_ptr<GpuTrainer> gpu;
#endif
  std::string gpuName;
  if (options.cuda) {
#ifndef LLMC_HAVE_CUDA
    throw NoGpuError("gpt2-train-dump was built without the CUDA toolkit");
#else
    GpuTrainerOptions gpuOptions;
    gpuOptions.bf16 = options.bf16;
    gpu = std::make_unique<GpuTrainer>(options.diagrams, weights, B, T, gpuOptions);
    const GpuStartup& s = gpu->startup();
    gpuName = s.device;
    fmt::print("gpu: {} ({}), {} storage: planned in {:.1f} s, kernels compiled or loaded in {:.1f} s, "
               "{} launches a step\n",
               s.device, s.arch, options.bf16 ? "bf16" : "fp32", s.planSeconds, s.compileSeconds, s.stepLaunches);
#endif
  }

  std::filesystem::create_directories(out);
  writeCheckpoint((out / "model.bin").string(), weights, /*bf16=*/false);
  writeRaw<int32_t>(out / "tokens.bin", tokens.data);
  writeRaw<int32_t>(out / "targets.bin", targets.data);

  // The step-0 loss and gradient. On the GPU they are the trainer's first
  // forwardBackward, whose gradient is the one its first optimizerStep below
  // applies: one trainer for both, so the steps start from the same point.
  std::vector<double> gradient;
  std::unique_ptr<Trainer> trainer;
  double loss0 = 0;
#ifdef LLMC_HAVE_CUDA
  if (gpu) {
    loss0 = gpu->forwardBackward(tokenIds, targetIds, /*gradScale=*/1.0);
    gradient = gpu->gradient();
    trainer = std::move(gpu);
  } else
#endif
  {
    loss0 = lossAndGradient(options, weights, tokens, targets, gradient);
  }
  writeRaw<float>(out / "grads.bin", gradient);
  writeText(out / "loss0.txt", fmt::format("{:.9g}\n", loss0));

  // The steps, by the trainer itself: the loss before each step, the global
  // gradient norm each step clips, and the loss after the last.
  const bool firstStepRan = trainer != nullptr;  // the GPU's step 0 forwardBackward, above
  if (!trainer) trainer = std::make_unique<InterpreterTrainer>(options.diagrams, weights, B, T);
  std::string losses, norms;
  int clipped = 0;
  for (int64_t step = 0; step < options.steps; ++step) {
    const double loss =
        step == 0 && firstStepRan ? loss0 : trainer->forwardBackward(tokenIds, targetIds, /*gradScale=*/1.0);
    const double norm = trainer->optimizerStep(options.optimizer);
    const bool clips = norm + 1e-6 > options.optimizer.maxGradNorm;  // as optimizer.dg clips
    clipped += clips;
    fmt::print("step {:3}: loss {:.9g}  grad norm {:.6g}{}\n", step, loss, norm, clips ? " (clipped)" : "");
    losses += fmt::format("{:.9g}\n", loss);
    norms += fmt::format("{:.9g}\n", norm);
  }
  const double finalLoss = trainer->loss(tokenIds, targetIds);
  fmt::print("final   : loss {:.9g}\n", finalLoss);
  losses += fmt::format("{:.9g}\n", finalLoss);
  writeText(out / "losses.txt", losses);
  writeText(out / "grad_norms.txt", norms);

  const OptimizerSettings& s = options.optimizer;
  const nlohmann::json decayed = nlohmann::json::array({"wte", "wpe", "qkvw", "attprojw", "fcw", "fcprojw"});
  nlohmann::json json = {{"B", B},
                               {"T", T},
                               {"maxT", config.T},
                               {"L", config.L},
                               {"C", config.C},
                               {"H", config.H},
                               {"V", config.V},
                               {"Vp", config.Vp},
                               {"seed", options.seed},
                               {"device", options.cuda ? "cuda" : "cpu"},
                               {"precision", options.bf16 ? "bf16" : "f32"},
                               {"steps", options.steps},
                               {"lr", s.learningRate},
                               {"beta1", s.beta1},
                               {"beta2", s.beta2},
                               {"eps", s.eps},
                               {"weight_decay", s.weightDecay},
                               {"grad_clip", s.maxGradNorm},
                               {"decayed", decayed}};
  if (options.cuda) json["gpu"] = gpuName;
  writeText(out / "config.json", json.dump(2) + "\n");
  fmt::print(
      "gpt2-train-dump: {} {}: B={} T={} maxT={} L={} C={} H={} V={} Vp={} seed={}: loss0 {:.9g}, {} steps (lr {:g}, "
      "weight decay {:g}, clip {:g}, clipped {} times): loss {:.9g} -> {:.9g}; files in {}\n",
      options.cuda ? "cuda" : "cpu", options.bf16 ? "bf16" : "fp32", B, T, config.T, config.L, config.C, config.H,
      config.V, config.Vp, options.seed, loss0, options.steps,
      s.learningRate, s.weightDecay, s.maxGradNorm, clipped, loss0, finalLoss, out.string());
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Options> options;
  try {
    options = parseOptions(argc, argv);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "gpt2-train-dump: {}\n{}", e.what(), kUsage);
    return 2;
  }
  if (!options) {
    fmt::print("{}", kUsage);
    return 0;
  }
  try {
    dump(*options);
  } catch (const llmc::NoGpuError& e) {
    fmt::print("gpt2-train-dump: skipped: --device cuda: no usable GPU: {}\n", e.what());
    return 77;
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpt2-train-dump: {}\n", e.what());
    return 1;
  }
  return 0;
}
