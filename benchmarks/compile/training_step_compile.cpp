// How long llmc takes from a diagram to loaded kernels, cold and warm: the
// compiler's passes (with the recompute pass), the partition search, CUDA
// emission, then NVRTC on every launch through the JIT — first with an empty
// kernel cache (cold), then again from that cache (warm) — and, where a GPU is
// present, loading the modules. NVRTC needs no GPU, so the compile figures
// come out on any machine with the CUDA toolkit.
//
// usage: training_step_compile [--set B=32,T=1024,...] [--arch sm_90a|sm_80] [--storage bf16|f32]
//                              [--threads N] [--in-threads] [--forward] [--nvrtc-option OPTION]... [--slowest N]
//                              [--classes]
// --classes: count the launches and the compiles the JIT makes of them (one a class of identical
// kernels, kernel_classes.h), then stop: no NVRTC.
// --in-threads: NVRTC in a pool of threads instead of forked worker processes (llmc-train: LLMC_JIT_WORKERS=threads).
// Defaults: GPT-2 d12's training step (diagrams/gpt2/model.dg --grad) at B=32, T=1024, for sm_90a,
// bf16, one compile worker per hardware thread. LLMC_SOURCE_DIR: the source tree.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ir/autodiff.h"
#include "codegen/emit_cuda.h"
#include "cuda_context.h"
#include "driver/pipeline.h"
#include "jit.h"
#include "kernel_cache.h"
#include "kernel_classes.h"
#include "loaded_kernels.h"
#include "module_cache.h"
#include "module_executor.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace {

double secondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}


// Loads the kernels on the GPU when there is one; the time it took, or none.
std::optional<double> loadOnGpu(const std::vector<llmc::cuda::JitKernel>& kernels) {
  try {
    llmc::cuda::Context context(0);
    auto start = std::chrono::steady_clock::now();
    llmc::cuda::LoadedKernels loaded(kernels);
    return secondsSince(start);
  } catch (const llmc::NoGpuError&) {
    return std::nullopt;
  }
}

}  // namespace

int run(int argc, char** argv) {
  std::string sizes = "B=32,T=1024,maxT=1024,L=12,C=768,H=12,V=50257,Vp=50304";
  std::string arch = "sm_90a";
  bool bf16 = true, grad = true;
  unsigned threads = 0;
  std::vector<std::string> nvrtcOptions;  // beside llmc's own, to try one (-pch, -G, ...)
  size_t slowest = 0;                     // list the N kernels NVRTC took longest over
  bool classesOnly = false;
  llmc::cuda::JitWorkers workers = llmc::cuda::JitWorkers::Processes;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        fmt::print(stderr, "{} needs a value\n", arg);
        std::exit(2);
      }
      return argv[++i];
    };
    if (arg == "--set") sizes = value();
    else if (arg == "--arch") arch = value();
    else if (arg == "--storage") bf16 = value() == "bf16";
    else if (arg == "--threads") {
      const std::string n = value();
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("--threads: '" + n + "' is not a whole number");
      threads = static_cast<unsigned>(std::stoul(n));
    }
    else if (arg == "--forward") grad = false;
    else if (arg == "--in-threads") workers = llmc::cuda::JitWorkers::Threads;
    else if (arg == "--nvrtc-option") nvrtcOptions.push_back(value());
    else if (arg == "--classes") classesOnly = true;
    else if (arg == "--slowest") {
      const std::string n = value();
      if (n.empty() || n.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("--slowest: '" + n + "' is not a whole number");
      slowest = std::stoul(n);
    }
    else {
      fmt::print(stderr,
                 "usage: {} [--set SIZES] [--arch sm_90a|sm_80] [--storage bf16|f32] [--threads N] [--forward] "
                 "[--in-threads] [--nvrtc-option OPTION]... [--slowest N] [--classes]\n",
                 argv[0]);
      return 2;
    }
  }
  const char* sourceDir = std::getenv("LLMC_SOURCE_DIR");
  const llmc::Target target = llmc::loadTarget(arch);
  llmc::CostOptions cost;
  cost.storageBytes = bf16 ? 2 : 4;

  auto start = std::chrono::steady_clock::now();
  llmc::PipelineOptions options;
  options.path = std::string(sourceDir ? sourceDir : LLMC_SOURCE_DIR) + "/diagrams/gpt2/model.dg";
  options.sizes = llmc::parseSizeBindings(sizes);
  options.grad = grad;
  options.target = &target;
  options.cost = cost;
  const llmc::Graph graph = llmc::compileToIR(options);
  const double passes = secondsSince(start);

  start = std::chrono::steady_clock::now();
  const auto planned = llmc::planKernels(graph, target, cost);
  const double planning = secondsSince(start);

  start = std::chrono::steady_clock::now();
  // The gradients kept in f32, as llmc-train keeps them for its f32 master weights.
  llmc::EmitOptions emit{.storage = bf16 ? llmc::StorageType::BF16 : llmc::StorageType::F32};
  emit.f32Values = llmc::gradientOutputs(graph);
  const llmc::CudaModule module = llmc::emitCuda(graph, planned, target, emit);
  const double emission = secondsSince(start);

  std::vector<llmc::cuda::KernelSource> sources = llmc::cuda::kernelSources(module, arch);
  for (llmc::cuda::KernelSource& s : sources) s.options = nvrtcOptions;
  if (classesOnly) {
    start = std::chrono::steady_clock::now();
    const llmc::cuda::KernelClasses classes = llmc::cuda::classifyKernels(sources);
    std::set<std::string> texts;
    for (const llmc::cuda::KernelSource& s : sources) texts.insert(s.source);
    fmt::print("{} launches, {} distinct sources, {} NVRTC compiles (classes of identical kernels; {:.3f} s to find)\n",
               sources.size(), texts.size(), classes.count, secondsSince(start));
    return 0;
  }
  const std::filesystem::path cacheDir =
      std::filesystem::temp_directory_path() / fmt::format("llmc-compile-bench-{}", std::random_device{}());
  const llmc::cuda::KernelCache cache(cacheDir);
  const llmc::cuda::JitResult cold = llmc::cuda::compileKernels(sources, &cache, threads, workers);
  const llmc::cuda::JitResult warm = llmc::cuda::compileKernels(sources, &cache, threads, workers);
  // A warm start plans nothing: the module comes back from the module cache.
  const llmc::cuda::ModuleCache plans(cacheDir / "plans");
  plans.store(1, module);
  start = std::chrono::steady_clock::now();
  const std::optional<llmc::CudaModule> cachedModule = plans.find(1);
  const double planRead = secondsSince(start);
  if (!cachedModule || cachedModule->launches.size() != module.launches.size())
    throw std::runtime_error("the module cache did not give the module back");
  const std::optional<double> loading = loadOnGpu(warm.kernels);
  std::filesystem::remove_all(cacheDir);

  int onTensorCores = 0;
  for (const llmc::KernelLaunch& l : module.launches) onTensorCores += !l.instructions.tensorCores.empty();
  fmt::print("{} ({}) for {}, {} storage, {} compile {}\n", grad ? "training step" : "forward", sizes, arch,
             bf16 ? "bf16" : "f32", threads ? threads : std::thread::hardware_concurrency(),
             workers == llmc::cuda::JitWorkers::Processes ? "processes" : "threads");
  fmt::print("  passes (parse .. recompute)   {:8.2f} s  ({} nodes)\n", passes, graph.nodes.size());
  fmt::print("  partition search              {:8.2f} s  ({} kernels)\n", planning, planned.size());
  fmt::print("  CUDA emission                 {:8.2f} s  ({} launches, {} on tensor cores)\n", emission,
             module.launches.size(), onTensorCores);
  fmt::print("  NVRTC, cold cache             {:8.2f} s  ({})\n", cold.summary.wallSeconds, cold.summary.describe());
  fmt::print("  NVRTC, warm cache             {:8.2f} s  ({})\n", warm.summary.wallSeconds, warm.summary.describe());
  fmt::print("  module cache read             {:8.2f} s  (instead of the passes, the search and emission)\n", planRead);
  if (loading) fmt::print("  loading on the GPU            {:8.2f} s\n", *loading);
  else fmt::print("  loading on the GPU            (no GPU here)\n");
  fmt::print("cold start {:.2f} s, warm start {:.2f} s (diagram to {}; warm: both caches)\n",
             passes + planning + emission + cold.summary.wallSeconds + loading.value_or(0),
             planRead + warm.summary.wallSeconds + loading.value_or(0), loading ? "loaded kernels" : "compiled kernels");
  if (slowest > 0) {
    // Where NVRTC's time goes: the kernels it took longest over, with what they are.
    std::vector<size_t> order(module.launches.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return cold.kernels[a].seconds > cold.kernels[b].seconds; });
    double total = 0;
    for (const llmc::cuda::JitKernel& k : cold.kernels) total += k.seconds;
    fmt::print("NVRTC's slowest kernels ({:.1f} s of compile time in all):\n", total);
    for (size_t i = 0; i < std::min(slowest, order.size()); ++i) {
      const llmc::KernelLaunch& l = module.launches[order[i]];
      fmt::print("  {:7.2f} s  {:<24} {}\n", cold.kernels[order[i]].seconds, l.name,
                 l.instructions.describe().substr(0, 100));
    }
  }
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::invalid_argument& e) {  // a bad command line
    fmt::print(stderr, "training_step_compile: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {  // a diagram, target, compile or cache error, with its own message
    fmt::print(stderr, "training_step_compile: {}\n", e.what());
    return 1;
  }
}
