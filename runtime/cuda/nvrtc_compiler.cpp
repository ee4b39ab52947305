#include "nvrtc_compiler.h"

#include <fmt/format.h>
#include <nvrtc.h>

#include <cstdlib>
#include <regex>
#include <sstream>

#include "data_folder.h"

namespace llmc::cuda {

namespace fs = std::filesystem;

namespace {

// Frees the program however compileWithNvrtc leaves.
class NvrtcProgram {
 public:
  NvrtcProgram(const std::string& source, const std::string& fileName) {
    const nvrtcResult result = nvrtcCreateProgram(&program_, source.c_str(), fileName.c_str(), 0, nullptr, nullptr);
    if (result != NVRTC_SUCCESS)
      throw std::runtime_error(fmt::format("nvrtcCreateProgram({}): {}", fileName, nvrtcGetErrorString(result)));
  }
  ~NvrtcProgram() { nvrtcDestroyProgram(&program_); }
  NvrtcProgram(const NvrtcProgram&) = delete;
  NvrtcProgram& operator=(const NvrtcProgram&) = delete;
  nvrtcProgram get() const { return program_; }

 private:
  nvrtcProgram program_ = nullptr;
};

std::vector<std::string> splitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// NVRTC's log with each message that points into the kernel's own source
// ("saxpy.cu(3): error: ...") rewritten as "line 3: error: ..." and followed
// by that line of the source. Messages about headers stay as NVRTC wrote them.
std::string explainLog(const KernelSource& kernel, const std::string& fileName, const std::string& log) {
  const std::vector<std::string> sourceLines = splitLines(kernel.source);
  const std::regex located(R"(^(.*)\((\d+)\): (.*)$)");
  std::string explained;
  for (const std::string& line : splitLines(log)) {
    if (line.empty()) continue;
    std::smatch match;
    if (std::regex_match(line, match, located) && match[1] == fileName) {
      const size_t number = std::stoul(match[2]);
      explained += fmt::format("kernel {}: line {}: {}\n", kernel.name, number, match[3].str());
      if (number >= 1 && number <= sourceLines.size())
        explained += fmt::format("  {} | {}\n", number, sourceLines[number - 1]);
    } else {
      explained += fmt::format("kernel {}: {}\n", kernel.name, line);
    }
  }
  return explained;
}

std::string programLog(nvrtcProgram program) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) return "";
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return "";
  log.resize(size - 1);  // the terminating NUL
  return log;
}

// The compiled program's PTX or CUBIN, as NVRTC hands them out: a size, then the bytes.
template <typename GetSize, typename Get>
std::string programOutput(const KernelSource& kernel, nvrtcProgram program, GetSize getSize, Get get,
                          const char* what) {
  size_t size = 0;
  if (nvrtcResult r = getSize(program, &size); r != NVRTC_SUCCESS)
    throw KernelCompileError(kernel.name, fmt::format("kernel {}: getting the {}: {}", kernel.name, what, nvrtcGetErrorString(r)));
  std::string bytes(size, '\0');
  if (nvrtcResult r = get(program, bytes.data()); r != NVRTC_SUCCESS)
    throw KernelCompileError(kernel.name, fmt::format("kernel {}: getting the {}: {}", kernel.name, what, nvrtcGetErrorString(r)));
  return bytes;
}

}  // namespace

fs::path deviceIncludeDirectory() {
  return findDataFolder({"LLMC_DEVICE_INCLUDE", "device", LLMC_DEVICE_INCLUDE_DIR, "runtime/cuda/device"});
}

fs::path cudaIncludeDirectory() {
  const fs::path builtWith = LLMC_CUDA_INCLUDE_DIR;
  return fs::exists(builtWith / "cuda_runtime.h") ? builtWith : fs::path("/usr/local/cuda/include");
}

std::string nvrtcVersionString() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

std::vector<std::string> nvrtcOptions(const KernelSource& kernel) {
  const fs::path cuda = cudaIncludeDirectory();
  std::vector<std::string> options = {
      "--gpu-architecture=" + kernel.arch,
      kKernelLanguageStandard,
      "--include-path=" + cuda.string(),
      "--include-path=" + (cuda / "cccl").string(),
      "--include-path=" + deviceIncludeDirectory().string(),
  };
  options.insert(options.end(), kernel.options.begin(), kernel.options.end());
  return options;
}

CompiledKernel compileWithNvrtc(const KernelSource& kernel) {
  static const std::regex validArch(R"((sm|compute)_\d+[af]?)");
  if (!std::regex_match(kernel.arch, validArch))
    throw std::invalid_argument(
        fmt::format("kernel {}: '{}' is not an architecture NVRTC knows (sm_80, sm_90, sm_90a, ...)", kernel.name, kernel.arch));

  const std::string fileName = kernel.name + ".cu";
  const NvrtcProgram program(kernel.source, fileName);
  const std::vector<std::string> options = nvrtcOptions(kernel);
  std::vector<const char*> optionPointers;
  for (const std::string& option : options) optionPointers.push_back(option.c_str());
  const nvrtcResult result =
      nvrtcCompileProgram(program.get(), static_cast<int>(optionPointers.size()), optionPointers.data());
  const std::string log = programLog(program.get());
  if (result != NVRTC_SUCCESS) {
    throw KernelCompileError(kernel.name, fmt::format("kernel {}: NVRTC could not compile it for {} ({})\n{}",
                                                      kernel.name, kernel.arch, nvrtcGetErrorString(result),
                                                      explainLog(kernel, fileName, log)));
  }

  CompiledKernel compiled{.name = kernel.name, .arch = kernel.arch, .log = log};
  compiled.ptx = programOutput(kernel, program.get(), nvrtcGetPTXSize, nvrtcGetPTX, "PTX");
  // NVRTC counts the PTX's terminating NUL in its size.
  while (!compiled.ptx.empty() && compiled.ptx.back() == '\0') compiled.ptx.pop_back();
  if (kernel.arch.starts_with("sm_"))
    compiled.cubin = programOutput(kernel, program.get(), nvrtcGetCUBINSize, nvrtcGetCUBIN, "CUBIN");
  return compiled;
}

}  // namespace llmc::cuda
