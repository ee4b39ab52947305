// gpt2-forward-dump: llmc's GPT-2 forward pass for a small random model, written
// to files that compare_gpt2_forward.py checks against PyTorch.
//
// usage: gpt2-forward-dump --out DIR [--seed N] [--sizes B=3,T=16,...] [--model PATH]
//
// Writes, in DIR (all little-endian, no headers except model.bin's):
//   model.bin    llm.c fp32 checkpoint of random weights in which every
//                parameter matters (randomGpt2TestWeights)
//   tokens.bin   int32 [B, T], row-major, token ids in [0, V)
//   targets.bin  int32 [B, T], row-major, the next-token targets in [0, V)
//   logits.bin   float32 [B, T, Vp], row-major: the interpreter's fp32 logits
//                (diagram gpt2_logits), the padded columns included
//   loss.txt     the interpreter's fp32 mean cross-entropy (diagram gpt2), one
//                number, 9 significant digits
//   config.json  B, T, maxT, L, C, H, V, Vp, seed and the precision
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "driver/pipeline.h"
#include "dump_support.h"
#include "gpt2_checkpoint.h"
#include "interpreter.h"

namespace {

using llmc::dump_support::parseSizes;
using llmc::dump_support::parseWholeNumber;
using llmc::dump_support::writeText;

using namespace llmc;

constexpr const char* kUsage =
    "usage: gpt2-forward-dump --out DIR [--seed N] [--sizes B=3,T=16,maxT=32,L=2,C=32,H=4,V=100,Vp=128]\n"
    "                         [--model PATH]\n"
    "Writes model.bin, tokens.bin, targets.bin, logits.bin, loss.txt and config.json to DIR:\n"
    "llmc's fp32 GPT-2 forward pass for a random model, for compare_gpt2_forward.py.\n";

struct Options {
  std::string out;
  uint64_t seed = 1;
  SizeBindings sizes = {{"B", 3}, {"T", 16}, {"maxT", 32}, {"L", 2}, {"C", 32}, {"H", 4}, {"V", 100}, {"Vp", 128}};
  std::string model = LLMC_SOURCE_DIR "/diagrams/gpt2/model.dg";
};



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
    else if (arg == "--model")
      options.model = value();
    else
      throw std::invalid_argument(fmt::format("unknown option '{}'", arg));
  }
  if (options.out.empty()) throw std::invalid_argument("--out DIR is required");
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
void writeRaw(const std::filesystem::path& path, const HostTensor& tensor) {
  std::vector<T> values(tensor.data.begin(), tensor.data.end());
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!out) throw std::runtime_error(fmt::format("{}: write failed", path.string()));
}


Graph compileEntry(const Options& options, const std::string& entry) {
  PipelineOptions pipeline;
  pipeline.path = options.model;
  pipeline.entry = entry;
  pipeline.sizes = options.sizes;
  return compileToIR(pipeline);
}

void dump(const Options& options) {
  const Gpt2Config config = configFromSizes(options.sizes);
  const int64_t B = options.sizes.at("B"), T = options.sizes.at("T");
  const std::filesystem::path out = options.out;
  std::filesystem::create_directories(out);

  const Gpt2Weights weights = randomGpt2TestWeights(config, options.seed);
  const Type tokenType{DType::I32, {{"b", B}, {"t", T}}};
  const HostTensor tokens = randomUniform(tokenType, options.seed + 1, 0, static_cast<double>(config.V));
  const HostTensor targets = randomUniform(tokenType, options.seed + 2, 0, static_cast<double>(config.V));
  std::map<std::string, HostTensor> inputs = weights.inputs();
  inputs["tokens"] = tokens;
  inputs["targets"] = targets;

  const InterpreterOptions fp32{Precision::F32};
  const HostTensor logits = permuteTo(interpret(compileEntry(options, "gpt2_logits"), inputs, fp32).at(0),
                                      Type{DType::F32, {{"b", B}, {"t", T}, {"vp", config.Vp}}});
  const double loss = interpret(compileEntry(options, "gpt2"), inputs, fp32).at(0).data.at(0);

  writeCheckpoint((out / "model.bin").string(), weights, /*bf16=*/false);
  writeRaw<int32_t>(out / "tokens.bin", tokens);
  writeRaw<int32_t>(out / "targets.bin", targets);
  writeRaw<float>(out / "logits.bin", logits);
  writeText(out / "loss.txt", fmt::format("{:.9g}\n", loss));
  const nlohmann::json json = {
      {"B", B},        {"T", T},        {"maxT", config.T}, {"L", config.L},        {"C", config.C},
      {"H", config.H}, {"V", config.V}, {"Vp", config.Vp},  {"seed", options.seed}, {"precision", "f32"}};
  writeText(out / "config.json", json.dump(2) + "\n");
  fmt::print("gpt2-forward-dump: B={} T={} maxT={} L={} C={} H={} V={} Vp={} seed={}: loss {:.9g}, files in {}\n", B, T,
             config.T, config.L, config.C, config.H, config.V, config.Vp, options.seed, loss, out.string());
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Options> options;
  try {
    options = parseOptions(argc, argv);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "gpt2-forward-dump: {}\n{}", e.what(), kUsage);
    return 2;
  }
  if (!options) {
    fmt::print("{}", kUsage);
    return 0;
  }
  try {
    dump(*options);
  } catch (const std::exception& e) {
    fmt::print(stderr, "gpt2-forward-dump: {}\n", e.what());
    return 1;
  }
  return 0;
}
