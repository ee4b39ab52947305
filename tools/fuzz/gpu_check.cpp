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
#include <fmt/format.h>

#include <cmath>
#include <cstring>

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

HostTensor zerosLike(const HostTensor& t) { return HostTensor{t.type, std::vector<double>(t.data.size(), 0.0)}; }

std::string outputKind(const std::string& name) { return name.rfind("grad_", 0) == 0 ? "a gradient" : name; }

// One configuration; a failure names the first output that is wrong.
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
  arena.fillBytes(0xFF);
  executor.setArena(arena.address(), arena.bytes());
  for (const BufferDesc& b : module.buffers) {
    if (!b.graphInput) continue;
    const HostTensor laidOut = permuteTo(inputs.at(graph.node(b.node).name), graph.node(b.node).type);
    const std::vector<unsigned char> bytes = cuda::bufferBytes(b, laidOut.data);
    cuda::check(cuda::driver().memcpyHtoD(executor.address(b.name), bytes.data(), bytes.size()), "cuMemcpyHtoD(input)");
  }
  if (options.sanitizerFriendly) {  // one launch at a time: a sanitizer's report names the launch
    for (size_t i = 0; i < module.launches.size(); ++i) {
      executor.runLaunch(i, nullptr);
      ctx.synchronize();
    }
  } else {
    executor.run(nullptr);
  }
  ctx.synchronize();

  InterpreterOptions exact;
  const std::vector<HostTensor> expected = interpret(graph, inputs, exact);
  InterpreterOptions stored;
  if (bf16) {
    for (const BufferDesc& b : module.buffers)
      if (b.dtype == "bf16") stored.storedAsBf16.insert(b.node);
    stored.compareAtBf16 = true;
  } else {
    stored.precision = Precision::F32;
  }
  const std::vector<HostTensor> rounded = interpret(graph, inputs, stored);
  // The diagram's own bf16 arrays: the interpreter rounds each one, a kernel
  // keeps those it fuses in f32 registers. Both are right; the difference is
  // rounding too.
  InterpreterOptions registers = stored;
  registers.roundLowPrecision = false;
  const std::vector<HostTensor> unrounded = interpret(graph, inputs, registers);
  // bf16 arrays in the diagram itself: the interpreter rounds each one, a
  // kernel keeps the ones it fuses in f32 registers; bf16's tolerance then
  // holds whatever the storage.
  bool lowPrecisionNodes = false;
  for (const Node& n : graph.nodes) lowPrecisionNodes |= n.type.dtype == DType::BF16;
  // An output whose terms cancel exactly in the interpreter (x / x's gradient)
  // keeps a rounding's worth on the GPU (an approximate divide): at least a
  // thousandth of the tolerance of the largest output is allowed.
  double largestScale = 0;
  for (const HostTensor& e : expected) largestScale = std::max(largestScale, differenceNorm(e, zerosLike(e)));
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const std::string& name = graph.outputs[i].name;
    const BufferDesc* buffer = nullptr;
    for (const BufferDesc& b : module.buffers)
      for (const std::string& o : b.graphOutputs)
        if (o == name) buffer = &b;
    if (!buffer)
      return Failure{"gpu", fmt::format("gpu {}: an output has no buffer", c.str()), fmt::format("output {}", name)};
    std::vector<unsigned char> bytes(static_cast<size_t>(buffer->bytes));
    cuda::check(cuda::driver().memcpyDtoH(bytes.data(), executor.address(name), bytes.size()), "cuMemcpyDtoH(output)");
    const HostTensor got{graph.node(graph.outputs[i].node).type, cuda::bufferValues(*buffer, bytes)};
    // In norms, not ratios: an output the exact run makes zero (x / x's
    // gradient) may still differ by rounding.
    const double scale = differenceNorm(expected[i], zerosLike(expected[i]));
    const double roundingNorm = std::max(differenceNorm(rounded[i], expected[i]), differenceNorm(unrounded[i], expected[i]));
    const double allowed = (bf16 || lowPrecisionNodes ? 3e-2 : 1e-4) * std::max(scale, 1e-3 * largestScale) +
                           2 * (std::isfinite(roundingNorm) ? roundingNorm : 0);
    const double errorNorm = differenceNorm(got, expected[i]);
    if (errorNorm <= allowed) continue;  // false for NaN
    const double unit = scale > 0 ? scale : largestScale > 0 ? largestScale : 1;  // for the message
    const double error = errorNorm / unit, tolerance = allowed / unit, roundingError = roundingNorm / unit;
    bool finite = true;
    for (double x : got.data) finite = finite && std::isfinite(x);
    return Failure{"gpu",
                   fmt::format("gpu {}: {} {}", c.str(), outputKind(name), finite ? "differs from the interpreter" : "is not finite"),
                   fmt::format("gpu {}: output {}: relative error {:.3g}, tolerance {:.3g} (rounding alone {:.3g}); {} launches: {}",
                               c.str(), name, error, tolerance, roundingError, module.launches.size(),
                               [&] {
                                 std::string names;
                                 for (const KernelLaunch& l : module.launches) names += l.name + " ";
                                 return names;
                               }())};
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
