// The C boundary of libllmc (llmc.h): every function catches what the C++
// below it throws and turns it into a status and a message, so that no
// exception crosses into the host program (Python, through ctypes).
#include "llmc.h"

#include <fmt/format.h>

#include <exception>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "compile_module.h"
#include "cuda_driver.h"
#include "driver/pipeline.h"
#include "large_stack.h"
#include "nvrtc_compiler.h"
#include "planning/target.h"

namespace capi = llmc::capi;

// A program (forward or backward) as the caller holds it, with what its
// descriptions point into.
struct llmc_module {
  std::shared_ptr<capi::CompiledModule> owner;
  capi::CompiledProgram* program = nullptr;
  std::unique_ptr<llmc_module> backward;
  std::vector<std::vector<const char*>> inputAxes, outputAxes;
  std::string ptx;
};

namespace {

thread_local std::string lastError;

llmc_status fail(llmc_status status, const std::string& message) {
  lastError = message;
  return status;
}

// Runs `body`, turning what it throws into a status and lastError.
template <typename Body>
llmc_status guarded(Body&& body) {
  lastError.clear();
  try {
    body();
    return LLMC_OK;
  } catch (const llmc::CompileError& e) {  // rendered: FILE:LINE:COL: error: ..., the line, a caret
    return fail(LLMC_ERROR_COMPILE, e.what());
  } catch (const capi::NeedsShapesError& e) {
    return fail(LLMC_ERROR_NEEDS_SHAPES, e.what());
  } catch (const capi::ShapeError& e) {
    return fail(LLMC_ERROR_SHAPE, e.what());
  } catch (const llmc::TargetError& e) {
    return fail(LLMC_ERROR_USAGE, e.what());
  } catch (const llmc::NoGpuError& e) {
    return fail(LLMC_ERROR_NO_GPU, fmt::format("no usable GPU: {}", e.what()));
  } catch (const llmc::cuda::CudaError& e) {
    return fail(LLMC_ERROR_CUDA, e.what());
  } catch (const llmc::cuda::KernelCompileError& e) {
    return fail(LLMC_ERROR_INTERNAL, fmt::format("NVRTC refused a kernel llmc emitted (a bug in llmc): {}", e.what()));
  } catch (const std::invalid_argument& e) {
    return fail(LLMC_ERROR_USAGE, e.what());
  } catch (const std::bad_alloc&) {
    return fail(LLMC_ERROR_INTERNAL, "out of host memory");
  } catch (const std::exception& e) {
    return fail(LLMC_ERROR_INTERNAL, fmt::format("internal error: {}", e.what()));
  } catch (...) {
    return fail(LLMC_ERROR_INTERNAL, "internal error: an unknown exception");
  }
}

std::unique_ptr<llmc_module> wrap(std::shared_ptr<capi::CompiledModule> owner, capi::CompiledProgram* program) {
  auto m = std::make_unique<llmc_module>();
  m->owner = std::move(owner);
  m->program = program;
  for (const capi::ValueDescription& v : program->inputs()) {
    auto& axes = m->inputAxes.emplace_back();
    for (const std::string& a : v.axes) axes.push_back(a.c_str());
  }
  for (const capi::ValueDescription& v : program->outputs()) {
    auto& axes = m->outputAxes.emplace_back();
    for (const std::string& a : v.axes) axes.push_back(a.c_str());
  }
  return m;
}

capi::CompileRequest requestFrom(const llmc_compile_options& o) {
  if (!o.path || !*o.path) throw std::invalid_argument("no diagram file given (path)");
  capi::CompileRequest r;
  r.path = o.path;
  r.entry = o.entry ? o.entry : "";
  if (o.sizes && *o.sizes) r.sizes = llmc::parseSizeBindings(o.sizes);
  r.grad = o.grad != 0;
  const std::string storage = o.storage ? o.storage : "bf16";
  if (storage != "bf16" && storage != "f32")
    throw std::invalid_argument(fmt::format("storage expects bf16 or f32, got '{}'", storage));
  r.bf16 = storage == "bf16";
  r.arch = o.arch ? o.arch : "auto";
  if (r.arch != "auto" && r.arch != "sm_90a" && r.arch != "sm_80")
    throw std::invalid_argument(fmt::format("arch expects auto, sm_90a or sm_80, got '{}'", r.arch));
  if (o.num_shapes < 0 || (o.num_shapes > 0 && !o.shapes)) throw std::invalid_argument("num_shapes without shapes");
  if (o.num_shapes > 0) {
    r.shapes.emplace();
    for (int i = 0; i < o.num_shapes; ++i) {
      const llmc_shape& s = o.shapes[i];
      if (!s.input || s.rank < 0 || (s.rank > 0 && !s.dims)) throw std::invalid_argument(fmt::format("shape {} is malformed", i));
      r.shapes->push_back({s.input, std::vector<int64_t>(s.dims, s.dims + s.rank)});
    }
  }
  return r;
}

llmc_status describe(const std::vector<capi::ValueDescription>& values, const std::vector<std::vector<const char*>>& axes,
                     int i, llmc_value* out, const char* what) {
  if (!out) return fail(LLMC_ERROR_USAGE, "llmc_value is null");
  if (i < 0 || static_cast<size_t>(i) >= values.size())
    return fail(LLMC_ERROR_USAGE, fmt::format("no {} {} (the module has {})", what, i, values.size()));
  const capi::ValueDescription& v = values[static_cast<size_t>(i)];
  *out = {v.name.c_str(), v.dtype.c_str(), static_cast<int>(v.shape.size()), v.shape.data(),
          axes[static_cast<size_t>(i)].data(), v.bytes};
  return LLMC_OK;
}

}  // namespace

extern "C" {

const char* llmc_last_error(void) { return lastError.c_str(); }

int llmc_api_version(void) { return LLMC_API_VERSION; }

llmc_status llmc_compile(const llmc_compile_options* options, llmc_module** module) {
  if (!options || !module) return fail(LLMC_ERROR_USAGE, "llmc_compile: options and module must not be null");
  *module = nullptr;
  return guarded([&] {
    std::shared_ptr<capi::CompiledModule> compiled;
    const capi::CompileRequest request = requestFrom(*options);
    capi::runWithLargeStack([&] { compiled = capi::compileModule(request); });
    std::unique_ptr<llmc_module> m = wrap(compiled, compiled->forward.get());
    if (compiled->backward) m->backward = wrap(compiled, compiled->backward.get());
    *module = m.release();
  });
}

llmc_status llmc_entry_inputs(const char* path, const char* entry, const char** names) {
  if (!path || !names) return fail(LLMC_ERROR_USAGE, "llmc_entry_inputs: path and names must not be null");
  thread_local std::string text;
  return guarded([&] {
    const capi::EntrySignature s = capi::readEntrySignature(path, entry ? entry : "");
    text = s.name + ":";
    for (size_t i = 0; i < s.inputs.size(); ++i) text += (i ? "," : "") + s.inputs[i].name;
    *names = text.c_str();
  });
}

void llmc_module_free(llmc_module* module) { delete module; }

llmc_module* llmc_module_backward(const llmc_module* module) { return module ? module->backward.get() : nullptr; }

const char* llmc_module_entry(const llmc_module* module) { return module ? module->owner->entry.c_str() : ""; }

const char* llmc_module_arch(const llmc_module* module) { return module ? module->owner->arch.c_str() : ""; }

int llmc_module_num_inputs(const llmc_module* module) {
  return module ? static_cast<int>(module->program->inputs().size()) : 0;
}

int llmc_module_num_outputs(const llmc_module* module) {
  return module ? static_cast<int>(module->program->outputs().size()) : 0;
}

llmc_status llmc_module_input(const llmc_module* module, int i, llmc_value* value) {
  if (!module) return fail(LLMC_ERROR_USAGE, "module is null");
  return describe(module->program->inputs(), module->inputAxes, i, value, "input");
}

llmc_status llmc_module_output(const llmc_module* module, int i, llmc_value* value) {
  if (!module) return fail(LLMC_ERROR_USAGE, "module is null");
  return describe(module->program->outputs(), module->outputAxes, i, value, "output");
}

int64_t llmc_module_workspace_bytes(const llmc_module* module) { return module ? module->program->workspaceBytes() : 0; }

int llmc_module_num_launches(const llmc_module* module) {
  return module ? static_cast<int>(module->program->launches()) : 0;
}

llmc_status llmc_module_ptx(const llmc_module* module, const char** ptx) {
  if (!module || !ptx) return fail(LLMC_ERROR_USAGE, "module and ptx must not be null");
  llmc_module* m = const_cast<llmc_module*>(module);  // the text is made once, on first ask
  return guarded([&] {
    if (m->ptx.empty()) m->ptx = m->program->ptx();
    *ptx = m->ptx.c_str();
  });
}

llmc_status llmc_module_run(llmc_module* module, int device, const void* const* inputs, void* const* outputs,
                            void* workspace, size_t workspace_bytes, void* stream) {
  if (!module) return fail(LLMC_ERROR_USAGE, "module is null");
  if ((!inputs && !module->program->inputs().empty()) || (!outputs && !module->program->outputs().empty()))
    return fail(LLMC_ERROR_USAGE, "inputs and outputs must not be null");
  if (device < 0) return fail(LLMC_ERROR_USAGE, fmt::format("no GPU numbered {}", device));
  return guarded([&] {
    module->program->run({.device = device, .inputs = inputs, .outputs = outputs, .workspace = workspace,
                          .workspaceBytes = workspace_bytes, .stream = stream});
  });
}

}  // extern "C"
