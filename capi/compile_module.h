// A libllmc module: a diagram's entry compiled through the same pipeline as
// llmc-run (front end, back end, NVRTC through the shared kernel cache), with
// its backward where asked: the vector-Jacobian product (entry_wrapper.h),
// which recomputes what it needs of the forward from the inputs.
#pragma once

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "compiled_program.h"
#include "entry_wrapper.h"
#include "frontend/program.h"

namespace llmc::capi {

// The entry has `..` in an input and no shapes were given: its axes come
// from the caller's arrays.
class NeedsShapesError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

struct CompileRequest {
  std::string path, entry;  // entry empty: the last diagram of path
  SizeBindings sizes;
  bool grad = false;
  bool bf16 = true;          // storage: bf16, or f32
  std::string arch = "auto";  // sm_90a, sm_80, or auto
  std::optional<std::vector<InputShape>> shapes;
};

struct CompiledModule {
  std::string entry;  // the entry diagram's name
  std::string arch;   // planned and compiled for
  bool bf16 = true;
  std::unique_ptr<CompiledProgram> forward;
  // With grad: inputs are the forward's, then a seed per float output of the
  // forward (the gradient flowing into it, seedName(output)); outputs are
  // grad_NAME for each float input, in input order.
  std::unique_ptr<CompiledProgram> backward;
};

// The arch `auto` plans for: that of GPU 0 (sm_90a from Hopper on, sm_80
// before), sm_90a where there is no GPU (compiling needs none).
std::string resolveArch(const std::string& arch);

// Throws CompileError for errors in the diagrams (FILE:LINE:COL), ShapeError
// for shapes that do not fit, NeedsShapesError, std::invalid_argument for a
// bad request, KernelCompileError where NVRTC refuses llmc's code (a bug).
std::unique_ptr<CompiledModule> compileModule(const CompileRequest& request);

}  // namespace llmc::capi
