#include "module_executor.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <stdexcept>

#include "launch_tensor_map.h"

namespace llmc::cuda {

namespace {

// What setArena passes a launch, in order, but the addresses (and the tensor
// maps' operand names, which the emitter numbers like the parameters):
// kernels of one source class share a compilation only where these agree
// (kernel_classes.h).
std::string launchSignature(const CudaModule& module, const KernelLaunch& l) {
  std::string signature;
  for (const TensorMapParam& m : l.tensorMaps)
    signature += fmt::format("map dims {} strides {} box {} swizzle {}; ", fmt::join(m.dims, ","),
                             fmt::join(m.stridesBytes, ","), fmt::join(m.box, ","), m.swizzle);
  for (const LaunchParam& p : l.params)
    signature += fmt::format("{} {}; ", module.buffers.at(static_cast<size_t>(p.buffer)).ctype, p.written ? "written" : "read");
  return signature;
}

}  // namespace

std::vector<KernelSource> kernelSources(const CudaModule& module, const std::string& arch) {
  std::vector<KernelSource> sources;
  sources.reserve(module.launches.size());
  for (const KernelLaunch& l : module.launches) sources.push_back({l.name, l.source, arch, {}, launchSignature(module, l)});
  return sources;
}

JitResult compileModuleKernels(const CudaModule& module, const std::string& arch, JitWorkers how) {
  const KernelCache cache(KernelCache::defaultDirectory());
  return compileKernels(kernelSources(module, arch), &cache, 0, how);
}

int ModuleExecutor::bufferIndex(const std::string& name) const {
  for (size_t b = 0; b < module_.buffers.size(); ++b) {
    const BufferDesc& d = module_.buffers[b];
    if (d.graphInput && d.name == name) return static_cast<int>(b);
    for (const std::string& o : d.graphOutputs)
      if (o == name) return static_cast<int>(b);
  }
  return -1;
}

ModuleExecutor::ModuleExecutor(CudaModule module, std::map<std::string, CUdeviceptr> bindings)
    : module_(std::move(module)), bound_(module_.buffers.size(), 0) {
  for (const auto& [name, address] : bindings) {
    const int b = bufferIndex(name);
    if (b < 0) throw std::invalid_argument(fmt::format("module has no input or output named {} to bind", name));
    if (address % 16 != 0)
      throw std::invalid_argument(fmt::format("{} bound at a device address that is not 16-byte aligned", name));
    bound_[static_cast<size_t>(b)] = address;
  }
  std::vector<bool> placedByCaller(bound_.size());
  for (size_t b = 0; b < bound_.size(); ++b) placedByCaller[b] = bound_[b] != 0;
  plan_ = planMemory(module_, placedByCaller);
}

void ModuleExecutor::load(const std::vector<JitKernel>& compiled) {
  if (compiled.size() != module_.launches.size())
    throw std::invalid_argument(fmt::format("{} compiled kernels for a module of {} launches", compiled.size(),
                                            module_.launches.size()));
  kernels_ = std::make_unique<LoadedKernels>(compiled);
  launchKernels_.clear();
  for (const KernelLaunch& l : module_.launches) launchKernels_.push_back(&(*kernels_)[l.name]);
}

void ModuleExecutor::setArena(CUdeviceptr arena, size_t bytes) {
  if (static_cast<int64_t>(bytes) < plan_.arenaBytes)
    throw std::invalid_argument(fmt::format("an arena of {} bytes for a memory plan of {}", bytes, plan_.arenaBytes));
  arena_ = arena;
  arenaBytes_ = bytes;
  addresses_.assign(module_.buffers.size(), 0);
  for (size_t b = 0; b < module_.buffers.size(); ++b)
    addresses_[b] = bound_[b] ? bound_[b] : arena + static_cast<CUdeviceptr>(plan_.offsets[b]);
  // A part of another buffer's array (an output's part) where it lies there.
  for (size_t b = 0; b < module_.buffers.size(); ++b)
    if (const int within = module_.buffers[b].within; within >= 0) {
      const BufferDesc& holder = module_.buffers.at(static_cast<size_t>(within));
      addresses_[b] = addresses_[static_cast<size_t>(within)] +
                      static_cast<CUdeviceptr>(module_.buffers[b].withinOffset * (holder.bytes / std::max<int64_t>(holder.elements, 1)));
    }

  arguments_.clear();
  arguments_.resize(module_.launches.size());
  for (size_t i = 0; i < module_.launches.size(); ++i) {
    const KernelLaunch& l = module_.launches[i];
    LaunchArguments& a = arguments_[i];
    for (const TensorMapParam& m : l.tensorMaps)
      a.maps.push_back(encodeTensorMap(m, addresses_.at(static_cast<size_t>(m.buffer))));
    for (const LaunchParam& p : l.params) {
      const BufferDesc& b = module_.buffers.at(static_cast<size_t>(p.buffer));
      const int64_t elementBytes = b.elements > 0 ? b.bytes / b.elements : 0;
      a.pointers.push_back(addresses_.at(static_cast<size_t>(p.buffer)) +
                           static_cast<CUdeviceptr>(p.offsetElements * elementBytes));
    }
    // The vectors are complete: pointers into them stay valid.
    for (CUtensorMap& m : a.maps) a.args.push_back(&m);
    for (CUdeviceptr& p : a.pointers) a.args.push_back(&p);
    a.config.grid = {static_cast<unsigned>(l.grid[0]), static_cast<unsigned>(l.grid[1]), static_cast<unsigned>(l.grid[2])};
    a.config.block = {static_cast<unsigned>(l.block), 1, 1};
    a.config.dynamicSharedMemoryBytes = static_cast<unsigned>(l.dynamicSmemBytes);
  }
}

void ModuleExecutor::rebind(const std::string& name, CUdeviceptr address) { rebind({{name, address}}); }

void ModuleExecutor::rebind(const std::map<std::string, CUdeviceptr>& addresses) {
  bool moved = false;
  for (const auto& [name, address] : addresses) {
    const int b = bufferIndex(name);
    if (b < 0 || !bound_[static_cast<size_t>(b)])
      throw std::invalid_argument(fmt::format("{} was not bound when the module was set up; it cannot be rebound", name));
    if (address % 16 != 0)
      throw std::invalid_argument(fmt::format("{} bound at a device address that is not 16-byte aligned", name));
    moved |= bound_[static_cast<size_t>(b)] != address;
    bound_[static_cast<size_t>(b)] = address;
  }
  if (moved && !addresses_.empty()) setArena(arena_, arenaBytes_);
}

void ModuleExecutor::run(CUstream stream) {
  for (size_t i = 0; i < module_.launches.size(); ++i) runLaunch(i, stream);
}

void ModuleExecutor::runLaunch(size_t i, CUstream stream) {
  if (!kernels_ || arguments_.size() != module_.launches.size())
    throw std::logic_error("ModuleExecutor::run before load() and setArena()");
  arguments_.at(i).config.stream = stream;
  launchKernels_[i]->launch(arguments_[i].config, arguments_[i].args.data());
}

CUdeviceptr ModuleExecutor::address(const std::string& name) const {
  const int b = bufferIndex(name);
  if (b < 0) throw std::invalid_argument(fmt::format("module has no input or output named {}", name));
  if (bound_[static_cast<size_t>(b)]) return bound_[static_cast<size_t>(b)];
  if (addresses_.empty()) throw std::logic_error("ModuleExecutor::address of an arena array before setArena()");
  return addresses_[static_cast<size_t>(b)];
}

CUdeviceptr ModuleExecutor::bufferAddress(size_t b) const {
  if (addresses_.empty()) throw std::logic_error("ModuleExecutor::bufferAddress before setArena()");
  return addresses_.at(b);
}

}  // namespace llmc::cuda
