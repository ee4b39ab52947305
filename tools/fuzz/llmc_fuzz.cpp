// llmc-fuzz: random diagrams through the whole compiler (README.md here).
#include <fmt/format.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "checks.h"
#include "fuzz_runner.h"
#include "generator.h"
#include "shrink.h"

namespace fuzz = llmc::fuzz;

namespace {

const char* kUsage = R"(usage: llmc-fuzz [options]

Generates random well-typed diagrams (a seed fully determines one) and checks
each: the front end accepts it (front); the interpreter's gradients match
finite differences (grad); every kernel planned for each --arch and --storage,
forward and backward, compiles with NVRTC (nvrtc); on GPU 0 the module matches
the f64 interpreter forward and backward (gpu). A failing diagram is shrunk and
saved under --out with the command that reproduces it.

  --seed S              the first seed (default 1); diagram i has seed S+i
  --count N             how many diagrams (default 100)
  --seconds T           start no diagram after T seconds
  --checks LIST         of front,grad,passes,nvrtc,gpu (default front,grad,passes,nvrtc)
  --arch LIST           of sm_90a,sm_80 (default both)
  --storage LIST        of f32,bf16 (default both)
  --graphs LIST         of forward,backward (default both)
  --sample-configs      plan each diagram in one (arch, storage, graph) only, drawn by its seed
  --jobs J              diagrams checked at once (default 1)
  --out DIR             where failures are saved (default fuzz-out)
  --known FILE          failure signatures (regular expressions, one a line) counted as known, not failed
  --max-elements N      elements per array (default 65536)
  --max-size N          size per axis (default 1100)
  --max-steps N         operations per diagram (default 10)
  --f32-only            no bf16 arrays in the diagrams
  --fd-coordinates N    coordinates per differentiated input checked by finite differences (default 4)
  --row-products        plan with llmc-compile --row-products (nvrtc, gpu)
  --no-shrink           save failures as generated
  --shrink-seconds T    time to shrink one failure (default 120)
  --timeout T           seconds one diagram's checks may take (default 600)
  --no-fork             check in this process (for compute-sanitizer or a debugger; a crash ends the run)
  --sanitizer-friendly  small diagrams (max-elements 4096, max-size 64), one launch at a time, --no-fork
  --sanitizer-commands  print the compute-sanitizer command lines for these options and exit
  --print               print the diagram of --seed and exit
  --file F.dg           check a saved diagram (its header names its inputs) instead of generating
  -h, --help            this text

Ends with "N passed, M failed"; exits 1 if a failure is not known. SIGTERM
or SIGINT (timeout, Ctrl-C) ends a run early: it lists the diagrams still
running as unfinished and exits 1.
)";

struct Options {
  uint64_t seed = 1;
  int64_t count = 100;
  double seconds = 0;
  int jobs = 1;
  std::string out = "fuzz-out";
  std::string known;
  bool shrink = true, fork = true, print = false, sanitizerCommands = false;
  double shrinkSeconds = 120, timeout = 600;
  std::string file;
  fuzz::GeneratorOptions generator;
  fuzz::CheckOptions checks;
  std::vector<std::string> argv;  // for the sanitizer commands
};

std::vector<std::string> split(const std::string& list) {
  std::vector<std::string> items;
  for (size_t start = 0; start <= list.size();) {
    size_t comma = list.find(',', start);
    if (comma == std::string::npos) comma = list.size();
    if (comma > start) items.push_back(list.substr(start, comma - start));
    start = comma + 1;
  }
  return items;
}

[[noreturn]] void usageError(const std::string& message) {
  fmt::print(stderr, "llmc-fuzz: {}\n(see llmc-fuzz --help)\n", message);
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  bool maxElementsGiven = false, maxSizeGiven = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usageError(arg + " needs a value");
      o.argv.push_back(arg);
      o.argv.push_back(argv[i + 1]);
      return argv[++i];
    };
    auto number = [&]() -> double {
      const std::string v = value();
      try {
        return std::stod(v);
      } catch (...) {
        usageError(fmt::format("{}: '{}' is not a number", arg, v));
      }
    };
    if (arg == "-h" || arg == "--help") {
      fmt::print("{}", kUsage);
      std::exit(0);
    } else if (arg == "--seed") o.seed = static_cast<uint64_t>(number());
    else if (arg == "--count") o.count = static_cast<int64_t>(number());
    else if (arg == "--seconds") o.seconds = number();
    else if (arg == "--checks") o.checks.checks = split(value());
    else if (arg == "--arch") o.checks.archs = split(value());
    else if (arg == "--storage") o.checks.storages = split(value());
    else if (arg == "--graphs") {
      const auto g = split(value());
      o.checks.forward = std::find(g.begin(), g.end(), "forward") != g.end();
      o.checks.backward = std::find(g.begin(), g.end(), "backward") != g.end();
    } else if (arg == "--sample-configs") o.checks.sampleConfigs = true, o.argv.push_back(arg);
    else if (arg == "--jobs") o.jobs = std::max(1, static_cast<int>(number()));
    else if (arg == "--out") o.out = value();
    else if (arg == "--known") o.known = value();
    else if (arg == "--max-elements") o.generator.maxElements = static_cast<int64_t>(number()), maxElementsGiven = true;
    else if (arg == "--max-size") o.generator.maxSize = static_cast<int64_t>(number()), maxSizeGiven = true;
    else if (arg == "--max-steps") o.generator.maxSteps = static_cast<int>(number());
    else if (arg == "--f32-only") o.generator.lowPrecision = false, o.argv.push_back(arg);
    else if (arg == "--fd-coordinates") o.checks.fdCoordinates = static_cast<int>(number());
    else if (arg == "--no-shrink") o.shrink = false;
    else if (arg == "--row-products") o.checks.rowProducts = true, o.argv.push_back(arg);
    else if (arg == "--shrink-seconds") o.shrinkSeconds = number();
    else if (arg == "--timeout") o.timeout = number();
    else if (arg == "--no-fork") o.fork = false;
    else if (arg == "--sanitizer-friendly") o.checks.sanitizerFriendly = true, o.fork = false;
    else if (arg == "--sanitizer-commands") o.sanitizerCommands = true;
    else if (arg == "--print") o.print = true;
    else if (arg == "--file") o.file = value();
    else usageError(fmt::format("unknown option '{}'", arg));
  }
  for (const std::string& c : o.checks.checks)
    if (c != "front" && c != "grad" && c != "passes" && c != "nvrtc" && c != "gpu") usageError("--checks: unknown check '" + c + "'");
  for (const std::string& a : o.checks.archs)
    if (a != "sm_90a" && a != "sm_80") usageError("--arch: unknown arch '" + a + "'");
  for (const std::string& s : o.checks.storages)
    if (s != "f32" && s != "bf16") usageError("--storage: unknown storage '" + s + "'");
  // Diagrams checked at once share the cores: NVRTC in one thread each.
  if (o.jobs > 1) o.checks.compileThreads = 1;
  if (o.checks.sanitizerFriendly) {
    if (!maxElementsGiven) o.generator.maxElements = 4096;
    if (!maxSizeGiven) o.generator.maxSize = 64;
    o.jobs = 1;
  }
  return o;
}

void printSanitizerCommands(const Options& o) {
  std::string rest;  // the other options given (seed and count are printed first)
  for (size_t i = 0; i < o.argv.size(); ++i) {
    if ((o.argv[i] == "--seed" || o.argv[i] == "--count") && i + 1 < o.argv.size()) {
      ++i;
      continue;
    }
    rest += " " + o.argv[i];
  }
  for (const char* tool : {"memcheck", "racecheck", "initcheck"})
    fmt::print("compute-sanitizer --tool {} --error-exitcode 1 build/bin/llmc-fuzz --checks front,gpu "
               "--sanitizer-friendly --seed {} --count {}{}\n",
               tool, o.seed, o.count, rest);
}

// The options that re-run just the failing check (and, for nvrtc and gpu, the
// failing configuration, named in the signature: "nvrtc sm_80 bf16 backward: ...").
fuzz::CheckOptions narrowed(const fuzz::CheckOptions& all, const fuzz::Failure& f) {
  fuzz::CheckOptions o = all;
  if (f.check == "front") o.checks = {};
  else if (f.check == "grad" || f.check == "nvrtc" || f.check == "gpu") o.checks = {f.check};
  std::smatch m;
  static const std::regex config(R"(^\w+ (sm_\w+) (f32|bf16) (forward|backward))");
  if (std::regex_search(f.signature, m, config)) {
    o.archs = {m[1]};
    o.storages = {m[2]};
    o.forward = m[3] == "forward";
    o.backward = m[3] == "backward";
    o.sampleConfigs = false;
  }
  return o;
}

std::string comment(const std::string& text) {
  std::string out;
  for (size_t start = 0; start < text.size();) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    out += "#   " + text.substr(start, end - start) + "\n";
    start = end + 1;
  }
  return out;
}

// The command lines that reproduce a saved failure.
std::string reproduce(const fuzz::DiagramSpec& spec, const fuzz::Failure& f, const fuzz::CheckOptions& o,
                      const std::string& path) {
  std::string fuzzer = fmt::format("build/bin/llmc-fuzz --file {} --checks {}", path, f.check == "front" ? "front" : f.check);
  std::string compile = fmt::format("build/bin/llmc-compile {}", path);
  const bool grad = f.check == "grad" || (o.backward && !o.forward) || f.signature.find("--grad") != std::string::npos;
  if (grad) compile += fmt::format(" --grad --loss loss --wrt {}", fmt::join(spec.wrt(), ","));
  if (f.check == "nvrtc" || f.check == "gpu") {
    fuzzer += fmt::format(" --arch {} --storage {} --graphs {}", o.archs.at(0), o.storages.at(0), o.forward ? "forward" : "backward");
    compile += fmt::format(" --arch {} --storage {} --emit {}", o.archs.at(0), o.storages.at(0), f.check == "nvrtc" ? "ptx" : "cuda");
  }
  return fmt::format("# reproduce: {}\n#        or: {}\n", fuzzer, compile);
}

}  // namespace

int runFuzzer(const Options& o);

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  if (o.sanitizerCommands) {
    printSanitizerCommands(o);
    return 0;
  }
  if (o.print) {
    const fuzz::DiagramSpec spec = fuzz::generateDiagram(o.seed, o.generator);
    fmt::print("{}", fuzz::printDiagram(spec, fmt::format("# llmc-fuzz seed {}\n# fuzz-seed: {}\n{}", o.seed, o.seed,
                                                           fuzz::inputsHeader(spec))));
    return 0;
  }
  try {
    return runFuzzer(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "llmc-fuzz: {}\n", e.what());
    return 2;
  }
}

namespace {

std::vector<std::regex> readKnown(const std::string& path) {
  std::vector<std::regex> known;
  if (path.empty()) return known;
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read --known " + path);
  for (std::string line; std::getline(in, line);)
    if (!line.empty() && line[0] != '#') known.emplace_back(line);
  return known;
}

// Shrinks and saves a failure; returns the file.
std::string save(const Options& o, fuzz::Runner& runner, const fuzz::DiagramSpec& spec, const fuzz::Failure& f,
                 bool shrink) {
  std::filesystem::create_directories(o.out);
  const fuzz::CheckOptions narrow = narrowed(o.checks, f);
  const std::string base = fmt::format("{}/seed{}-{}", o.out, spec.seed, f.check);
  std::ofstream(base + ".original.dg") << fuzz::printDiagram(
      spec, fmt::format("# llmc-fuzz seed {} as generated; fails: {}\n# fuzz-seed: {}\n{}", spec.seed, f.signature,
                        spec.seed, fuzz::inputsHeader(spec)));
  fuzz::DiagramSpec small = spec;
  fuzz::Failure last = f;
  if (shrink && spec.fileText.empty()) {
    fuzz::ShrinkStats stats;
    small = fuzz::shrink(spec, [&](const fuzz::DiagramSpec& candidate) {
      const fuzz::Outcome out = runner.run(candidate, narrow);
      if (!out.failure || out.failure->signature != f.signature) return false;
      last = *out.failure;
      return true;
    }, o.shrinkSeconds, &stats);
    fmt::print("  shrunk: {} of {} candidates kept, {} statements left\n", stats.kept, stats.tried, small.statements.size());
  }
  const std::string path = base + ".dg";
  std::string header = fmt::format("# llmc-fuzz seed {} (shrunk); fails: {}\n{}", spec.seed, f.signature, comment(last.detail));
  header += reproduce(small, f, narrow, path);
  header += fmt::format("# fuzz-seed: {}\n{}", spec.seed, fuzz::inputsHeader(small));
  std::ofstream(path) << fuzz::printDiagram(small, header);
  return path;
}

}  // namespace

// Whether GPU 0 can run the gpu check, asked in a child process where the
// checks run in children: a parent that made a CUDA context could not fork
// children that use CUDA.
bool gpuUsable(bool fork) {
  std::string why;
  if (!fork) return fuzz::gpuAvailable(&why);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(fuzz::gpuAvailable(&why) ? 0 : 77);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int runFuzzer(const Options& o) {
  if (std::find(o.checks.checks.begin(), o.checks.checks.end(), "gpu") != o.checks.checks.end() && !gpuUsable(o.fork)) {
    fmt::print("llmc-fuzz: skipped: --checks gpu, but no GPU can be used\n");
    return 77;
  }
  const std::vector<std::regex> known = readKnown(o.known);
  fuzz::Runner runner(o.checks, o.fork, o.timeout);
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::vector<fuzz::DiagramSpec> specs;  // by tag
  int64_t next = 0, passed = 0, failed = 0, knownFailures = 0;
  std::map<std::string, int> signatures;
  const int64_t total = o.file.empty() ? o.count : 1;
  if (o.file.empty())
    fmt::print("llmc-fuzz: seeds {}..{}, checks {}, {} jobs\n", o.seed, o.seed + uint64_t(total) - 1,
               fmt::join(o.checks.checks, ","), o.jobs);
  else
    fmt::print("llmc-fuzz: {}, checks {}\n", o.file, fmt::join(o.checks.checks, ","));
  if (o.fork) fuzz::stopOnSignals();
  std::vector<uint64_t> unfinished;
  while (next < total || runner.running() > 0) {
    while (next < total && runner.running() < size_t(o.jobs) && (o.seconds <= 0 || elapsed() < o.seconds)) {
      specs.push_back(o.file.empty() ? fuzz::generateDiagram(o.seed + uint64_t(next), o.generator) : fuzz::readDiagram(o.file));
      runner.start(specs.back(), int(next++));
    }
    if (runner.running() == 0) break;
    std::pair<int, fuzz::Outcome> done;
    try {
      done = runner.wait();
    } catch (const fuzz::Interrupted&) {
      for (int tag : runner.stopAll()) unfinished.push_back(specs[size_t(tag)].seed);
      break;
    }
    const auto& [tag, outcome] = done;
    const fuzz::DiagramSpec& spec = specs[size_t(tag)];
    if (!outcome.failure) {
      ++passed;
      // A --file diagram is read as text: its statements are not counted.
      if (o.file.empty())
        fmt::print("[{}/{}] seed {}: ok ({} statements, {:.1f} s)\n", passed + failed + knownFailures, total, spec.seed,
                   spec.statements.size(), outcome.seconds);
      else
        fmt::print("[{}/{}] {}: ok ({:.1f} s)\n", passed + failed + knownFailures, total, o.file, outcome.seconds);
      continue;
    }
    const fuzz::Failure& f = *outcome.failure;
    const bool isKnown = std::any_of(known.begin(), known.end(), [&](const std::regex& r) { return std::regex_search(f.signature, r); });
    ++(isKnown ? knownFailures : failed);
    ++signatures[f.signature];
    fmt::print("[{}/{}] {}: {}FAIL {} ({:.1f} s)\n  {}\n", passed + failed + knownFailures, total,
               o.file.empty() ? fmt::format("seed {}", spec.seed) : o.file,
               isKnown ? "known " : "", f.signature, outcome.seconds, f.detail.substr(0, 600));
    // Known failures are saved as generated: their shrunk diagram is in known/ already.
    fmt::print("  saved: {}\n", save(o, runner, spec, f, o.shrink && !isKnown));
  }
  for (const auto& [signature, n] : signatures) fmt::print("  {} x {}\n", n, signature);
  if (!unfinished.empty())
    fmt::print("interrupted: {} diagrams unfinished (seeds {})\n", unfinished.size(), fmt::join(unfinished, " "));
  fmt::print("{} passed, {} failed{}{}\n", passed, failed + knownFailures,
             knownFailures ? fmt::format(" ({} known)", knownFailures) : "",
             unfinished.empty() ? "" : fmt::format(", {} unfinished", unfinished.size()));
  return failed || !unfinished.empty() ? 1 : 0;
}
