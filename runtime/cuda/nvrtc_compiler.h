// NVRTC: one CUDA source compiled to PTX, and to a CUBIN for a real
// architecture, in-process. Needs the CUDA toolkit's libnvrtc, not a GPU.
#pragma once

#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

namespace llmc::cuda {

// One kernel's source, as the JIT compiles it. `name` names the kernel in
// messages and is, by convention, its extern "C" __global__ entry point.
struct KernelSource {
  std::string name = {};
  std::string source = {};
  std::string arch = {};                  // "sm_80", "sm_90", "sm_90a"; "compute_90a" gives PTX alone
  std::vector<std::string> options = {};  // NVRTC options beyond those nvrtcOptions() adds: "-lineinfo", "-DTILE=64"
  // What a launch passes it, in order (kernelSources: each tensor map's shape,
  // each pointer's type and access). Not compiled: the JIT shares one
  // compilation only between kernels whose signatures are equal too
  // (kernel_classes.h).
  std::string launchSignature = {};
};

struct CompiledKernel {
  std::string name = {}, arch = {};
  std::string ptx = {};    // NUL-free PTX text
  std::string cubin = {};  // empty where the arch is virtual (compute_XX)
  std::string log = {};    // NVRTC's warnings; empty when there were none
};

// NVRTC refused a source. The message starts "kernel NAME: ", holds NVRTC's log
// and quotes each source line the log points at:
//   kernel saxpy: line 3: error: expected a ";"
//     3 |   y[i] = a * x[i] + y[i]
class KernelCompileError : public std::runtime_error {
 public:
  KernelCompileError(std::string kernel, const std::string& message)
      : std::runtime_error(message), kernel_(std::move(kernel)) {}
  const std::string& kernel() const { return kernel_; }

 private:
  std::string kernel_;
};

// The C++ standard kernels are compiled with.
inline constexpr const char* kKernelLanguageStandard = "-std=c++20";

// llmc's device headers (runtime/cuda/device/): $LLMC_DEVICE_INCLUDE, else an
// installed share/llmc/device beside the executable, else the source tree
// llmc was built from, else runtime/cuda/device in a folder above the running
// executable (a copy of the repository elsewhere): common/data_folder.h.
// Throws std::runtime_error naming the places tried when none exists.
std::filesystem::path deviceIncludeDirectory();

// The CUDA toolkit's headers: those of the toolkit llmc was built with, else
// /usr/local/cuda/include.
std::filesystem::path cudaIncludeDirectory();

// NVRTC's version, "13.0".
std::string nvrtcVersionString();

// The options NVRTC gets for `kernel`: the architecture, the language
// standard, the include paths (CUDA, CCCL, llmc's device headers), then the
// kernel's own options.
std::vector<std::string> nvrtcOptions(const KernelSource& kernel);

// Compiles `kernel`. Throws KernelCompileError when NVRTC refuses it, and
// std::invalid_argument for an arch that is not sm_XX[a|f] or compute_XX[a|f].
CompiledKernel compileWithNvrtc(const KernelSource& kernel);

}  // namespace llmc::cuda
