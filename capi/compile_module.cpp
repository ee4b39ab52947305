#include "compile_module.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <set>
#include <string_view>

#include "driver/backend.h"
#include "driver/pipeline.h"
#include "jit.h"
#include "lowering/lowering.h"
#include "module_executor.h"
#include "planning/gpu_query.h"
#include "planning/target.h"

namespace llmc::capi {

namespace {

// NVRTC's workers: threads unless $LLMC_JIT_WORKERS says otherwise. The
// tools fork processes (faster for hundreds of kernels), but a library runs
// inside a host program with threads of its own (PyTorch's), where forking
// is best left to the host; an op has a handful of kernels.
cuda::JitWorkers jitWorkers() {
  const char* value = std::getenv("LLMC_JIT_WORKERS");
  return value && *value ? cuda::jitWorkersFromEnvironment() : cuda::JitWorkers::Threads;
}

// The diagram one program is compiled from: a file and an entry in it.
struct Source {
  std::string path, entry;
  bool generated = false;  // a wrapper libllmc wrote: errors placed in it are the shapes' fault
};

// One graph through the front end (the shapes' fault where a generated
// wrapper is at fault), the back end and NVRTC.
struct Planned {
  Graph graph;
  std::unique_ptr<CompiledProgram> program;
};

Graph frontEnd(const Source& source, PipelineOptions options, const std::string& shapesText) {
  options.path = source.path;
  options.entry = source.entry;
  try {
    return compileToIR(options);
  } catch (const CompileError& e) {
    if (source.generated && e.loc().file && e.loc().file->path == source.path)
      throw ShapeError(fmt::format("the shapes {} do not fit: {}", shapesText, e.what()));
    throw;
  }
}

std::unique_ptr<CompiledProgram> backEnd(const Graph& graph, const Target& target, const CostOptions& cost,
                                         const std::string& arch, std::set<std::string> hidden = {}) {
  BackendOptions backend;
  backend.cost = cost;
  backend.emit = emitOptionsFor(cost);
  backend.until = "write";
  Backend planned = compileBackend(graph, target, backend);
  cuda::JitResult jit = cuda::compileModuleKernels(*planned.module, arch, jitWorkers());
  return std::make_unique<CompiledProgram>(graph, std::move(*planned.module), std::move(jit.kernels), std::move(hidden));
}

std::string describeShapes(const std::vector<InputShape>& shapes) {
  std::vector<std::string> items;
  for (const InputShape& s : shapes) items.push_back(fmt::format("{}=({})", s.input, fmt::join(s.dims, ", ")));
  return fmt::format("{}", fmt::join(items, " "));
}

// Sizes given that no diagram reads: a typo would otherwise go unnoticed.
void checkSizesUsed(const CompileRequest& request, const std::set<std::string>& used) {
  for (const auto& [name, size] : request.sizes)
    if (!used.count(name))
      throw std::invalid_argument(fmt::format("size {}={}: no size of {} is named '{}'{}", name, size, request.path, name,
                                              used.empty() ? "" : fmt::format(" (it reads: {})", fmt::join(used, ", "))));
}

}  // namespace

std::string resolveArch(const std::string& arch) {
  if (arch == "sm_90a" || arch == "sm_80") return arch;
  if (arch != "auto") throw std::invalid_argument(fmt::format("arch expects auto, sm_80 or sm_90a, got '{}'", arch));
  try {
    const GpuProperties gpu = queryGpu(0);
    const int capability = 10 * gpu.computeCapabilityMajor + gpu.computeCapabilityMinor;
    if (capability < 80)
      throw std::invalid_argument(
          fmt::format("GPU 0 ({}, compute capability {}) is older than sm_80, the oldest arch llmc plans for", gpu.name,
                      capability / 10.0));
    return capability >= 90 ? "sm_90a" : "sm_80";
  } catch (const NoGpuError&) {
    return "sm_90a";
  }
}

std::unique_ptr<CompiledModule> compileModule(const CompileRequest& request) {
  auto result = std::make_unique<CompiledModule>();
  result->arch = resolveArch(request.arch);
  result->bf16 = request.bf16;
  const EntrySignature signature = readEntrySignature(request.path, request.entry);
  result->entry = signature.name;

  Source forward{.path = request.path, .entry = signature.name};
  std::string shapesText;
  if (request.shapes) {
    shapesText = describeShapes(*request.shapes);
    forward = {.path = writeWrapper(shapedEntrySource(signature, *request.shapes, "llmc_shaped_" + signature.name)),
               .entry = "llmc_shaped_" + signature.name,
               .generated = true};
  } else if (signature.woven) {
    for (const Port& p : signature.inputs)
      if (p.type.ellipsisAt >= 0)
        throw NeedsShapesError(fmt::format("input '{}' of '{}' has '..': its axes come from the arrays; give the inputs' "
                                           "shapes",
                                           p.name, signature.name));
  }

  const Target target = loadTarget(result->arch);
  CostOptions cost;
  cost.storageBytes = request.bf16 ? 2 : 4;
  PipelineOptions options;
  options.sizes = request.sizes;
  options.target = &target;
  options.cost = cost;
  std::set<std::string> used;
  options.usedSizes = &used;
  const Graph graph = frontEnd(forward, options, shapesText);
  checkSizesUsed(request, used);
  result->forward = backEnd(graph, target, cost, result->arch);
  if (!request.grad) return result;

  std::vector<std::string> wrt;
  for (NodeId id : graph.inputs)
    if (isFloat(graph.node(id).type.dtype)) wrt.push_back(graph.node(id).name);
  const std::string vjpName = "llmc_vjp_" + signature.name;
  const std::string calleeFile = forward.generated ? forward.path : signature.file;
  const Source backward{.path = writeWrapper(vjpSource(graph, forward.entry, calleeFile, wrt, vjpName)),
                        .entry = vjpName,
                        .generated = true};
  options.grad = true;
  options.loss = kVjpLoss;
  options.wrt = wrt;
  options.usedSizes = nullptr;
  const Graph vjp = frontEnd(backward, options, shapesText.empty() ? "of the forward" : shapesText);
  result->backward = backEnd(vjp, target, cost, result->arch, {kVjpLoss});
  return result;
}

}  // namespace llmc::capi
