// Every launch of a compiled diagram timed on the GPU beside the cost
// model's prediction for it: the performance model inspected, kernel by
// kernel. For GPT-2's training step (the default) that is each of its
// hundreds of launches; any other diagram works the same (--diagram, --entry).
//
// The module is planned and emitted for the GPU's arch as llmc-train does
// (the recompute pass included with --grad), its kernels compiled through the
// kernel cache, its arrays placed by the memory plan in one arena; float
// inputs random normal (std 0.02), integer inputs uniform over the extent
// they index (token ids over the vocabulary; 0 where they index nothing). The
// whole module runs twice launch by launch (warm-up; kernels opt in to their
// shared memory then, as in llmc-train's first step). Then it is timed with an
// event before each launch and one after the last; a launch's time is the
// median over --reps repetitions of the gap from its event to the next.
// Activations of the training step are far larger than L2 (50 MB on the
// H200), so consecutive launches do not find their inputs cached any more than
// in training.
//
// The timing is runtime/cuda/launch_timing.h's (llmc-run --bench times the
// same way). By default the launches are timed as llmc-train runs them: captured in order
// into one CUDA graph, each event an event-record node between two kernel
// nodes (recorded with CU_EVENT_RECORD_EXTERNAL; a plain record under capture
// makes no node). The graph is replayed twice, then --reps times. A kernel in
// a graph costs about 1 us of launch overhead, the cost model's price, where
// launched alone it costs about 4 (--launch-by-launch times it so: an event
// recorded on the stream before each launch). The event nodes themselves add
// a little, so the same launches captured without them are timed too (median
// of --reps replays): the step's time as training sees it, printed beside the
// sum of the per-launch gaps. An event node costs about as much as a small
// kernel, so a launch under 10 us there is timed again alone, as a graph of
// 100 copies of it (marked r).
//
// Prints the timing mode, the launches sorted by measured time (--top N of
// them), then totals: the sum predicted against the sum measured and the count
// of launches whose prediction is off by more than 2x either way. --json FILE
// writes every row.
//
// --energy SECONDS then measures what the launches cost in energy
// (launch_energy.h): the whole module, each kind of launch alone, the
// tensor-core launches together and the rest together, each replayed as one
// graph for SECONDS after a warm-up. At the H200's power limit a step's time
// is its energy over 700 W: the tensor-core launches' joules bound from
// below what any change to the other kernels can bring the step to.
//
// usage: step_kernels_bench [--diagram FILE] [--entry NAME] [--set SIZES] [--forward]
//                           [--storage bf16|f32] [--row-products|--no-row-products] [--launch-by-launch] [--reps N]
//                           [--top N] [--json FILE] [--energy SECONDS]
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "ir/autodiff.h"
#include "codegen/emit_cuda.h"
#include "cuda_context.h"
#include "cuda_driver.h"
#include "cuda_stream.h"
#include "device_buffer.h"
#include "driver/pipeline.h"
#include "graph_inputs.h"
#include "kernel_cache.h"
#include "launch_time_report.h"
#include "launch_energy.h"
#include "launch_timing.h"
#include "lowering/lowering.h"
#include "module_executor.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace {

using llmc::cuda::DeviceBuffer;

// Random values in a buffer's storage type: floats normal, integers uniform
// over the extent they index (`bound`; 0 where they index nothing). All zeros
// would send every token's gradient to one embedding row: the scatter-add's
// atomics then meet on 768 addresses, 6x the model's time on the H200.
void fillInput(const llmc::BufferDesc& b, CUdeviceptr address, int64_t bound, std::mt19937& rng) {
  std::vector<unsigned char> bytes(static_cast<size_t>(b.bytes), 0);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::uniform_int_distribution<int32_t> index(0, static_cast<int32_t>(std::max<int64_t>(bound, 1) - 1));
  for (int64_t i = 0; i < b.elements; ++i) {
    if (b.dtype == "i32") {
      const int32_t v = index(rng);
      std::memcpy(&bytes[static_cast<size_t>(4 * i)], &v, 4);
    } else if (b.dtype == "f32") {
      float f = normal(rng);
      std::memcpy(&bytes[static_cast<size_t>(4 * i)], &f, 4);
    } else if (b.dtype == "bf16") {
      float f = normal(rng);
      uint32_t u;
      std::memcpy(&u, &f, 4);
      uint16_t h = static_cast<uint16_t>(u >> 16);
      std::memcpy(&bytes[static_cast<size_t>(2 * i)], &h, 2);
    }
  }
  llmc::cuda::check(llmc::cuda::driver().memcpyHtoD(address, bytes.data(), bytes.size()), "cuMemcpyHtoD(input)");
}

// The module's launches in groups: all of them, each kind alone, the
// tensor-core launches together and the rest together; each group's energy
// measured and printed.
void measureEnergy(llmc::cuda::ModuleExecutor& executor, const llmc::cuda::Stream& stream, CUdevice device,
                   const std::vector<llmc::cuda::LaunchTimeRow>& rows, double seconds) {
  const llmc::cuda::PowerMeter meter(device);
  std::vector<llmc::cuda::LaunchGroup> groups = {{"the whole module", {}}};
  llmc::cuda::LaunchGroup tensorCores{"tensor-core launches", {}}, rest{"all but tensor-core launches", {}};
  std::map<std::string, std::vector<size_t>> byKind;
  for (size_t i = 0; i < rows.size(); ++i) {
    groups.front().launches.push_back(i);
    byKind[rows[i].kind].push_back(i);
    (rows[i].tensorCores ? tensorCores : rest).launches.push_back(i);
  }
  groups.push_back(tensorCores);
  groups.push_back(rest);
  for (auto& [kind, launches] : byKind) groups.push_back({kind, launches});
  const llmc::cuda::EnergyOptions options{std::min(2.0, seconds), seconds};
  const double idle = llmc::cuda::idleWatts(meter, 1.0);
  const std::vector<llmc::cuda::GroupEnergy> energy =
      llmc::cuda::measureGroupEnergy(executor, stream, meter, groups, options);
  fmt::print("\n{}", llmc::cuda::describeGroupEnergy(energy, options, idle, meter.powerLimitWatts()));
}

constexpr const char* kUsage =
    "usage: step_kernels_bench [--diagram FILE] [--entry NAME] [--set SIZES] [--forward]\n"
    "                          [--storage bf16|f32] [--row-products|--no-row-products] [--launch-by-launch] [--reps N] [--top N]\n"
    "                          [--json FILE] [--energy SECONDS]\n"
    "\n"
    "Times every launch of a compiled diagram on GPU 0 beside the cost model's prediction (default: GPT-2's\n"
    "d12 training step, B=32, T=1024), replayed as one CUDA graph as llmc-train runs it; prints the slowest\n"
    "--top launches, totals by kind and the launches within 2x of their prediction. --energy SECONDS: then the\n"
    "joules of the whole module, of each kind of launch and of the tensor-core launches against the rest, each\n"
    "replayed alone for SECONDS (NVML's energy counter). Exits 77 without a GPU.\n";

int run(int argc, char** argv) {
  const char* sourceDir = std::getenv("LLMC_SOURCE_DIR");
  std::string diagram = std::string(sourceDir ? sourceDir : LLMC_SOURCE_DIR) + "/diagrams/gpt2/model.dg";
  std::string entry = "gpt2", sizes = "B=32,T=1024,maxT=1024,L=12,C=768,H=12,V=50257,Vp=50304", json;
  bool grad = true, bf16 = true, launchByLaunch = false, rowProducts = false, noRowProducts = false;
  int reps = 10, top = 40;
  double energySeconds = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (arg == "--diagram") diagram = value();
    else if (arg == "--entry") entry = value();
    else if (arg == "--set") llmc::parseSizeBindings(sizes = value());  // checked here, before any GPU work
    else if (arg == "--forward") grad = false;
    else if (arg == "--storage") {
      const std::string s = value();
      if (s != "bf16" && s != "f32") throw std::invalid_argument("--storage expects bf16 or f32");
      bf16 = s == "bf16";
    } else if (arg == "--row-products") rowProducts = true;  // as llmc-compile --row-products
    else if (arg == "--no-row-products") noRowProducts = true;  // as llmc-compile --no-row-products
    else if (arg == "--launch-by-launch") launchByLaunch = true;
    else if (arg == "--reps") reps = std::max(1, std::stoi(value()));
    else if (arg == "--top") top = std::stoi(value());
    else if (arg == "--json") json = value();
    else if (arg == "--energy") {
      const std::string text = value();
      char* end = nullptr;
      energySeconds = std::strtod(text.c_str(), &end);
      if (end == text.c_str() || *end || !(energySeconds > 0 && energySeconds <= 600))
        throw std::invalid_argument("--energy expects seconds in (0, 600], got '" + text + "'");
    }
    else throw std::invalid_argument("unknown argument " + arg + " (--help lists them)");
  }

  const std::optional<llmc::cuda::Context> context = llmc::cuda::contextOrSkip();
  if (!context) return 77;
  const llmc::Target target = llmc::loadTargetFor(context->arch(), context->name());
  llmc::CostOptions cost;
  cost.storageBytes = bf16 ? 2 : 4;
  cost.rowProducts = rowProducts;
  cost.rowProductsWhereCheaper = !noRowProducts;
  llmc::PipelineOptions options;
  options.path = diagram;
  options.entry = entry;
  options.sizes = llmc::parseSizeBindings(sizes);
  options.grad = grad;
  options.target = &target;
  options.cost = cost;
  const llmc::Graph graph = llmc::compileToIR(options);
  llmc::EmitOptions emit;
  emit.storage = bf16 ? llmc::StorageType::BF16 : llmc::StorageType::F32;
  // The gradients kept in f32, as llmc-train keeps them for its f32 master weights.
  emit.f32Values = llmc::gradientOutputs(graph);
  const std::vector<llmc::PlannedKernel> planned = llmc::lowerKernels(graph, target, cost, emit);
  llmc::cuda::ModuleExecutor executor(llmc::emitCuda(graph, planned, target, emit), {});
  const llmc::CudaModule& module = executor.module();

  const llmc::cuda::KernelCache cache(llmc::cuda::KernelCache::defaultDirectory());
  const llmc::cuda::JitResult jit = llmc::cuda::compileKernels(llmc::cuda::kernelSources(module, context->arch()), &cache);
  executor.load(jit.kernels);
  DeviceBuffer arena(static_cast<size_t>(executor.memoryPlan().arenaBytes));
  executor.setArena(arena.address(), arena.bytes());
  std::mt19937 rng(1234);
  for (const llmc::BufferDesc& b : module.buffers)
    if (b.graphInput) fillInput(b, executor.address(b.name), llmc::indexBound(graph, b.node), rng);

  llmc::cuda::Stream stream;
  const llmc::cuda::LaunchTimes times = llmc::cuda::timeLaunches(executor, stream, {launchByLaunch, reps});
  const std::vector<llmc::cuda::LaunchTimeRow> rows = llmc::cuda::launchTimeRows(module, planned, times);
  fmt::print("{} ({}{}, {}) on {}, planned and priced for the {} ({}): {} launches, {}\n", graph.name, sizes,
             grad ? ", training step" : "", bf16 ? "bf16" : "f32", context->name(), target.device, target.arch,
             module.launches.size(), jit.summary.describe());
  fmt::print("{}", llmc::cuda::describeLaunchTimes(rows, planned, times, std::max(top, 0)));

  if (!json.empty()) std::ofstream(json) << llmc::cuda::launchTimesJson(rows, times).dump(1) << "\n";
  if (energySeconds > 0) measureEnergy(executor, stream, context->device(), rows, energySeconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::invalid_argument& e) {
    fmt::print(stderr, "step_kernels_bench: {}\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    fmt::print(stderr, "step_kernels_bench: {}\n", e.what());
    return 1;
  }
}
