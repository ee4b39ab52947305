// The emitted CUDA against the reference interpreter, on the GPU: for each
// diagram of emit_cases.h and each storage (f32, bf16), the runtime's
// ModuleExecutor places every stored value in one arena by the memory plan,
// poisons the arena with NaN (0xFF bytes), takes random inputs, runs the
// launches in order and compares every graph output with the
// interpreter's (f64): relative error <= 1e-5 with f32 storage (1e-4 for
// gradients), <= 1e-2 with bf16 (the interpreter gets the same bf16-rounded
// inputs). Matmul-like launches run on the tensor-core tile library (TMA
// tensor maps built from the launch description); with bf16 storage on a
// Hopper GPU every case also runs as compiled for sm_80 (mma.sync, cp.async),
// and each case's count of tensor-core launches is checked where it states
// one. Exits 77 (ctest: skipped) without a driver or a GPU.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <vector>

#include "ir/autodiff.h"
#include "codegen/emit_cuda.h"
#include "cuda_context.h"
#include "buffer_values.h"
#include "cuda_driver.h"
#include "device_buffer.h"
#include "driver/pipeline.h"
#include "emit_cases.h"
#include "interpreter.h"
#include "jit.h"
#include "low_precision.h"
#include "lowering/lowering.h"
#include "module_executor.h"
#include "nvrtc_compiler.h"
#include "planning/target.h"
#include "report/pseudocode.h"
#include "tensor.h"

namespace cuda = llmc::cuda;
using llmc::testing::EmitCase;

namespace {

// Random inputs: normal floats at the case's scale (rounded to bf16 for bf16
// storage), integers in [0, bound).
std::map<std::string, llmc::HostTensor> randomInputs(const llmc::Graph& g, const EmitCase& c, bool bf16, uint64_t seed) {
  std::map<std::string, llmc::HostTensor> inputs;
  for (llmc::NodeId id : g.inputs) {
    const llmc::Node& n = g.node(id);
    llmc::HostTensor t;
    if (llmc::isFloat(n.type.dtype)) {
      t = llmc::randomNormal(n.type, seed + static_cast<uint64_t>(id), 0, c.inputScale);
      if (bf16)
        for (double& v : t.data) v = llmc::roundToDType(v, llmc::DType::BF16);
    } else {
      auto bound = c.indexBound.find(n.name);
      t = llmc::randomUniform(n.type, seed + static_cast<uint64_t>(id), 0, bound == c.indexBound.end() ? 2 : bound->second);
    }
    inputs[n.name] = t;
  }
  return inputs;
}

struct Outcome {
  int failed = 0;
  int checked = 0;
};

void runCase(const EmitCase& c, bool bf16, const std::string& arch, const cuda::Context& context, Outcome& outcome) {
  const std::string label = fmt::format("{} ({} storage, {})", c.name, bf16 ? "bf16" : "f32", arch);
  // The GPU's own device where the arch is its own (sm_80 on a Hopper: the file's default).
  llmc::Target target = arch == context.arch() ? llmc::loadTargetFor(arch, context.name()) : llmc::loadTarget(arch);
  llmc::CostOptions cost;
  cost.storageBytes = bf16 ? 2 : 4;
  cost.rowProducts = c.rowProducts;
  cost.rowProductsWhereCheaper = false;  // the plan the case names: with row products or without
  // With the target, as llmc-compile plans: training steps get the recompute pass.
  llmc::PipelineOptions pipeline = llmc::testing::pipelineOptions(c);
  pipeline.target = &target;
  pipeline.cost = cost;
  llmc::Graph graph = llmc::compileToIR(pipeline);
  llmc::EmitOptions emit{.storage = bf16 ? llmc::StorageType::BF16 : llmc::StorageType::F32};
  if (c.gradientsInF32) emit.f32Values = llmc::gradientOutputs(graph);
  llmc::CudaModule module = llmc::emitCuda(graph, llmc::lowerKernels(graph, target, cost, emit), target, emit);
  // Each launch is its own translation unit, compiled in parallel (no cache:
  // every run compiles what it tests).
  const cuda::JitResult compiled = cuda::compileKernels(cuda::kernelSources(module, context.arch()), nullptr);
  int tensorCoreLaunches = 0;
  for (const llmc::KernelLaunch& l : module.launches) tensorCoreLaunches += !l.instructions.tensorCores.empty();
  if (bf16 && c.tensorCoreLaunches >= 0 && tensorCoreLaunches != c.tensorCoreLaunches) {
    fmt::print("FAIL {}: {} tensor-core launches, expected {}\n", label, tensorCoreLaunches, c.tensorCoreLaunches);
    ++outcome.failed;
  }

  auto inputs = randomInputs(graph, c, bf16, 1234);
  // The module runs as llmc-train runs it: every array in one arena, placed
  // by the memory plan (arrays share bytes when no launch sees both alive),
  // the whole arena poisoned with NaN (0xFF bytes) first, so that a launch
  // that fails to write, or a plan that lets two live arrays overlap, shows.
  cuda::ModuleExecutor executor(module, {});
  executor.load(compiled.kernels);
  cuda::DeviceBuffer arena(static_cast<size_t>(std::max<int64_t>(executor.memoryPlan().arenaBytes, 1)));
  arena.fillBytes(0xFF);
  executor.setArena(arena.address(), arena.bytes());
  for (const llmc::BufferDesc& b : module.buffers) {
    if (!b.graphInput) continue;
    const llmc::HostTensor laidOut = llmc::permuteTo(inputs.at(graph.node(b.node).name), graph.node(b.node).type);
    std::vector<unsigned char> bytes = llmc::cuda::bufferBytes(b, laidOut.data);
    cuda::check(cuda::driver().memcpyHtoD(executor.address(b.name), bytes.data(), bytes.size()), "cuMemcpyHtoD(input)");
  }
  executor.run(nullptr);
  context.synchronize();

  // The oracle computes in f64 from the same (bf16-rounded) inputs. Values
  // stored in bf16 between kernels move GPT-2's results by up to ~1e-2 at its
  // scale (tests/unit/storage_precision_test.cpp bounds it on the CPU); a loss
  // whose terms cancel, or an array this plan stores in bf16 that another
  // keeps in registers, may move more: the tolerance adds twice what the
  // interpreter finds rounding this plan's bf16 arrays moves each output (as
  // the fuzzer's GPU check does).
  llmc::InterpreterOptions options;
  options.precision = llmc::Precision::F64;
  const std::vector<llmc::HostTensor> expected = llmc::interpret(graph, inputs, options);
  std::vector<llmc::HostTensor> rounded;
  if (bf16) {
    llmc::InterpreterOptions stored = options;
    for (const llmc::BufferDesc& b : module.buffers)
      if (b.dtype == "bf16") stored.storedAsBf16.insert(b.node);
    stored.compareAtBf16 = true;
    rounded = llmc::interpret(graph, inputs, stored);
  }
  const double baseTolerance = bf16 ? 1e-2 : c.grad ? 1e-4 : 1e-5;
  for (size_t i = 0; i < graph.outputs.size(); ++i) {
    const std::string& name = graph.outputs[i].name;
    const llmc::BufferDesc* buffer = nullptr;
    for (const llmc::BufferDesc& b : module.buffers)
      for (const std::string& o : b.graphOutputs)
        if (o == name) buffer = &b;
    if (!buffer) {
      fmt::print("FAIL {}: output {} has no buffer\n", label, name);
      ++outcome.failed;
      continue;
    }
    std::vector<unsigned char> bytes(static_cast<size_t>(buffer->bytes));
    cuda::check(cuda::driver().memcpyDtoH(bytes.data(), executor.address(name), bytes.size()), "cuMemcpyDtoH(output)");
    llmc::HostTensor got{graph.node(graph.outputs[i].node).type, llmc::cuda::bufferValues(*buffer, bytes)};
    const double error = llmc::relativeError(got, expected[i]);
    const double tolerance = baseTolerance + (bf16 ? 2 * llmc::relativeError(rounded[i], expected[i]) : 0);
    const bool ok = error <= tolerance;  // false for NaN
    ++outcome.checked;
    if (!ok) ++outcome.failed;
    fmt::print("{} {}: {} relative error {:.3g} (tolerance {:.2g}; {} launches, {} on tensor cores)\n", ok ? "ok  " : "FAIL",
               label, name, error, tolerance, module.launches.size(), tensorCoreLaunches);
  }
}

}  // namespace

// usage: emit_cuda_gpu_test [NAME...]  — only the cases whose name contains
// one of the NAMEs (for compute-sanitizer runs of a few kernels); all without.
int main(int argc, char** argv) {
  const std::vector<std::string> only(argv + 1, argv + argc);
  std::vector<EmitCase> cases = llmc::testing::gpt2Cases();
  for (const EmitCase& c : llmc::testing::otherCases()) cases.push_back(c);
  if (!only.empty())
    std::erase_if(cases, [&](const EmitCase& c) {
      return std::none_of(only.begin(), only.end(), [&](const std::string& n) { return c.name.find(n) != std::string::npos; });
    });
  if (cases.empty()) {
    fmt::print(stderr, "emit_cuda_gpu_test: no case is named like the ones given\n");
    return 2;
  }
  const std::optional<cuda::Context> context = cuda::contextOrSkip();
  if (!context) return 77;
  fmt::print("GPU 0: {}, compiling for {}\n", context->name(), context->arch());
  Outcome outcome;
  const std::string native = context->computeCapability() >= 90 ? "sm_90a" : "sm_80";
  for (const EmitCase& c : cases)
    for (bool bf16 : {false, true}) {
      std::vector<std::string> archs = {native};
      if (bf16 && native == "sm_90a") archs.push_back("sm_80");  // the Ampere path (mma.sync, cp.async) runs on Hopper too
      for (const std::string& arch : archs) {
        try {
          runCase(c, bf16, arch, *context, outcome);
        } catch (const std::exception& e) {
          fmt::print("FAIL {} ({}, {}): {}\n", c.name, bf16 ? "bf16" : "f32", arch, e.what());
          ++outcome.failed;
        }
      }
    }
  fmt::print("{} outputs checked, {} failed\n", outcome.checked, outcome.failed);
  return outcome.failed ? 1 : 0;
}
