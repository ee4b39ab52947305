// The kernel that makes a fresh GPT-2 on the device (runtime/train/
// device_start.h) compiles with NVRTC for each architecture llmc targets, its
// counter-based generator shared with the host (no GPU needed; the values are
// checked against the host's on the GPU by device_start_gpu_test).
#include "device_start.h"

#include <catch2/catch.hpp>

TEST_CASE("the device's start kernel compiles with NVRTC for sm_80 and sm_90a", "[device_start][nvrtc]") {
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    INFO(arch);
    const llmc::cuda::CompiledKernel k = llmc::cuda::compileWithNvrtc(llmc::deviceStartSource(arch));
    CHECK(k.ptx.find("llmc_gpt2_start") != std::string::npos);
    CHECK(!k.cubin.empty());
  }
}
