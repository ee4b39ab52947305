// llmc-sample: text from a GPT-2 checkpoint (llm.c's model file, as
// llmc-train writes it), continuing a prompt, with top-k, a temperature and a
// seed. Run with --help for the usage.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "command_line.h"
#include "data_folder.h"
#include "gpt2_checkpoint.h"
#include "sampler.h"
#include "tokenizer.h"

namespace fs = std::filesystem;
using namespace llmc;

namespace {

constexpr const char* kUsage = R"(usage: llmc-sample CHECKPOINT [options]

Prints text a GPT-2 model writes: CHECKPOINT is an llm.c model file (as
llmc-train -o DIR writes DIR/model_NNNNNNNN.bin, or llm.c's gpt2_124M.bin).
The model reads <|endoftext|> (a document's start), then the prompt, and
picks each next token from its scores at the last maxT tokens. The text is
printed to standard output as it comes: the prompt, then what was generated.

Runs on the CPU path only (the reference interpreter, with the entry
gpt2_next_logits of diagrams/gpt2/model.dg that llmc-train samples with):
small models take a fraction of a second a token, GPT-2 124M about a minute.

options:
  --prompt TEXT        the text the sample continues (default: none, a new
                       document)
  -n, --tokens N       tokens to generate (default 64)
  --top-k K            pick among the K likeliest tokens only (default 0: all;
                       1: greedy)
  --temperature T      the scores are divided by T before the softmax
                       (default 1; 0: greedy, the likeliest token each time)
  --seed S             the random generator's seed (default 0); the same
                       seed, model and options give the same text
  --tokenizer PATH     a folder with GPT-2's encoder.json and vocab.bpe, or
                       llm.c's gpt2_tokenizer.bin (which cannot encode a
                       --prompt); default: ../shared/data/gpt2-bpe beside the
                       llmc repository, else data/gpt2-bpe in it
  --ids                print the generated token ids (one line, space
                       separated) instead of the text
  --device cpu         where it runs: the CPU path is the only choice
  --quiet              no line about the model on stderr: the sample only
  --version            print llmc-sample's version
  -h, --help           this text

An option's value may follow it (--seed 1) or be joined by '=' (--seed=1).
Without a tokenizer the ids are printed.

exit status: 0 on success, 1 for an error (a checkpoint or tokenizer that
cannot be read), 2 for a bad command line.

example:
  llmc-sample out/cpu_run/model_00000100.bin --prompt "The Congress" -n 40 --top-k 40
)";

struct Options {
  bool quiet = false;  // --quiet: no line about the model on stderr
  fs::path checkpoint;
  std::optional<std::string> prompt;
  int64_t tokens = 64;
  SamplingOptions sampling;
  uint64_t seed = 0;
  std::string tokenizer;
  bool ids = false;
};

using llmc::UsageError;

// A whole number in [0, max], or a usage error naming the flag.
int64_t parseWhole(const std::string& flag, const std::string& text, int64_t max = INT64_MAX) {
  size_t used = 0;
  long long value = -1;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || text.empty() || value < 0 || value > max)
    throw UsageError(fmt::format("{} expects a whole number from 0 to {}, got \"{}\"", flag, max, text));
  return value;
}

double parseTemperature(const std::string& text) {
  size_t used = 0;
  double value = -1;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value >= 0) || !std::isfinite(value))
    throw UsageError(fmt::format("--temperature expects a number 0 or more, got \"{}\"", text));
  return value;
}

// nullopt after --help or --version.
std::optional<Options> parseOptions(int argc, char** argv) {
  if (argc == 1) throw UsageError("no arguments");
  Options o;
  llmc::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    const auto value = [&] { return args.value(); };
    if (arg == "-h" || arg == "--help" || arg == "--version") args.takesNoValue();
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    } else if (arg == "--version") {
      std::printf("llmc-sample %s\n", LLMC_VERSION);
      return std::nullopt;
    } else if (arg == "--quiet") {
      o.quiet = true;
    } else if (arg == "--prompt") {
      o.prompt = value();
    } else if (arg == "-n" || arg == "--tokens") {
      o.tokens = parseWhole(arg, value());
    } else if (arg == "--top-k") {
      o.sampling.topK = parseWhole(arg, value());
    } else if (arg == "--temperature") {
      o.sampling.temperature = parseTemperature(value());
    } else if (arg == "--seed") {
      o.seed = static_cast<uint64_t>(parseWhole(arg, value()));
    } else if (arg == "--tokenizer") {
      o.tokenizer = value();
    } else if (arg == "--ids") {
      o.ids = true;
    } else if (arg == "--device") {
      const std::string device = value();
      if (device != "cpu")
        throw UsageError(fmt::format("--device {}: llmc-sample runs on the CPU path only (--device cpu)", device));
    } else if (arg.starts_with("-") && arg != "-") {
      throw UsageError(fmt::format("unknown option {}", arg));
    } else if (o.checkpoint.empty()) {
      o.checkpoint = arg;
    } else {
      throw UsageError(fmt::format("one checkpoint only (got {} and {})", o.checkpoint.string(), arg));
    }
  }
  if (o.checkpoint.empty()) throw UsageError("no checkpoint given");
  return o;
}

// The tokenizer of --tokenizer, else GPT-2's beside the repository, else none.
std::optional<Tokenizer> findTokenizer(const std::string& given) {
  if (!given.empty()) return Tokenizer(given);  // its errors name the file
  for (const fs::path& dir : {fs::path(LLMC_SOURCE_DIR) / ".." / "shared" / "data" / "gpt2-bpe",
                              fs::path(LLMC_SOURCE_DIR) / "data" / "gpt2-bpe"})
    if (fs::exists(dir / "encoder.json")) return Tokenizer(dir.lexically_normal());
  return std::nullopt;
}

int run(const Options& o) {
  Gpt2Weights weights = readCheckpoint(o.checkpoint.string());
  const Gpt2Config c = weights.config;
  std::optional<Tokenizer> tokenizer = findTokenizer(o.tokenizer);
  if (tokenizer && c.V > tokenizer->vocabSize())
    throw std::runtime_error(fmt::format("{}: the model's vocabulary of {} tokens is larger than the tokenizer's {}",
                                         o.checkpoint.string(), c.V, tokenizer->vocabSize()));
  if (o.prompt && !tokenizer)
    throw std::runtime_error("--prompt needs a tokenizer to encode it: none found, give --tokenizer DIR");

  // A document's start, as llmc-data writes shards: <|endoftext|>, then the text.
  const int32_t endOfText = tokenizer ? tokenizer->eotToken() : static_cast<int32_t>(c.V - 1);
  std::vector<int32_t> context = {endOfText};
  if (o.prompt)
    for (int id : tokenizer->encode(*o.prompt)) context.push_back(id);
  if (!o.quiet)
    fmt::print(stderr, "llmc-sample: {}: L={} C={} H={} maxT={} V={}; {} prompt token(s); CPU path\n",
               o.checkpoint.string(), c.L, c.C, c.H, c.T, c.V, context.size() - 1);

  const std::string diagrams = findDataFolder({"LLMC_DIAGRAMS", "diagrams", LLMC_DIAGRAMS_DIR, "diagrams"}).string();
  Gpt2Sampler sampler(diagrams, std::move(weights));
  const bool text = tokenizer && !o.ids;
  if (text && o.prompt) std::fputs(o.prompt->c_str(), stdout);
  // Each token's bytes as it comes (a character may span tokens: together
  // they are the text).
  const std::vector<int32_t> generated = sampler.generate(context, o.tokens, o.sampling, o.seed, [&](int32_t id) {
    if (!text) return;
    const std::string& bytes = tokenizer->tokenBytes(id);
    std::fwrite(bytes.data(), 1, bytes.size(), stdout);
    std::fflush(stdout);
  });
  if (!text) {
    std::string line;
    for (int32_t id : generated) line += fmt::format("{}{}", line.empty() ? "" : " ", id);
    std::puts(line.c_str());
  } else {
    std::putchar('\n');
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<Options> options;
  try {
    options = parseOptions(argc, argv);
  } catch (const UsageError& e) {
    std::fprintf(stderr, "llmc-sample: %s\n(see llmc-sample --help)\n", e.what());
    return 2;
  }
  if (!options) return 0;
  try {
    return run(*options);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "llmc-sample: error: %s\n", e.what());
    return 1;
  }
}
