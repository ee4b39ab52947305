// The GPU check: every configuration of a diagram run on GPU 0 as
// tests/cuda/emit_cuda_gpu_test.cpp runs its cases (one arena placed by the
// memory plan, poisoned with NaN bytes; fresh random inputs; every output
// read back) against the f64 interpreter.
//
// Tolerance, on the norm of each output's error: 1e-4 of the output's norm with f32
// storage and 3e-2 with bf16 (or bf16 arrays in the diagram), plus twice the error that rounding alone
// causes: the interpreter run again with every array the module stores in
// bf16 rounded to bf16 and compared at bf16 (f32 storage: the interpreter in
// f32), or with the diagram's own bf16 values unrounded, as registers keep
// them (the larger of the two). A diagram
// whose outputs bf16 rounding moves by 10% is ill-conditioned, not wrong.
// Where an output is still off, it is judged again by what roundings
// anywhere can do: every value of the interpreter's exact run moved by a
// rounding's worth at random (InterpreterOptions::perturb; a sum by its
// terms' magnitudes). An ill-conditioned diagram is not wrong.
// A failure also names the first launch whose buffer is wrong, found by
// running the module again one launch at a time.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>

#include "checks.h"
#include "codegen/emit_cuda.h"
#include "cuda_context.h"
#include "buffer_values.h"
#include "cuda_driver.h"
#include "device_buffer.h"
#include "jit.h"
#include "low_precision.h"
#include "lowering/lowering.h"
#include "module_executor.h"
#include "planning/target.h"
#include "report/pseudocode.h"

namespace llmc::fuzz {

namespace {

const std::optional<cuda::Context>& context() {
  static const std::optional<cuda::Context> c = cuda::contextOrSkip();
  return c;
}

// The norm of t's finite values (a score masked with -inf has a size).
double finiteNorm(const HostTensor& t) {
  double sum = 0;
  for (double x : t.data)
    if (std::isfinite(x)) sum += x * x;
  return std::sqrt(sum);
}

std::string outputKind(const std::string& name) { return name.rfind("grad_", 0) == 0 ? "a gradient" : name; }

// The interpreter's three runs a GPU result is judged by: exact (f64), as
// stored (bf16 storage's rounding, or f32 arithmetic), and with the
// diagram's own bf16 values kept unrounded, as registers keep them.
struct Reference {
  InterpreterOptions exact, stored, registers;
  bool lowPrecision = false;  // bf16 storage or bf16 arrays in the diagram: bf16's tolerance
};

Reference referenceFor(const Graph& graph, const CudaModule& module, bool bf16) {
  Reference r;
  if (bf16) {
    for (const BufferDesc& b : module.buffers)
      if (b.dtype == "bf16") r.stored.storedAsBf16.insert(b.node);
    r.stored.compareAtBf16 = true;
  } else {
    r.stored.precision = Precision::F32;
  }
  r.registers = r.stored;
  r.registers.roundLowPrecision = false;
  r.lowPrecision = bf16;
  for (const Node& n : graph.nodes) r.lowPrecision |= n.type.dtype == DType::BF16;
  return r;
}

// How far a GPU value is from the exact one, and how far it may be: the
// tolerance on the error's norm plus twice what rounding alone moves it. An
// output whose terms cancel exactly in the interpreter (x / x's gradient)
// keeps a rounding's worth on the GPU (an approximate divide): at least a
// thousandth of `largestScale`'s tolerance is allowed (the largest output;
// where that fails, the largest value the diagram computes).
struct Judgement {
  double error = 0, allowed = 0, rounding = 0, unit = 1;
  bool wrong() const { return !(error <= allowed); }  // true for NaN
};

Judgement judge(const HostTensor& got, const HostTensor& exact, const HostTensor& stored, const HostTensor& registers,
                bool lowPrecision, double largestScale, double conditioning = 0) {
  Judgement j;
  const double scale = finiteNorm(exact);
  j.rounding = std::max({differenceNorm(stored, exact), differenceNorm(registers, exact), conditioning});
  j.allowed = (lowPrecision ? 3e-2 : 1e-4) * std::max(scale, 1e-3 * largestScale) +
              2 * (std::isfinite(j.rounding) ? j.rounding : 0);
  j.error = differenceNorm(got, exact);
  j.unit = scale > 0 ? scale : largestScale > 0 ? largestScale : 1;  // for messages
  return j;
}

// The largest norm of any float value of the diagram (inputs included).
double largestValue(const Graph& graph, const std::map<std::string, HostTensor>& inputs, InterpreterOptions options) {
  for (const Node& n : graph.nodes)
    if (isFloat(n.type.dtype)) options.keep.insert(n.id);
  double largest = 0;
  for (const auto& [id, value] : interpretNodes(graph, inputs, options))
    largest = std::max(largest, finiteNorm(value));
  return largest;
}

HostTensor readBuffer(const cuda::ModuleExecutor& executor, const Graph& graph, const CudaModule& module, size_t b) {
  const BufferDesc& buffer = module.buffers[b];
  std::vector<unsigned char> bytes(static_cast<size_t>(buffer.bytes));
  cuda::check(cuda::driver().memcpyDtoH(bytes.data(), executor.bufferAddress(b), bytes.size()), "cuMemcpyDtoH");
  return HostTensor{graph.node(buffer.node).type, cuda::bufferValues(buffer, bytes)};
}

// The module on a NaN-poisoned arena with `inputs` in place; `afterLaunch`
// (if set) runs after each launch, one launch at a time.
void runModule(cuda::ModuleExecutor& executor, const CudaModule& module, const Graph& graph,
               const std::map<std::string, HostTensor>& inputs, cuda::DeviceBuffer& arena, bool oneAtATime,
               const std::function<void(size_t)>& afterLaunch) {
  arena.fillBytes(0xFF);
  executor.setArena(arena.address(), arena.bytes());
  for (const BufferDesc& b : module.buffers) {
    if (!b.graphInput) continue;
    const HostTensor laidOut = permuteTo(inputs.at(graph.node(b.node).name), graph.node(b.node).type);
    const std::vector<unsigned char> bytes = cuda::bufferBytes(b, laidOut.data);
    cuda::check(cuda::driver().memcpyHtoD(executor.address(b.name), bytes.data(), bytes.size()), "cuMemcpyHtoD(input)");
  }
  const cuda::Context& ctx = *context();
  if (oneAtATime || afterLaunch) {
    for (size_t i = 0; i < module.launches.size(); ++i) {
      executor.runLaunch(i, nullptr);
      ctx.synchronize();
      if (afterLaunch) afterLaunch(i);
    }
  } else {
    executor.run(nullptr);
  }
  ctx.synchronize();
}

// A buffer is held to bf16's tolerance where it is stored in bf16 or its
// value is: an f32 buffer gets f32's, plus the roundings the references show
// (stricter than the outputs', where any bf16 in the diagram loosens all).
bool lowPrecisionBuffer(const Graph& graph, const BufferDesc& b) {
  return b.dtype == "bf16" || graph.node(b.node).type.dtype == DType::BF16;
}

// Where a wrong output comes from: the module run again one launch at a
// time, each buffer compared with its graph value after the last launch
// that writes it. Names the first launch whose buffer is wrong.
std::string firstWrongLaunch(cuda::ModuleExecutor& executor, const CudaModule& module, const Graph& graph,
                             const std::map<std::string, HostTensor>& inputs, cuda::DeviceBuffer& arena,
                             const Reference& reference, double largestScale) {
  std::vector<int> lastWriter(module.buffers.size(), -1);
  for (size_t i = 0; i < module.launches.size(); ++i)
    for (const LaunchParam& p : module.launches[i].params)
      if (p.written && module.buffers[static_cast<size_t>(p.buffer)].node >= 0)  // not a staging copy
        lastWriter[static_cast<size_t>(p.buffer)] = static_cast<int>(i);
  Reference kept = reference;
  for (size_t b = 0; b < module.buffers.size(); ++b)
    if (lastWriter[b] >= 0) {
      kept.exact.keep.insert(module.buffers[b].node);
      kept.stored.keep.insert(module.buffers[b].node);
      kept.registers.keep.insert(module.buffers[b].node);
    }
  const auto exact = interpretNodes(graph, inputs, kept.exact);
  const auto stored = interpretNodes(graph, inputs, kept.stored);
  const auto registers = interpretNodes(graph, inputs, kept.registers);
  std::string found;
  runModule(executor, module, graph, inputs, arena, true, [&](size_t i) {
    if (!found.empty()) return;
    for (size_t b = 0; b < module.buffers.size(); ++b) {
      if (lastWriter[b] != static_cast<int>(i)) continue;
      const NodeId node = module.buffers[b].node;
      const Judgement j = judge(readBuffer(executor, graph, module, b), exact.at(node), stored.at(node),
                                registers.at(node), lowPrecisionBuffer(graph, module.buffers[b]), largestScale);
      if (!j.wrong()) continue;
      found = fmt::format("first wrong buffer: {} ({}), written by launch {} {}, relative error {:.3g}, tolerance {:.3g}",
                          module.buffers[b].name, graph.node(node).type.str(), i, module.launches[i].name,
                          j.error / j.unit, j.allowed / j.unit);
      return;
    }
  });
  return found.empty() ? "every buffer matches when launches run one at a time" : found;
}

// One configuration; a failure names the first output that is wrong and the
// first launch whose buffer is.
std::optional<Failure> runConfig(const DiagramSpec& spec, const DiagramFile& file, const Config& c,
                                 const CheckOptions& options) {
  const Target target = loadTarget(c.arch);
  const bool bf16 = c.storage == "bf16";
  CostOptions cost;
  cost.storageBytes = bf16 ? 2 : 4;
  const Graph graph = compileGraph(file, spec, c.grad, &target, cost.storageBytes);
  // Lowered as llmc-compile and llmc-train lower it (lowering.h).
  const EmitOptions emit{.storage = bf16 ? StorageType::BF16 : StorageType::F32};
  const CudaModule module = emitCuda(graph, lowerKernels(graph, target, cost, emit), target, emit);
  const cuda::Context& ctx = *context();
  // Planned for c.arch, compiled for the GPU present: sm_80's code (mma.sync, cp.async) runs on Hopper too.
  const cuda::JitResult compiled = cuda::compileKernels(cuda::kernelSources(module, ctx.arch()), nullptr,
                                                        options.compileThreads, cuda::JitWorkers::Threads);
  const auto inputs = randomInputs(graph, spec, spec.seed + 7919, bf16);
  cuda::ModuleExecutor executor(module, {});
  executor.load(compiled.kernels);
  cuda::DeviceBuffer arena(static_cast<size_t>(std::max<int64_t>(executor.memoryPlan().arenaBytes, 1)));
  // One launch at a time under a sanitizer: its report names the launch.
  runModule(executor, module, graph, inputs, arena, options.sanitizerFriendly, {});

  const Reference reference = referenceFor(graph, module, bf16);
  const std::vector<HostTensor> expected = interpret(graph, inputs, reference.exact);
  const std::vector<HostTensor> rounded = interpret(graph, inputs, reference.stored);
  const std::vector<HostTensor> unrounded = interpret(graph, inputs, reference.registers);
  double largestScale = 0;
  for (const HostTensor& e : expected) largestScale = std::max(largestScale, finiteNorm(e));
  std::optional<double> valuesScale;
  std::vector<HostTensor> perturbed;
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const std::string& name = graph.outputs[i].name;
    std::optional<size_t> buffer;
    for (size_t b = 0; b < module.buffers.size(); ++b)
      for (const std::string& o : module.buffers[b].graphOutputs)
        if (o == name) buffer = b;
    if (!buffer)
      return Failure{"gpu", fmt::format("gpu {}: an output has no buffer", c.str()), fmt::format("output {}", name)};
    // The buffer may be the array the output is a view of (the same bytes,
    // in the output's row-major order): read as the output.
    HostTensor got = readBuffer(executor, graph, module, *buffer);
    got.type = graph.node(graph.outputs[i].node).type;
    Judgement j = judge(got, expected[i], rounded[i], unrounded[i], reference.lowPrecision, largestScale);
    if (j.wrong() && !valuesScale) {
      // An output far smaller than the values it was made from (terms that
      // cancel, x - x exactly) keeps their roundings: the floor is taken
      // over every value the diagram computes.
      valuesScale = largestValue(graph, inputs, reference.exact);
      largestScale = std::max(largestScale, *valuesScale);
      j = judge(got, expected[i], rounded[i], unrounded[i], reference.lowPrecision, largestScale);
    }
    if (j.wrong() && perturbed.empty()) {
      InterpreterOptions perturbation = reference.exact;
      perturbation.storedAsBf16 = reference.stored.storedAsBf16;
      perturbation.compareAtBf16 = reference.stored.compareAtBf16;  // x == max(x) holds as on the GPU
      perturbation.roundLowPrecision = false;
      perturbation.perturb = std::ldexp(1.0, -22);
      perturbation.perturbSeed = spec.seed;
      perturbed = interpret(graph, inputs, perturbation);
    }
    if (j.wrong())  // how far roundings anywhere move it (an ill-conditioned diagram)
      j = judge(got, expected[i], rounded[i], unrounded[i], reference.lowPrecision, largestScale,
                differenceNorm(perturbed[i], expected[i]));
    if (!j.wrong()) continue;
    bool finite = true;
    for (double x : got.data) finite = finite && std::isfinite(x);
    std::string launches;
    for (const KernelLaunch& l : module.launches) launches += l.name + " ";
    return Failure{"gpu",
                   fmt::format("gpu {}: {} {}", c.str(), outputKind(name), finite ? "differs from the interpreter" : "is not finite"),
                   fmt::format("gpu {}: output {}: relative error {:.3g}, tolerance {:.3g} (rounding alone {:.3g}); {}; {} launches: {}",
                               c.str(), name, j.error / j.unit, j.allowed / j.unit, j.rounding / j.unit,
                               firstWrongLaunch(executor, module, graph, inputs, arena, reference, largestScale),
                               module.launches.size(), launches)};
  }
  return std::nullopt;
}

}  // namespace

bool gpuAvailable(std::string* why) {
  if (context()) return true;
  if (why) *why = "no GPU (or no CUDA driver) could be used";
  return false;
}

std::optional<Failure> checkGpu(const DiagramSpec& spec, const DiagramFile& file, const CheckOptions& options) {
  if (!context()) throw std::runtime_error("--checks gpu: no GPU");
  for (const Config& c : configsFor(spec, options)) {
    try {
      if (auto f = runConfig(spec, file, c, options)) return f;
    } catch (const std::exception& e) {
      return failureFrom("gpu", c.str(), e);
    }
  }
  return std::nullopt;
}

}  // namespace llmc::fuzz
