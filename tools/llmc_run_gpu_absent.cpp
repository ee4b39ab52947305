// llmc-run's GPU half in an llmc built without the CUDA toolkit
// (tools/llmc_run.h): no GPU is seen, and the reason says what to do. The
// diagram and its inputs are still checked; llmc-run then exits with 77, its
// status for "no usable GPU", as on a machine without one.
#include "llmc_run.h"

#include <stdexcept>

namespace llmc_run {

struct Gpu {};

std::shared_ptr<Gpu> openGpu(std::string& missing) {
  missing = "this llmc was built without the CUDA toolkit, which llmc-run needs to compile and run kernels: install "
            "it and rebuild (CMake looks in /usr/local/cuda or CUDAToolkit_ROOT)";
  return nullptr;
}

int gpuComputeCapability(const Gpu&) { throw std::logic_error("llmc-run: no GPU in an llmc built without CUDA"); }
std::string gpuName(const Gpu&) { throw std::logic_error("llmc-run: no GPU in an llmc built without CUDA"); }

int runOnGpu(Gpu&, const Invocation&, const std::string&, const llmc::Target&, const llmc::CostOptions&,
             const llmc::Graph&, const std::map<std::string, llmc::HostTensor>&) {
  throw std::logic_error("llmc-run: no GPU in an llmc built without CUDA");
}

}  // namespace llmc_run
