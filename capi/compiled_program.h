// One graph planned, emitted and compiled by NVRTC, ready to run on the
// caller's device arrays: the forward of a libllmc module, or its backward.
// Compiling needs no GPU; the kernels are loaded on a GPU the first time the
// program runs there (one ModuleExecutor per GPU, runtime/cuda).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "codegen/module.h"
#include "ir/ir.h"
#include "jit.h"

namespace llmc::capi {

// An input or output as the caller's array must be: its dtype in device
// memory (f32, bf16, f64, i32, u16, bool), its axes and their sizes,
// row-major and contiguous.
struct ValueDescription {
  std::string name = {}, dtype = {};
  std::vector<std::string> axes = {};
  std::vector<int64_t> shape = {};
  int64_t bytes = 0;
};

// A call's arrays: device addresses, one per input and output, in the order
// of inputs() and outputs(); the workspace holds everything else.
struct RunArguments {
  int device = 0;
  const void* const* inputs = nullptr;
  void* const* outputs = nullptr;
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  void* stream = nullptr;  // a CUstream (cudaStream_t); null: the legacy default stream
};

class CompiledProgram {
 public:
  // `hidden`: graph outputs the caller does not see (kept in the workspace).
  CompiledProgram(const Graph& graph, CudaModule module, std::vector<cuda::JitKernel> kernels,
                  std::set<std::string> hidden = {});
  ~CompiledProgram();
  CompiledProgram(const CompiledProgram&) = delete;
  CompiledProgram& operator=(const CompiledProgram&) = delete;

  const std::vector<ValueDescription>& inputs() const { return inputs_; }
  const std::vector<ValueDescription>& outputs() const { return outputs_; }
  // The workspace a run needs, in bytes (0: none).
  int64_t workspaceBytes() const { return workspaceBytes_; }
  size_t launches() const { return module_.launches.size(); }
  // The PTX of every launch, in order (what NVRTC made; for inspection).
  std::string ptx() const;

  // Enqueues the program on `args.stream` and returns: no host
  // synchronisation. The GPU's primary context is made current for the call
  // and the caller's restored after. Throws std::invalid_argument for a null
  // or misaligned (16 bytes) address or a workspace too small.
  void run(const RunArguments& args);

 private:
  struct Loaded;  // the kernels loaded on one GPU, its executor
  Loaded& loaded(int device);

  CudaModule module_;
  std::vector<cuda::JitKernel> kernels_;
  std::vector<ValueDescription> inputs_, outputs_;
  int64_t workspaceBytes_ = 0;
  // The executor's bindings: each input by name, then each output that has
  // a buffer of its own; an output held in an input's buffer or another
  // output's is copied from that one's (copies_: output index -> name).
  std::vector<std::string> boundOutputs_;  // per output; "" where copied
  std::map<size_t, std::string> copies_;
  std::mutex mutex_;  // one run at a time: the executor's arguments are rewritten per call
  std::map<int, std::unique_ptr<Loaded>> loaded_;
};

}  // namespace llmc::capi
