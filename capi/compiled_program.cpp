#include "compiled_program.h"

#include <fmt/format.h>

#include <stdexcept>

#include "cuda_context.h"
#include "cuda_driver.h"
#include "module_executor.h"
#include "planning/memory_plan.h"

namespace llmc::capi {

namespace {

// The buffer that holds graph input or output `name`: -1 where none does.
int bufferOf(const CudaModule& module, const std::string& name, bool input) {
  for (size_t b = 0; b < module.buffers.size(); ++b) {
    const BufferDesc& d = module.buffers[b];
    if (input ? d.graphInput && d.name == name
              : std::find(d.graphOutputs.begin(), d.graphOutputs.end(), name) != d.graphOutputs.end())
      return static_cast<int>(b);
  }
  return -1;
}

ValueDescription describe(const std::string& name, const Type& type, const BufferDesc& buffer) {
  ValueDescription v{.name = name, .dtype = buffer.dtype, .bytes = buffer.bytes};
  for (const Axis& a : type.axes) {
    v.axes.push_back(a.name);
    v.shape.push_back(a.size);
  }
  return v;
}

// The calling thread's context while a run uses the GPU's primary context:
// the host program (PyTorch) keeps its own current context, which may be
// another GPU's.
class CurrentContext {
 public:
  CurrentContext() { cuda::check(cuda::driver().ctxGetCurrent(&saved_), "cuCtxGetCurrent"); }
  ~CurrentContext() { cuda::driver().ctxSetCurrent(saved_); }
  CurrentContext(const CurrentContext&) = delete;
  CurrentContext& operator=(const CurrentContext&) = delete;

 private:
  CUcontext saved_ = nullptr;
};

CUdeviceptr address(const void* pointer, const ValueDescription& value, const char* what) {
  const auto a = reinterpret_cast<CUdeviceptr>(pointer);
  if (!a) throw std::invalid_argument(fmt::format("{} '{}' is a null device pointer", what, value.name));
  if (a % 16 != 0)
    throw std::invalid_argument(fmt::format("{} '{}' is at a device address that is not 16-byte aligned ({:#x})", what,
                                            value.name, a));
  return a;
}

}  // namespace

struct CompiledProgram::Loaded {
  cuda::Context context;  // retains the GPU's primary context, the one the CUDA runtime (PyTorch) uses
  cuda::ModuleExecutor executor;
  CUdeviceptr arena = 0;
  size_t arenaBytes = 0;
  bool arenaSet = false;

  Loaded(int device, const CudaModule& module, const std::map<std::string, CUdeviceptr>& placeholders,
         const std::vector<cuda::JitKernel>& kernels)
      : context(device), executor(module, placeholders) {
    executor.load(kernels);
  }
};

CompiledProgram::CompiledProgram(const Graph& graph, CudaModule module, std::vector<cuda::JitKernel> kernels,
                                 std::set<std::string> hidden)
    : module_(std::move(module)), kernels_(std::move(kernels)) {
  std::vector<bool> placedByCaller(module_.buffers.size(), false);
  for (NodeId id : graph.inputs) {
    const Node& n = graph.node(id);
    const int b = bufferOf(module_, n.name, true);
    if (b < 0) throw std::logic_error(fmt::format("input {} has no buffer in the module", n.name));
    inputs_.push_back(describe(n.name, n.type, module_.buffers[static_cast<size_t>(b)]));
    placedByCaller[static_cast<size_t>(b)] = true;
  }
  std::map<int, std::string> holder;  // buffer -> the input or output bound to it
  for (const ValueDescription& v : inputs_) holder[bufferOf(module_, v.name, true)] = v.name;
  for (const GraphOutput& o : graph.outputs) {
    if (hidden.count(o.name)) continue;
    const int b = bufferOf(module_, o.name, false);
    if (b < 0) throw std::logic_error(fmt::format("output {} has no buffer in the module", o.name));
    const BufferDesc& buffer = module_.buffers[static_cast<size_t>(b)];
    // A view of another array shares its buffer: described as the output, in
    // the output's row-major order.
    outputs_.push_back(describe(o.name, graph.node(o.node).type, buffer));
    const auto [at, fresh] = holder.emplace(b, o.name);
    boundOutputs_.push_back(fresh ? o.name : "");
    if (!fresh) copies_[outputs_.size() - 1] = at->second;
    placedByCaller[static_cast<size_t>(b)] = true;
  }
  workspaceBytes_ = planMemory(module_, placedByCaller).arenaBytes;
}

CompiledProgram::~CompiledProgram() = default;

std::string CompiledProgram::ptx() const {
  std::string all;
  for (const cuda::JitKernel& k : kernels_) {
    // A kernel that shares another's compilation (jit.h) names it, once printed.
    if (k.shared) all += fmt::format("// kernel {}: runs {}, above\n", k.name, k.compiled->name);
    else all += fmt::format("// kernel {} ({})\n{}\n", k.compiled->name, k.compiled->arch, k.compiled->ptx);
  }
  return all;
}

CompiledProgram::Loaded& CompiledProgram::loaded(int device) {
  auto found = loaded_.find(device);
  if (found != loaded_.end()) return *found->second;
  // Placeholders: the memory plan needs only to know which arrays the caller
  // places; every run binds them where its arrays are.
  std::map<std::string, CUdeviceptr> placeholders;
  CUdeviceptr next = 16;
  for (const ValueDescription& v : inputs_) placeholders[v.name] = next += 16;
  for (const std::string& name : boundOutputs_)
    if (!name.empty()) placeholders[name] = next += 16;
  auto made = std::make_unique<Loaded>(device, module_, placeholders, kernels_);
  if (made->executor.memoryPlan().arenaBytes != workspaceBytes_)
    throw std::logic_error("the executor's memory plan differs from the one the workspace was sized by");
  return *loaded_.emplace(device, std::move(made)).first->second;
}

void CompiledProgram::run(const RunArguments& args) {
  if (args.workspaceBytes < static_cast<size_t>(workspaceBytes_))
    throw std::invalid_argument(
        fmt::format("a workspace of {} bytes, where the module needs {}", args.workspaceBytes, workspaceBytes_));
  if (workspaceBytes_ > 0 && (!args.workspace || reinterpret_cast<uintptr_t>(args.workspace) % 256 != 0))
    throw std::invalid_argument("the workspace must be a device address aligned to 256 bytes");
  std::map<std::string, CUdeviceptr> addresses;
  for (size_t i = 0; i < inputs_.size(); ++i) addresses[inputs_[i].name] = address(args.inputs[i], inputs_[i], "input");
  std::vector<CUdeviceptr> outputs;
  for (size_t i = 0; i < outputs_.size(); ++i) {
    outputs.push_back(address(args.outputs[i], outputs_[i], "output"));
    if (!boundOutputs_[i].empty()) addresses[boundOutputs_[i]] = outputs.back();
  }

  const std::lock_guard<std::mutex> lock(mutex_);
  const CurrentContext restore;
  Loaded& l = loaded(args.device);
  l.context.makeCurrent();
  l.executor.rebind(addresses);
  const auto arena = reinterpret_cast<CUdeviceptr>(args.workspace);
  if (!l.arenaSet || l.arena != arena || l.arenaBytes != args.workspaceBytes) {
    l.executor.setArena(arena, args.workspaceBytes);
    l.arena = arena, l.arenaBytes = args.workspaceBytes, l.arenaSet = true;
  }
  const auto stream = static_cast<CUstream>(args.stream);
  l.executor.run(stream);
  for (const auto& [output, from] : copies_)
    cuda::check(cuda::driver().memcpyDtoDAsync(outputs[output], l.executor.address(from),
                                               static_cast<size_t>(outputs_[output].bytes), stream),
                fmt::format("cuMemcpyDtoDAsync(output {})", outputs_[output].name));
}

}  // namespace llmc::capi
