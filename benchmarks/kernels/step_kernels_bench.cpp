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
// By default the launches are timed as llmc-train runs them: captured in order
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
// usage: step_kernels_bench [--diagram FILE] [--entry NAME] [--set SIZES] [--forward]
//                           [--storage bf16|f32] [--launch-by-launch] [--reps N] [--top N]
//                           [--json FILE]
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "codegen/emit_cuda.h"
#include "cuda_context.h"
#include "cuda_driver.h"
#include "cuda_event.h"
#include "cuda_stream.h"
#include "device_buffer.h"
#include "driver/pipeline.h"
#include "kernel_cache.h"
#include "lowering/lowering.h"
#include "module_executor.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace {

using llmc::cuda::DeviceBuffer;
using llmc::cuda::Event;

// The median of `samples` (the upper one of an even count).
double median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

// The extent an integer input indexes where a gather or a scatter-add takes
// it as its index (a token id into the vocabulary); 0 where none does.
int64_t indexBound(const llmc::Graph& graph, llmc::NodeId input) {
  int64_t bound = 0;
  for (const llmc::Node& n : graph.nodes) {
    if (n.operands.size() < 2 || n.operands[1] != input) continue;
    const llmc::Axis* axis = n.op == llmc::Op::Gather       ? graph.node(n.operands[0]).type.find(n.axes.at(0))
                             : n.op == llmc::Op::ScatterAdd ? n.type.find(n.newAxes.at(0))
                                                            : nullptr;
    if (axis) bound = bound == 0 ? axis->size : std::min(bound, axis->size);
  }
  return bound;
}

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

constexpr const char* kUsage =
    "usage: step_kernels_bench [--diagram FILE] [--entry NAME] [--set SIZES] [--forward]\n"
    "                          [--storage bf16|f32] [--launch-by-launch] [--reps N] [--top N] [--json FILE]\n"
    "\n"
    "Times every launch of a compiled diagram on GPU 0 beside the cost model's prediction (default: GPT-2's\n"
    "d12 training step, B=32, T=1024), replayed as one CUDA graph as llmc-train runs it; prints the slowest\n"
    "--top launches, totals by kind and the launches within 2x of their prediction. Exits 77 without a GPU.\n";

int run(int argc, char** argv) {
  const char* sourceDir = std::getenv("LLMC_SOURCE_DIR");
  std::string diagram = std::string(sourceDir ? sourceDir : LLMC_SOURCE_DIR) + "/diagrams/gpt2/model.dg";
  std::string entry = "gpt2", sizes = "B=32,T=1024,maxT=1024,L=12,C=768,H=12,V=50257,Vp=50304", json;
  bool grad = true, bf16 = true, launchByLaunch = false;
  int reps = 10, top = 40;
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
    } else if (arg == "--launch-by-launch") launchByLaunch = true;
    else if (arg == "--reps") reps = std::max(1, std::stoi(value()));
    else if (arg == "--top") top = std::stoi(value());
    else if (arg == "--json") json = value();
    else throw std::invalid_argument("unknown argument " + arg + " (--help lists them)");
  }

  const std::optional<llmc::cuda::Context> context = llmc::cuda::contextOrSkip();
  if (!context) return 77;
  const llmc::Target target = llmc::loadTarget(context->arch());
  llmc::CostOptions cost;
  cost.storageBytes = bf16 ? 2 : 4;
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
    if (b.graphInput) fillInput(b, executor.address(b.name), indexBound(graph, b.node), rng);

  llmc::cuda::Stream stream;
  for (int warm = 0; warm < 2; ++warm) executor.run(stream.get());
  stream.synchronize();
  const size_t n = module.launches.size();
  std::vector<Event> events(n + 1);  // before each launch, and after the last
  std::vector<std::vector<double>> samples(n);
  auto takeSamples = [&] {
    for (size_t i = 0; i < n; ++i) samples[i].push_back(1e3 * Event::elapsedMilliseconds(events[i], events[i + 1]));
  };
  double graphUs = 0;  // the graph without event nodes (graph mode)
  if (launchByLaunch) {
    for (int r = 0; r < reps; ++r) {
      for (size_t i = 0; i < n; ++i) {
        events[i].record(stream.get());
        executor.runLaunch(i, stream.get());
      }
      events[n].record(stream.get());
      takeSamples();
    }
  } else {
    const llmc::cuda::CapturedGraph timed(stream, [&](CUstream s) {
      for (size_t i = 0; i < n; ++i) {
        events[i].recordInGraph(s);
        executor.runLaunch(i, s);
      }
      events[n].recordInGraph(s);
    });
    const llmc::cuda::CapturedGraph plain(stream, [&](CUstream s) { executor.run(s); });
    Event start, end;
    std::vector<double> plainSamples;
    // The two graphs alternate, queued back to back: both see the GPU in the
    // same state (clocks, temperature), and `start` fires as the timed graph
    // ends, with the plain one already queued, so no host launch latency is
    // counted, as in training where the host runs ahead. The first two rounds
    // are warm-ups.
    for (int r = -2; r < reps; ++r) {
      timed.launch(stream);
      start.record(stream.get());
      plain.launch(stream);
      end.record(stream.get());
      if (r < 0) continue;
      plainSamples.push_back(1e3 * Event::elapsedMilliseconds(start, end));
      takeSamples();
    }
    graphUs = median(plainSamples);
  }
  // An event node costs a few microseconds (the replay's total grows by ~4 us
  // a launch with them: measured on the H200, 2026-11-30), as much as a small
  // kernel: a launch whose gap is under kShortUs is timed again as a graph of
  // kCopies copies of it alone, back to back as graph nodes; its inputs are
  // a few MB at most, in L2 in training too, just written by their producer.
  constexpr double kShortUs = 10;
  constexpr int kCopies = 100;
  std::vector<bool> repeated(n, false);
  if (!launchByLaunch)
    for (size_t i = 0; i < n; ++i) {
      if (median(samples[i]) >= kShortUs) continue;
      const llmc::cuda::CapturedGraph copies(stream, [&](CUstream s) {
        for (int c = 0; c < kCopies; ++c) executor.runLaunch(i, s);
      });
      Event start, end;
      std::vector<double> perCopy;
      // Queued behind a replay already running, so that `start` fires with the next one queued.
      copies.launch(stream);
      for (int r = 0; r < reps; ++r) {
        start.record(stream.get());
        copies.launch(stream);
        end.record(stream.get());
        copies.launch(stream);
        end.synchronize();
        perCopy.push_back(1e3 * Event::elapsedMilliseconds(start, end) / kCopies);
      }
      samples[i] = perCopy;
      repeated[i] = true;
    }
  stream.synchronize();

  // Predictions by planned kernel; a kernel's launches (its tile launch and
  // any scatter or clear launch made for it) are compared together.
  std::map<int, double> predictedUs;
  std::map<int, std::string> bound;
  for (const llmc::PlannedKernel& p : planned) {
    predictedUs[p.kernel.id] = p.cost.predicted * 1e6;
    bound[p.kernel.id] = p.cost.bottleneck;
  }
  struct Row {
    std::string name, role, bound, kind;
    int kernel;
    double measured, predicted;
    bool tensorCores, repeated;
  };
  // What a launch is, for the summary by kind: a GEMM on the tile library,
  // a stream on the tensor cores (attention), CUDA-core code with
  // reductions, elementwise, or a helper launch.
  auto kindOf = [](const llmc::KernelLaunch& l) -> std::string {
    if (l.gemm) return "tensor-core GEMM";
    if (!l.instructions.tensorCores.empty()) return "tensor-core stream";
    if (l.role != "tile") return l.role;
    if (l.instructions.describe().find("elementwise") != std::string::npos) return "elementwise";
    return "CUDA-core reduction";
  };
  // A kernel's prediction includes its helper launches' (staging copies,
  // output copies): each helper's row shows its own, the tile's the rest.
  std::map<int, double> helperUs;
  for (const llmc::KernelLaunch& l : module.launches)
    if (l.kernel >= 0 && l.role != "tile" && l.predictedSeconds > 0) helperUs[l.kernel] += l.predictedSeconds * 1e6;
  std::vector<Row> rows;
  std::map<int, double> measuredByKernel;
  double totalMeasured = 0;
  for (size_t i = 0; i < n; ++i) {
    const double measured = median(samples[i]);
    const llmc::KernelLaunch& l = module.launches[i];
    double predicted = -1;
    if (l.role == "tile" && predictedUs.count(l.kernel)) predicted = predictedUs[l.kernel] - helperUs[l.kernel];
    else if (l.predictedSeconds > 0) predicted = l.predictedSeconds * 1e6;
    rows.push_back({l.name, l.role, bound.count(l.kernel) ? bound[l.kernel] : "", kindOf(l), l.kernel, measured,
                    predicted, !l.instructions.tensorCores.empty(), repeated[i]});
    totalMeasured += measured;
    if (l.kernel >= 0) measuredByKernel[l.kernel] += measured;
  }
  double totalPredicted = 0;
  int within = 0, slower = 0, faster = 0;
  for (const auto& [kernel, measured] : measuredByKernel) {
    const double predicted = predictedUs.count(kernel) ? predictedUs[kernel] : 0;
    totalPredicted += predicted;
    const double ratio = measured / std::max(predicted, 1e-3);
    if (ratio > 2) ++slower;
    else if (ratio < 0.5) ++faster;
    else ++within;
  }

  std::vector<Row> sorted = rows;
  std::sort(sorted.begin(), sorted.end(), [](const Row& a, const Row& b) { return a.measured > b.measured; });
  fmt::print("{} ({}{}, {}) on {}: {} launches, {}\n", graph.name, sizes, grad ? ", training step" : "",
             bf16 ? "bf16" : "f32", context->name(), n, jit.summary.describe());
  fmt::print("timed {}: median of {} repetitions\n",
             launchByLaunch ? "launch by launch, an event recorded before each launch"
                            : fmt::format("in one CUDA graph as llmc-train replays it, an event node before each launch; "
                                          "the {} launches under {} us there timed again as a graph of {} copies (r)",
                                          std::count(repeated.begin(), repeated.end(), true), kShortUs, kCopies),
             reps);
  fmt::print("{:<34} {:>7} {:>3} {:>12} {:>12} {:>8}  {}\n", "launch", "role", "TC", "measured us", "predicted us",
             "meas/pred", "model's bound");
  for (int i = 0; i < std::min<int>(top, static_cast<int>(sorted.size())); ++i) {
    const Row& r = sorted[static_cast<size_t>(i)];
    fmt::print("{:<34} {:>7} {:>3} {:>11.1f}{} {:>12} {:>8}  {}\n", r.name.substr(0, 34), r.role, r.tensorCores ? "yes" : "",
               r.measured, r.repeated ? "r" : " ", r.predicted >= 0 ? fmt::format("{:.1f}", r.predicted) : "-",
               r.predicted > 0 ? fmt::format("{:.2f}", r.measured / r.predicted) : "-", r.bound);
  }
  const std::string measuredHow =
      launchByLaunch ? "launch by launch, sum of medians"
                     : fmt::format("sum of medians in the graph with event nodes; the graph without them, as "
                                   "llmc-train replays it: {:.3f} ms",
                                   graphUs / 1e3);
  fmt::print("total: measured {:.3f} ms ({}), predicted {:.3f} ms; "
             "{} kernels within 2x of the prediction, {} slower than 2x, {} faster than 2x\n",
             totalMeasured / 1e3, measuredHow, totalPredicted / 1e3, within, slower, faster);

  std::map<std::string, std::tuple<int, double, double>> byKind;  // launches, measured, predicted (us)
  for (const Row& r : rows) {
    auto& [count, measured, predicted] = byKind[r.kind];
    ++count;
    measured += r.measured;
    predicted += std::max(0.0, r.predicted);
  }
  fmt::print("by kind: {:<22} {:>8} {:>14} {:>14}\n", "", "launches", "measured ms", "predicted ms");
  for (const auto& [kind, figures] : byKind)
    fmt::print("         {:<22} {:>8} {:>14.3f} {:>14.3f}\n", kind, std::get<0>(figures), std::get<1>(figures) / 1e3,
               std::get<2>(figures) / 1e3);

  if (!json.empty()) {
    nlohmann::json out = nlohmann::json::array();
    for (const Row& r : rows)
      out.push_back({{"launch", r.name}, {"role", r.role}, {"kind", r.kind}, {"kernel", r.kernel}, {"tensor_cores", r.tensorCores},
                     {"measured_us", r.measured}, {"predicted_us", r.predicted}, {"bound", r.bound},
                     {"timed", r.repeated ? "copies" : launchByLaunch ? "launch by launch" : "in order"}});
    std::ofstream(json) << out.dump(1) << "\n";
  }
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
