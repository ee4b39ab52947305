// NVRTC compiles kernels for each architecture llmc targets (no GPU needed),
// with the tensor-core instructions it emits, and refuses a bad kernel with
// the offending source line quoted.
#include "nvrtc_compiler.h"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <string>

using llmc::cuda::compileWithNvrtc;
using llmc::cuda::KernelCompileError;
using llmc::cuda::KernelSource;
using Catch::Matchers::Contains;

namespace {

const std::string kScale = R"(
extern "C" __global__ void scale(float* x, float a, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= a;
}
)";

// One m16n8k16 tensor-core product per warp, bf16 in and fp32 out, as
// llmc's Ampere kernels issue it.
const std::string kMmaBf16 = R"(
extern "C" __global__ void mma_bf16(const unsigned* a, const unsigned* b, float* c) {
  const int lane = threadIdx.x;
  unsigned a0 = a[4 * lane], a1 = a[4 * lane + 1], a2 = a[4 * lane + 2], a3 = a[4 * lane + 3];
  unsigned b0 = b[2 * lane], b1 = b[2 * lane + 1];
  float d0 = 0, d1 = 0, d2 = 0, d3 = 0;
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3)
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
  c[4 * lane] = d0; c[4 * lane + 1] = d1; c[4 * lane + 2] = d2; c[4 * lane + 3] = d3;
}
)";

}  // namespace

TEST_CASE("NVRTC compiles a kernel to PTX and CUBIN for sm_80, sm_90 and sm_90a", "[nvrtc]") {
  for (const std::string arch : {"sm_80", "sm_90", "sm_90a"}) {
    INFO(arch);
    const auto compiled = compileWithNvrtc({.name = "scale", .source = kScale, .arch = arch});
    CHECK(compiled.name == "scale");
    CHECK(compiled.arch == arch);
    CHECK_THAT(compiled.ptx, Contains(".target " + arch + "\n"));
    CHECK_THAT(compiled.ptx, Contains(".entry scale("));
    CHECK(compiled.ptx.find('\0') == std::string::npos);
    // A CUBIN is an ELF file.
    REQUIRE(compiled.cubin.size() > 4);
    CHECK(compiled.cubin.substr(0, 4) == "\x7f" "ELF");
  }
}

TEST_CASE("NVRTC gives PTX alone for a virtual architecture", "[nvrtc]") {
  const auto compiled = compileWithNvrtc({.name = "scale", .source = kScale, .arch = "compute_90a"});
  CHECK_THAT(compiled.ptx, Contains(".target sm_90a"));
  CHECK(compiled.cubin.empty());
}

TEST_CASE("NVRTC compiles inline mma.sync m16n8k16 bf16 for sm_80", "[nvrtc]") {
  const auto compiled = compileWithNvrtc({.name = "mma_bf16", .source = kMmaBf16, .arch = "sm_80"});
  CHECK_THAT(compiled.ptx, Contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"));
  CHECK_FALSE(compiled.cubin.empty());
}

TEST_CASE("kernels include llmc's device headers and CCCL", "[nvrtc]") {
  const std::string source = R"(
#include <vector_access.h>
#include <cuda/std/cstdint>
extern "C" __global__ void copy16(const float* in, float* out) {
  const cuda::std::int64_t i = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
  llmc::device::store16(out + i, llmc::device::load16(in + i));
}
)";
  const auto compiled = compileWithNvrtc({.name = "copy16", .source = source, .arch = "sm_90a"});
  CHECK_THAT(compiled.ptx, Contains("ld.global.v4."));
}

TEST_CASE("the device headers' folder comes from LLMC_DEVICE_INCLUDE when set", "[nvrtc]") {
  setenv("LLMC_DEVICE_INCLUDE", "/nonexistent/llmc/device", 1);
  CHECK_THROWS_WITH(llmc::cuda::deviceIncludeDirectory(), Contains("LLMC_DEVICE_INCLUDE=/nonexistent/llmc/device"));
  unsetenv("LLMC_DEVICE_INCLUDE");
  CHECK(std::filesystem::exists(llmc::cuda::deviceIncludeDirectory() / "vector_access.h"));
}

TEST_CASE("a kernel NVRTC refuses is named, with the bad line quoted", "[nvrtc]") {
  const std::string source =
      "extern \"C\" __global__ void broken(float* y, const float* x) {\n"
      "  const int i = threadIdx.x;\n"
      "  y[i] = 2.0f * x[i] +;\n"
      "}\n";
  try {
    compileWithNvrtc({.name = "broken", .source = source, .arch = "sm_90a"});
    FAIL("the kernel compiled");
  } catch (const KernelCompileError& error) {
    CHECK(error.kernel() == "broken");
    const std::string message = error.what();
    CHECK_THAT(message, Contains("kernel broken: NVRTC could not compile it for sm_90a"));
    CHECK_THAT(message, Contains("kernel broken: line 3: error: expected an expression\n"
                                 "  3 |   y[i] = 2.0f * x[i] +;\n"));
  }
}

TEST_CASE("an undeclared name is reported on its own line", "[nvrtc]") {
  const std::string source =
      "extern \"C\" __global__ void typo(float* y) {\n"
      "  y[threadIdx.x] = undeclared_value;\n"
      "}\n";
  CHECK_THROWS_MATCHES(compileWithNvrtc({.name = "typo", .source = source, .arch = "sm_80"}), KernelCompileError,
                       Catch::Matchers::Predicate<KernelCompileError>(
                           [](const KernelCompileError& e) {
                             const std::string m = e.what();
                             return m.find("kernel typo: line 2: error: identifier \"undeclared_value\" is undefined") !=
                                        std::string::npos &&
                                    m.find("  2 |   y[threadIdx.x] = undeclared_value;") != std::string::npos;
                           },
                           "names line 2 and quotes it"));
}

TEST_CASE("an architecture NVRTC does not know is refused before compiling", "[nvrtc]") {
  CHECK_THROWS_WITH(compileWithNvrtc({.name = "scale", .source = kScale, .arch = "hopper"}),
                    Contains("'hopper' is not an architecture"));
}
