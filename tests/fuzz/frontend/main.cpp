// llmc-fuzz-frontend: a mutation fuzzer of the compiler's front end (issue
// 20). It mutates the repository's diagrams and the error tests, runs each
// input through parse, resolve, elaborate and canonicalize (and, for small
// sizes with --plan, autodiff and the kernel plan) in a child process, and
// flags what must never happen: a crash or sanitizer report, an internal error
// (what llmc-compile exits 3 for), an input past the time budget or the memory
// bound. A diagnostic (CompileError) is a fine answer to a bad input. Each
// failing input is saved with its seed; the last line is a summary.
#include <fmt/format.h>

#include <stdlib.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "mutator.h"
#include "fixtures.h"
#include "runner.h"

namespace {

namespace fs = std::filesystem;
using namespace llmc::fuzz;

const char* kUsage = R"(usage: llmc-fuzz-frontend [options]

Mutates diagram files (byte flips, token splices, line duplication and
deletion, size values, deep nesting, long names, import lines) and runs each
through the front end in a child process. Flags crashes, sanitizer reports,
internal errors, inputs over the time budget and inputs over the memory bound;
a diagnostic is a pass. Build with -DLLMC_SANITIZE=ON (build-asan) to run it
under AddressSanitizer and UBSan.

options:
  --seed N          random seed (default: from the clock; printed)
  --iterations N    stop after N inputs (default: no limit with --seconds, else 1000)
  --seconds S       stop after S seconds
  --corpus DIR      a folder of .dg files to mutate; repeatable (default: the
                    repository's diagrams/ and tests/lit/)
  --failures DIR    where failing inputs are saved (default: fuzz-failures)
  --budget S        time budget per input in seconds (default 2)
  --memory MIB      resident memory bound per input (default 2048)
  --plan            also differentiate and plan kernels for inputs with small arrays
  --scratch DIR     working folder (default: a new folder in the temporary directory)
  -h, --help        this text

exit status: 0 when no input failed, 1 when some did, 2 for a bad command line.
)";

struct Options {
  uint64_t seed = 0;
  bool seeded = false;
  long iterations = -1;
  double seconds = -1;
  std::vector<std::string> corpus;
  std::string failures = "fuzz-failures";
  std::string scratch;
  RunOptions run;
};

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "llmc-fuzz-frontend: %s\n(see llmc-fuzz-frontend --help)\n", message.c_str());
  std::exit(2);
}

double number(const std::string& flag, const std::string& text) {
  size_t used = 0;
  double v = -1;
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || v < 0) usageError(fmt::format("{} expects a number >= 0, got '{}'", flag, text));
  return v;
}

Options parseOptions(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (arg == "--seed") {
      o.seed = static_cast<uint64_t>(number(arg, value())), o.seeded = true;
    } else if (arg == "--iterations") {
      o.iterations = static_cast<long>(number(arg, value()));
    } else if (arg == "--seconds") {
      o.seconds = number(arg, value());
    } else if (arg == "--corpus") {
      o.corpus.push_back(value());
    } else if (arg == "--failures") {
      o.failures = value();
    } else if (arg == "--budget") {
      o.run.seconds = number(arg, value());
    } else if (arg == "--memory") {
      o.run.memoryMiB = static_cast<long>(number(arg, value()));
    } else if (arg == "--plan") {
      o.run.plan = true;
    } else if (arg == "--scratch") {
      o.scratch = value();
    } else {
      usageError(fmt::format("unknown option '{}'", arg));
    }
  }
  if (o.iterations < 0 && o.seconds < 0) o.iterations = 1000;
  if (o.corpus.empty()) o.corpus = {LLMC_SOURCE_DIR "/diagrams", LLMC_SOURCE_DIR "/tests/lit"};
  if (!o.seeded) o.seed = static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count());
  return o;
}

// The failing input as <failures>/<outcome>-seed<S>-<i>.dg, with a .txt beside
// it: the outcome, the mutations, the sizes and the child's report.
void save(const Options& o, long i, const Input& input, const Result& r) {
  fs::create_directories(o.failures);
  const std::string stem = fmt::format("{}/{}-seed{}-{}", o.failures, outcomeName(r.outcome), o.seed, i);
  std::ofstream(stem + ".dg", std::ios::binary) << input.text;
  std::ofstream report(stem + ".txt");
  report << fmt::format("outcome: {} after {:.3f} s\nseed: {} input: {}\nsizes: --set {}\ngrad: {}\nreproduce: "
                        "llmc-fuzz-frontend --seed {} --iterations {} (the last input){}\nmutations:\n",
                        outcomeName(r.outcome), r.seconds, o.seed, i, input.sizes, input.grad, o.seed, i + 1,
                        o.run.plan ? " --plan" : "");
  for (const auto& m : input.mutations) report << "  " << m << "\n";
  report << "report:\n" << r.detail;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parseOptions(argc, argv);
  const std::vector<Seed> corpus = loadCorpus(o.corpus);
  if (corpus.empty()) usageError("no .dg files in the corpus");
  const bool ownScratch = o.scratch.empty();
  if (ownScratch) {
    std::string tmpl = (fs::temp_directory_path() / "llmc-fuzz-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) usageError("cannot make a scratch folder");
    o.scratch = tmpl;
  }
  o.run.scratch = o.scratch;
  makeFixtures(o.scratch);
  std::printf("llmc-fuzz-frontend: seed %llu, %zu corpus files, scratch %s\n",
              static_cast<unsigned long long>(o.seed), corpus.size(), o.scratch.c_str());
  std::fflush(stdout);

  std::mt19937_64 rng(o.seed);
  std::map<Outcome, long> counts;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  long i = 0;
  double reported = 0;  // a progress line a minute, for long runs
  for (; (o.iterations < 0 || i < o.iterations) && (o.seconds < 0 || elapsed() < o.seconds); ++i) {
    if (elapsed() - reported >= 60) {
      reported = elapsed();
      std::printf("llmc-fuzz-frontend: %ld inputs after %.0f s\n", i, reported);
      std::fflush(stdout);
    }
    const Input input = mutate(corpus, rng);
    const Result r = runInput(input, o.run);
    ++counts[r.outcome];
    if (!isFailure(r.outcome)) continue;
    save(o, i, input, r);
    std::printf("input %ld: %s (%s)\n", i, outcomeName(r.outcome), r.detail.substr(0, r.detail.find('\n')).c_str());
    std::fflush(stdout);
  }
  if (ownScratch) {
    std::error_code ec;
    fs::remove_all(o.scratch, ec);
  }
  long failures = 0;
  for (const auto& [outcome, n] : counts)
    if (isFailure(outcome)) failures += n;
  const double seconds = elapsed();
  std::printf("llmc-fuzz-frontend: %ld inputs in %.1f s (%.0f/s), seed %llu: %ld accepted, %ld diagnostics, "
              "%ld failures (%ld crashes, %ld internal errors, %ld timeouts, %ld over memory)%s\n",
              i, seconds, seconds > 0 ? static_cast<double>(i) / seconds : 0.0, static_cast<unsigned long long>(o.seed),
              counts[Outcome::Accepted], counts[Outcome::Diagnostic], failures, counts[Outcome::Crash],
              counts[Outcome::Internal], counts[Outcome::Timeout], counts[Outcome::Memory],
              failures ? fmt::format(", saved in {}", o.failures).c_str() : "");
  return failures ? 1 : 0;
}
