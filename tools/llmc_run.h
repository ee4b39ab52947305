// llmc-run's two halves: the command line, the diagram and its inputs
// (llmc_run.cpp, no CUDA), and the run on GPU 0 (llmc_run_gpu.cpp, built with
// the CUDA toolkit; llmc_run_gpu_absent.cpp without it, which sees no GPU
// and says why, so that llmc-run still checks a diagram and its inputs).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "driver/pipeline.h"
#include "planning/cost_model.h"
#include "planning/target.h"
#include "tensor.h"

namespace llmc_run {

constexpr int kCheckFailed = 1, kUsageError = 2, kInputError = 3, kInternalError = 4, kNoGpu = 77;

// Prints the message and the pointer to --help; exits with kUsageError.
[[noreturn]] void usageError(const std::string& message);

// What the command line asks for.
struct Invocation {
  llmc::PipelineOptions options;  // path, entry, sizes, grad
  std::string arch = "auto", sizesText;
  bool bf16 = true, check = false, bench = false;
  bool quiet = false;  // --quiet: no informational lines
  int reps = 10;
  bool repsGiven = false;
  std::string outPath;
  std::map<std::string, std::string> inputFiles;  // input name -> .npy path
  uint64_t seed = 1;
};

// GPU 0's context.
struct Gpu;

// GPU 0, or null with `missing` saying why there is none.
std::shared_ptr<Gpu> openGpu(std::string& missing);
int gpuComputeCapability(const Gpu& gpu);
std::string gpuName(const Gpu& gpu);  // as the driver names it: "NVIDIA H100 80GB HBM3"

// Plans `graph` for `arch`, compiles and runs it on the GPU with `inputs`,
// then --check or --bench; the exit status. Errors of NVRTC or the GPU are
// reported here (kInternalError); others are thrown.
int runOnGpu(Gpu& gpu, const Invocation& in, const std::string& arch, const llmc::Target& target,
             const llmc::CostOptions& cost, const llmc::Graph& graph,
             const std::map<std::string, llmc::HostTensor>& inputs);

}  // namespace llmc_run
