// llmc-data: text files -> GPT-2 tokens -> llm.c token shards, split by
// document into train and val. Run with --help for the usage.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "command_line.h"
#include "shard.h"
#include "tokenizer.h"

namespace fs = std::filesystem;
using namespace llmc;

namespace {

constexpr int64_t kDefaultShardSize = 100'000'000;  // llm.c's fineweb.py
constexpr double kDefaultValFraction = 0.1;

constexpr const char* kUsage = R"(usage: llmc-data [options] FILES_OR_DIRS...

Tokenizes text with GPT-2's BPE and writes llm.c token shards (256 int32
header words, then uint16 tokens), split by document into train and val.

Documents: each file is one document; directories are searched recursively
for *.txt files, taken in sorted path order. With --separator, each file is
instead cut at every occurrence of the separator and each non-empty piece is a
document. Every document is preceded by one <|endoftext|> token (50256).

Split: the val documents are spread evenly over the document order (every
k-th document), so the split depends only on the inputs and the options. Val
gets at least one document and train keeps at least one.

Output: OUT/PREFIX_val_000000.bin, OUT/PREFIX_train_000000.bin, ...: each split
numbered from 000000, shards of --shard-size tokens (the last one shorter);
documents run on across shard boundaries. Shards of the same prefix and split
left over from an earlier run, numbered past the new ones, are removed. Beside
them, OUT/gpt2_tokenizer.bin: the tokenizer in llm.c's format, which llm.c
and llmc-train's and llmc-sample's --tokenizer read to print text.

options:
  --tokenizer DIR      folder with encoder.json and vocab.bpe (default:
                       ../shared/data/gpt2-bpe beside the llmc repository, else
                       data/gpt2-bpe inside it, as scripts/fetch_data.sh makes)
  --out DIR            output folder, created if missing (required)
  --tokenizer-file F   where to write llm.c's tokenizer file (default
                       OUT/gpt2_tokenizer.bin; "none": not written)
  --val-fraction F     share of the documents for val, 0 < F < 1 (default 0.1)
  --val-docs N         exactly N documents for val (instead of --val-fraction)
  --shard-size N       tokens per shard file (default 100000000)
  --separator S        split files into documents at S; \n, \t, \r and \\ in S
                       are escapes (e.g. --separator '\n\n\n')
  --name PREFIX        prefix of the file names (default: the first input's
                       name without .txt)
  --quiet              no progress, summary or clean-up lines; errors only
  --version            print llmc-data's version
  -h, --help           this text

An option's value may follow it (--out DIR) or be joined by '=' (--out=DIR).

example:
  llmc-data --out build/data/text ../shared/data/text
)";

struct Options {
  bool quiet = false;  // --quiet: no progress or summary lines
  std::optional<fs::path> tokenizerDir;
  fs::path outDir;
  std::optional<fs::path> tokenizerFile;  // empty: none written
  std::optional<double> valFraction;
  std::optional<int64_t> valDocs;
  int64_t shardSize = kDefaultShardSize;
  std::optional<std::string> separator;
  std::string name;
  std::vector<fs::path> inputs;
};

using llmc::UsageError;  // reported with a pointer to --help

int64_t parseCount(const std::string& flag, const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value <= 0) {
    throw UsageError(fmt::format("{} expects a positive whole number, got \"{}\"", flag, text));
  }
  return value;
}

double parseFraction(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || !(value > 0 && value < 1)) {
    throw UsageError(fmt::format("{} expects a number strictly between 0 and 1, got \"{}\"", flag, text));
  }
  return value;
}

std::string unescape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\\' || i + 1 == text.size()) {
      out.push_back(text[i]);
      continue;
    }
    switch (text[++i]) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case '\\': out.push_back('\\'); break;
      default: out.push_back('\\'); out.push_back(text[i]); break;
    }
  }
  return out;
}

std::string defaultName(const fs::path& firstInput) {
  fs::path path = firstInput;
  if (path.filename().empty()) path = path.parent_path();  // "dir/"
  const std::string stem = path.stem().string();
  return stem.empty() || stem == "." || stem == ".." ? "data" : stem;
}

// Returns nullopt after printing the usage for --help.
std::optional<Options> parseOptions(int argc, char** argv) {
  if (argc == 1) throw UsageError("no arguments");
  Options options;
  std::optional<std::string> name;
  llmc::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    const auto value = [&] { return args.value(); };
    if (arg == "-h" || arg == "--help" || arg == "--version") args.takesNoValue();
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    } else if (arg == "--version") {
      std::printf("llmc-data %s\n", LLMC_VERSION);
      return std::nullopt;
    } else if (arg == "--quiet") {
      options.quiet = true;
    } else if (arg == "--tokenizer") {
      options.tokenizerDir = value();
    } else if (arg == "--out") {
      options.outDir = value();
    } else if (arg == "--tokenizer-file") {
      const std::string file = value();
      options.tokenizerFile = file == "none" ? fs::path() : fs::path(file);
      if (file.empty()) throw UsageError("--tokenizer-file needs a path, or none");
    } else if (arg == "--val-fraction") {
      options.valFraction = parseFraction(arg, value());
    } else if (arg == "--val-docs") {
      options.valDocs = parseCount(arg, value());
    } else if (arg == "--shard-size") {
      options.shardSize = parseCount(arg, value());
    } else if (arg == "--separator") {
      options.separator = unescape(value());
      if (options.separator->empty()) throw UsageError("--separator must not be empty");
    } else if (arg == "--name") {
      name = value();
    } else if (arg.starts_with("-") && arg != "-") {
      throw UsageError(fmt::format("unknown option {}", arg));
    } else {
      options.inputs.push_back(arg);
    }
  }
  if (options.outDir.empty()) throw UsageError("--out DIR is required");
  if (options.inputs.empty()) throw UsageError("no input files or directories given");
  if (options.valFraction && options.valDocs) throw UsageError("give --val-fraction or --val-docs, not both");
  options.name = name ? *name : defaultName(options.inputs.front());
  if (options.name.empty() || options.name.find('/') != std::string::npos) {
    throw UsageError(fmt::format("--name must be a non-empty file name prefix, got \"{}\"", options.name));
  }
  return options;
}

// The repository root: the nearest folder above the executable that holds
// this source file, else the one the build was configured from.
std::vector<fs::path> repositoryRoots() {
  std::vector<fs::path> roots;
  std::error_code error;
  const fs::path executable = fs::read_symlink("/proc/self/exe", error);
  if (!error) {
    for (fs::path dir = executable.parent_path(); dir != dir.root_path(); dir = dir.parent_path()) {
      if (fs::exists(dir / "tools/llmc_data.cpp")) {
        roots.push_back(dir);
        break;
      }
    }
  }
  roots.push_back(LLMC_SOURCE_DIR);
  return roots;
}

fs::path findTokenizerDir() {
  std::vector<fs::path> candidates;
  for (const fs::path& root : repositoryRoots()) {
    candidates.push_back((root / "../shared/data/gpt2-bpe").lexically_normal());
    candidates.push_back(root / "data/gpt2-bpe");
  }
  for (const fs::path& dir : candidates) {
    if (fs::exists(dir / "encoder.json")) return dir;
  }
  std::string tried;
  for (const fs::path& dir : candidates) tried += "\n  " + dir.string();
  throw std::runtime_error(fmt::format(
      "no --tokenizer given and no encoder.json in any of:{}\npass --tokenizer DIR or run scripts/fetch_data.sh",
      tried));
}

// The input files in order: files as given, directories as their *.txt files
// sorted by path.
std::vector<fs::path> listInputFiles(const std::vector<fs::path>& inputs) {
  std::vector<fs::path> files;
  for (const fs::path& input : inputs) {
    if (!fs::exists(input)) throw std::runtime_error(fmt::format("input {} does not exist", input.string()));
    if (!fs::is_directory(input)) {
      files.push_back(input);
      continue;
    }
    std::vector<fs::path> found;
    for (const auto& entry : fs::recursive_directory_iterator(input)) {
      if (entry.is_regular_file() && entry.path().extension() == ".txt") found.push_back(entry.path());
    }
    if (found.empty()) throw std::runtime_error(fmt::format("directory {} holds no .txt files", input.string()));
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("{}: cannot open", path.string()));
  std::ostringstream content;
  content << in.rdbuf();
  return std::move(content).str();
}

// The documents of one file's text.
std::vector<std::string_view> splitDocuments(std::string_view text, const std::optional<std::string>& separator) {
  if (!separator) return {text};
  std::vector<std::string_view> documents;
  for (size_t start = 0; start <= text.size();) {
    size_t end = text.find(*separator, start);
    if (end == std::string_view::npos) end = text.size();
    if (end > start) documents.push_back(text.substr(start, end - start));
    start = end + separator->size();
  }
  return documents;
}

// Whether document i of count goes to val: nVal of them, evenly spaced.
bool isValDocument(int64_t i, int64_t count, int64_t valCount) {
  return (i + 1) * valCount / count > i * valCount / count;
}

// Collects one split's tokens and writes them out shard by shard.
class ShardSequence {
 public:
  ShardSequence(fs::path outDir, std::string prefix, int64_t shardSize)
      : outDir_(std::move(outDir)), prefix_(std::move(prefix)), shardSize_(shardSize) {}

  void append(const std::vector<int>& ids) {
    tokenCount_ += static_cast<int64_t>(ids.size());
    for (int id : ids) {
      pending_.push_back(static_cast<uint16_t>(id));
      if (static_cast<int64_t>(pending_.size()) == shardSize_) writePending();
    }
  }

  // Writes the last, partial shard and removes stale shards of an earlier run
  // (said on stderr unless quiet).
  void finish(bool quiet) {
    if (!pending_.empty()) writePending();
    for (int64_t index = static_cast<int64_t>(written_.size());; ++index) {
      const fs::path stale = pathOf(index);
      if (!fs::exists(stale)) break;
      fs::remove(stale);
      if (!quiet) fmt::print(stderr, "llmc-data: removed {} (left over from an earlier run)\n", stale.string());
    }
  }

  int64_t tokenCount() const { return tokenCount_; }
  const std::vector<fs::path>& written() const { return written_; }

 private:
  fs::path pathOf(int64_t index) const { return outDir_ / fmt::format("{}_{:06d}.bin", prefix_, index); }

  void writePending() {
    const fs::path path = pathOf(static_cast<int64_t>(written_.size()));
    writeShard(path, pending_);
    written_.push_back(path);
    pending_.clear();
  }

  fs::path outDir_;
  std::string prefix_;
  int64_t shardSize_;
  std::vector<uint16_t> pending_;
  int64_t tokenCount_ = 0;
  std::vector<fs::path> written_;
};

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string describeFiles(const std::vector<fs::path>& files) {
  std::string names;
  for (const fs::path& file : files) names += (names.empty() ? "" : ", ") + file.string();
  return fmt::format("{} file{}: {}", files.size(), files.size() == 1 ? "" : "s", names);
}

void run(const Options& options) {
  const fs::path tokenizerDir = options.tokenizerDir ? *options.tokenizerDir : findTokenizerDir();
  Tokenizer tokenizer(tokenizerDir);
  if (tokenizer.vocabSize() > 65536) {
    throw std::runtime_error(fmt::format("{}: {} tokens do not fit the uint16 tokens of a shard",
                                         tokenizerDir.string(), tokenizer.vocabSize()));
  }
  if (!tokenizer.canEncode()) {
    throw std::runtime_error(fmt::format("--tokenizer {}: llm.c's tokenizer file cannot encode text; give the folder "
                                         "with encoder.json and vocab.bpe",
                                         tokenizerDir.string()));
  }
  const std::vector<fs::path> files = listInputFiles(options.inputs);

  // The split needs the number of documents before the first is written.
  int64_t documentCount = static_cast<int64_t>(files.size());
  if (options.separator) {
    documentCount = 0;
    for (const fs::path& file : files) {
      documentCount += static_cast<int64_t>(splitDocuments(readFile(file), options.separator).size());
    }
  }
  if (documentCount < 2) {
    throw std::runtime_error(fmt::format(
        "{} document{} found; the train/val split is by document and needs at least 2 (give more files, or "
        "--separator to cut files into documents)",
        documentCount, documentCount == 1 ? "" : "s"));
  }
  int64_t valCount = options.valDocs ? *options.valDocs
                                     : std::llround(options.valFraction.value_or(kDefaultValFraction) * documentCount);
  if (options.valDocs && valCount >= documentCount) {
    throw std::runtime_error(fmt::format("--val-docs {} leaves no training document: there are {} documents",
                                         valCount, documentCount));
  }
  valCount = std::clamp<int64_t>(valCount, 1, documentCount - 1);

  fs::create_directories(options.outDir);
  ShardSequence train(options.outDir, options.name + "_train", options.shardSize);
  ShardSequence val(options.outDir, options.name + "_val", options.shardSize);

  const auto start = std::chrono::steady_clock::now();
  auto lastReport = start;
  int64_t bytesDone = 0;
  int64_t documentsDone = 0;
  const auto report = [&] {
    if (options.quiet) return;
    const double seconds = secondsSince(start);
    fmt::print(stderr, "llmc-data: {}/{} documents, {} tokens, {:.1f} MB, {:.1f} MB/s\n", documentsDone,
               documentCount, train.tokenCount() + val.tokenCount(), bytesDone / 1e6,
               seconds > 0 ? bytesDone / 1e6 / seconds : 0.0);
  };
  for (const fs::path& file : files) {
    const std::string text = readFile(file);
    for (std::string_view document : splitDocuments(text, options.separator)) {
      std::vector<int> ids{tokenizer.eotToken()};
      const std::vector<int> documentIds = tokenizer.encode(document);
      ids.insert(ids.end(), documentIds.begin(), documentIds.end());
      (isValDocument(documentsDone, documentCount, valCount) ? val : train).append(ids);
      ++documentsDone;
      bytesDone += static_cast<int64_t>(document.size());
      if (secondsSince(lastReport) >= 1.0) {
        report();
        lastReport = std::chrono::steady_clock::now();
      }
    }
  }
  train.finish(options.quiet);
  val.finish(options.quiet);
  const fs::path tokenizerFile = options.tokenizerFile.value_or(options.outDir / kLlmcTokenizerFileName);
  if (!tokenizerFile.empty()) tokenizer.writeLlmcFile(tokenizerFile);

  const double seconds = secondsSince(start);
  if (options.quiet) return;
  fmt::print("llmc-data: {} documents ({} train, {} val), {:.1f} MB of text in {:.1f} s ({:.1f} MB/s)\n",
             documentCount, documentCount - valCount, valCount, bytesDone / 1e6, seconds,
             bytesDone / 1e6 / seconds);
  fmt::print("  train: {} tokens in {}\n", train.tokenCount(), describeFiles(train.written()));
  fmt::print("  val:   {} tokens in {}\n", val.tokenCount(), describeFiles(val.written()));
  if (!tokenizerFile.empty()) fmt::print("  tokenizer: {}\n", tokenizerFile.string());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::optional<Options> options = parseOptions(argc, argv);
    if (options) run(*options);
    return 0;
  } catch (const UsageError& e) {
    fmt::print(stderr, "llmc-data: {}\nrun llmc-data --help for the usage\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "llmc-data: {}\n", e.what());
    return 1;
  }
}
