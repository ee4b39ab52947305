// gpu_path.h in an llmc built without the CUDA toolkit: no GPU is seen, and
// asking for one says why and what to do. The CPU path is unaffected.
#include "gpu_path.h"

namespace llmc {

BuiltWithoutCuda::BuiltWithoutCuda(const std::string& what, const std::string& hint)
    : NoGpuError((what.empty() ? "" : what + ": ") +
                 "this llmc was built without the CUDA toolkit, which the GPU path needs: install it and rebuild "
                 "(CMake looks in /usr/local/cuda or CUDAToolkit_ROOT)" + (hint.empty() ? "" : "; " + hint)) {}

void requireGpuPath(const std::string& what) { throw BuiltWithoutCuda(what, "--device cpu trains on the CPU, in one process"); }

int gpusOnThisNode() { return 0; }

struct EarlyGpuContext::Making {};

EarlyGpuContext::EarlyGpuContext(int) {}
EarlyGpuContext::~EarlyGpuContext() = default;
bool EarlyGpuContext::ready() { return false; }

std::unique_ptr<DeviceTrainer> startGpuTrainer(const std::string&, const Gpt2Config&,
                                               const std::function<const Gpt2Weights&()>&, int64_t, int64_t,
                                               const GpuPathOptions&) {
  throw BuiltWithoutCuda("");
}

}  // namespace llmc
