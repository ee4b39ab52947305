// llmc-run: any diagram planned, emitted, JIT-compiled and run on GPU 0, on
// random inputs or arrays from .npy files; --check judges every output
// against the reference interpreter as llmc-fuzz's gpu check does
// (runtime/cuda/module_check.h), --bench times every launch as
// step_kernels_bench does (runtime/cuda/launch_timing.h) and writes the file
// `llmc-compile --emit perf --measured` reads.
//
// GPU 0 is looked for first (--arch auto plans for its arch), but where there
// is none that is said only after what needs no GPU is checked: the command
// line, the diagram (errors at file:line:col), the input files. Then llmc-run
// exits with 77, the status test drivers read as "skipped"; an llmc built
// without the CUDA toolkit does the same, saying so (tools/llmc_run.h).
#include <pthread.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "command_line.h"
#include "driver/pipeline.h"
#include "graph_inputs.h"
#include "llmc_run.h"
#include "npy_file.h"
#include "planning/target.h"

namespace llmc_run {

[[noreturn]] void usageError(const std::string& message) {
  std::fprintf(stderr, "llmc-run: %s\n(see llmc-run --help)\n", message.c_str());
  std::exit(kUsageError);
}

}  // namespace llmc_run

namespace {

using namespace llmc_run;

const char* kUsage = R"(usage: llmc-run FILE.dg [options]

Plans the last diagram of FILE.dg (or the one named with --entry) for a GPU,
emits its kernels, compiles them with NVRTC (through the kernel cache) and runs
them on GPU 0, on random inputs or on arrays from .npy files. Prints each
output's size and range; --check compares them with the reference
interpreter, --bench times every launch.

options:
  --set NAME=N        bind the size NAME to N; repeat it, or give several at
                      once: --set B=4,T=64
  --entry NAME        the diagram to run (default: the last one in FILE)
  --grad              add the backward pass: the outputs become the loss and
                      the gradient of every param input (grad_NAME)
  --arch ARCH         what to plan for: auto (the GPU present: sm_90a from
                      Hopper on, sm_80 before; the default), sm_80 or sm_90a.
                      The kernels are compiled for the GPU present: sm_80's
                      run on Hopper too, sm_90a's need Hopper
  --storage bf16|f32  how floats are stored between kernels (default bf16)
  --input NAME=FILE   input NAME's values from FILE, a .npy file (numpy.save)
                      of float32 or float64 elements for a float input, int32
                      or int64 for an integer one, little-endian, C order, its
                      shape the input's axes' sizes in declared order;
                      repeat it for several inputs
  --seed N            seed of the random inputs (default 1): floats normal
                      N(0, 1), integers uniform over the axis they index (0
                      where they index none), bools 0 or 1. Inputs are rounded
                      as the GPU stores them (bf16 under --storage bf16) before
                      both the GPU and the interpreter see them
  --check             compare every output (with --grad: the loss and every
                      gradient) with the reference interpreter in f64 on the
                      same inputs; print each one's largest absolute error,
                      its relative error (Frobenius norms) and the tolerance
                      used: 1e-4 of the output's norm with f32 storage, 3e-2
                      with bf16 storage or bf16 arrays, plus twice what
                      rounding alone moves it (the tolerance llmc-fuzz's gpu
                      check uses, tools/fuzz/README.md)
  --bench             time every launch in one CUDA graph, as llmc-train
                      replays the step, and print them beside the cost
                      model's prediction, slowest first, with totals
  --reps N            with --bench: repetitions, the median taken (default 10)
  --out FILE          with --bench: write every launch's time to FILE, the
                      file `llmc-compile --emit perf --measured FILE` reads
                      (with the same FILE.dg, --entry, --set, --grad,
                      --storage and the arch planned for)
  --quiet             no informational lines (the module's launches, where
                      --out wrote): the outputs, the check and the times only
  --version           print llmc-run's version
  -h, --help          show this help

An option's value may follow it (--set B=4) or be joined by '=' (--set=B=4).

exit status: 0 on success; 1 when --check finds an output beyond its
tolerance; 2 for a bad command line; 3 for an error in the diagrams or an
input file (FILE:LINE:COL for diagrams, the file and what is wrong for .npy
files); 4 when NVRTC, the GPU or llmc fails (a bug in llmc); 77 when no GPU
can be used (no CUDA driver, the driver sees no GPU, or this llmc was built
without the CUDA toolkit): the diagram and the input files are still checked
first, nothing is run.
)";


// A whole number of at most 18 digits, or a usage error naming `flag`.
uint64_t wholeNumber(const std::string& flag, const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    usageError(fmt::format("{} expects a whole number, got '{}'", flag, text));
  return std::stoull(text);
}

// Checks what the options say together. Exits with status 2 for a bad combination.
void checkInvocation(const Invocation& in) {
  if (in.options.path.empty()) usageError("no input file");
  if (!in.bench && in.repsGiven) usageError("--reps goes with --bench");
  if (!in.bench && !in.outPath.empty()) usageError("--out goes with --bench (the launches' times)");
}

// One option and its value, for parseCommandLine. Returns false for an
// option it does not know.
bool parseOption(Invocation& in, const std::string& arg, const std::function<std::string()>& value) {
  if (arg == "--set") {
    try {
      for (const auto& [name, size] : llmc::parseSizeBindings(value())) in.options.sizes[name] = size;
    } catch (const std::invalid_argument& e) {
      usageError(e.what());
    }
  } else if (arg == "--entry") {
    in.options.entry = value();
  } else if (arg == "--grad") {
    in.options.grad = true;
  } else if (arg == "--arch") {
    in.arch = value();
    if (in.arch != "auto" && in.arch != "sm_80" && in.arch != "sm_90a")
      usageError(fmt::format("--arch expects auto, sm_80 or sm_90a, got '{}'", in.arch));
  } else if (arg == "--storage") {
    const std::string storage = value();
    if (storage != "f32" && storage != "bf16") usageError(fmt::format("--storage expects bf16 or f32, got '{}'", storage));
    in.bf16 = storage == "bf16";
  } else if (arg == "--input") {
    const std::string binding = value();
    const size_t eq = binding.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == binding.size())
      usageError(fmt::format("--input expects NAME=FILE.npy, got '{}'", binding));
    if (!in.inputFiles.emplace(binding.substr(0, eq), binding.substr(eq + 1)).second)
      usageError(fmt::format("--input {} is given twice", binding.substr(0, eq)));
  } else if (arg == "--seed") {
    in.seed = wholeNumber("--seed", value());
  } else if (arg == "--check") {
    in.check = true;
  } else if (arg == "--bench") {
    in.bench = true;
  } else if (arg == "--reps") {
    const uint64_t reps = wholeNumber("--reps", value());
    if (reps < 1 || reps > 100000) usageError(fmt::format("--reps expects 1 to 100000 repetitions, got {}", reps));
    in.reps = static_cast<int>(reps);
    in.repsGiven = true;
  } else if (arg == "--out") {
    in.outPath = value();
  } else {
    return false;
  }
  return true;
}

// Parses the command line; nullopt where it asked for --help or --version (printed).
std::optional<Invocation> parseCommandLine(int argc, char** argv) {
  Invocation in;
  llmc::Arguments args(argc, argv);
  while (args.next()) {
    const std::string& arg = args.arg();
    auto value = [&] { return args.value(); };
    if (arg == "-h" || arg == "--help" || arg == "--version") args.takesNoValue();
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return std::nullopt;
    } else if (arg == "--version") {
      std::printf("llmc-run %s\n", LLMC_VERSION);
      return std::nullopt;
    } else if (arg == "--quiet") {
      in.quiet = true;
    } else if (parseOption(in, arg, value)) {
    } else if (!arg.empty() && arg[0] == '-') {
      usageError(fmt::format("unknown option '{}'", arg));
    } else if (in.options.path.empty()) {
      in.options.path = arg;
    } else {
      usageError(fmt::format("more than one input file ('{}' and '{}')", in.options.path, arg));
    }
  }
  checkInvocation(in);
  for (const auto& [name, size] : in.options.sizes)
    in.sizesText += fmt::format("{}{}={}", in.sizesText.empty() ? "" : ",", name, size);
  return in;
}

// The arch planned for: --arch, or for auto the GPU's (sm_90a where there is
// no GPU: the diagram is still checked before llmc-run exits with 77).
std::string plannedArch(const Invocation& in, const Gpu* gpu) {
  if (in.arch != "auto") return in.arch;
  return !gpu || gpuComputeCapability(*gpu) >= 90 ? "sm_90a" : "sm_80";
}

// Every input's values: from its --input file, else random; rounded as stored.
std::map<std::string, llmc::HostTensor> makeInputs(const Invocation& in, const llmc::Graph& graph) {
  for (const auto& [name, path] : in.inputFiles)
    if (!graph.findInput(name)) {
      std::vector<std::string> names;
      for (llmc::NodeId id : graph.inputs) names.push_back(graph.node(id).name);
      usageError(fmt::format("--input {}={}: {} has no input named '{}' (its inputs: {})", name, path, graph.name, name,
                             fmt::join(names, ", ")));
    }
  std::map<std::string, llmc::HostTensor> inputs;
  for (llmc::NodeId id : graph.inputs) {
    const std::string& name = graph.node(id).name;
    const auto file = in.inputFiles.find(name);
    llmc::HostTensor values;
    if (file == in.inputFiles.end()) {
      values = llmc::randomInput(graph, id, in.seed);
    } else {
      try {
        values = llmc::inputFromNpy(graph, id, llmc::readNpy(file->second), file->second);
      } catch (const std::runtime_error& e) {  // NpyError, InputFileError: the file at fault
        throw llmc::InputFileError(fmt::format("--input {}: {}", name, e.what()));
      }
    }
    llmc::roundAsStored(values, in.bf16);
    inputs[name] = std::move(values);
  }
  return inputs;
}

// Plans, compiles and runs the diagram; the exit status.
int run(Invocation& in) {
  std::string missing;
  const std::shared_ptr<Gpu> gpu = openGpu(missing);
  const std::string arch = plannedArch(in, gpu.get());
  // Planned and priced for the GPU that runs it where it is of the arch (an H100 is not an H200).
  const bool native = gpu && arch == (gpuComputeCapability(*gpu) >= 90 ? "sm_90a" : "sm_80");
  const llmc::Target target = native ? llmc::loadTargetFor(arch, gpuName(*gpu)) : llmc::loadTarget(arch);
  llmc::CostOptions cost;
  cost.storageBytes = in.bf16 ? 2 : 4;
  in.options.target = &target;
  in.options.cost = cost;
  std::set<std::string> used;
  in.options.usedSizes = &used;
  const llmc::Graph graph = llmc::compileToIR(in.options);
  for (const auto& [name, size] : in.options.sizes)
    if (!used.count(name))
      usageError(fmt::format("--set {}={}: no size of {} is named '{}'{}", name, size, in.options.path, name,
                             used.empty() ? "" : fmt::format(" (it reads: {})", fmt::join(used, ", "))));
  const std::map<std::string, llmc::HostTensor> inputs = makeInputs(in, graph);

  if (!gpu) {
    std::fprintf(stderr, "llmc-run: no usable GPU (%s): the diagram and its inputs were checked, nothing was run (exit status 77)\n",
                 missing.c_str());
    return kNoGpu;
  }
  return runOnGpu(*gpu, in, arch, target, cost, graph, inputs);
}

int runMain(int argc, char** argv) {
  std::optional<Invocation> in;
  try {
    in = parseCommandLine(argc, argv);
  } catch (const llmc::UsageError& e) {
    usageError(e.what());
  }
  if (!in) return 0;
  try {
    return run(*in);
  } catch (const llmc::CompileError& e) {  // rendered with FILE:LINE:COL and the line
    std::fputs(e.what(), stderr);
    return kInputError;
  } catch (const llmc::TargetError& e) {
    std::fprintf(stderr, "llmc-run: %s\n", e.what());
    return kInputError;
  } catch (const llmc::InputFileError& e) {
    std::fprintf(stderr, "llmc-run: %s\n", e.what());
    return kInputError;
  } catch (const std::exception& e) {  // a bug in llmc, not in the diagrams: report it, don't abort
    std::fprintf(stderr, "llmc-run: internal error: %s\n", e.what());
    return kInternalError;
  }
}

}  // namespace

// The compiler's passes recurse along the graph, so a diagram of a long chain
// needs more stack than a process's main thread has: run on a thread with
// 1 GiB reserved, as llmc-compile does (pages are committed only as used).
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it comes, through a pipe too
  struct Call {
    int argc;
    char** argv;
    int status = kInternalError;
  } call{argc, argv};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t{1} << 30);
  pthread_t thread;
  auto body = [](void* p) -> void* {
    Call* c = static_cast<Call*>(p);
    c->status = runMain(c->argc, c->argv);
    return nullptr;
  };
  if (pthread_create(&thread, &attr, body, &call) != 0) return runMain(argc, argv);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return call.status;
}
