// stream_wgmma.cuh's product over the block's rows compiles for sm_90a (no GPU needed): the test
// kernels of stream_row_product_gpu_test, NVRTC's PTX holding the wgmma the layouts ask for (both
// operands from shared memory and MN-major: the transpose immediates 1, 1), the proxy fence after
// the weights' stores, and the vector reductions; ptxas makes a CUBIN of it.
#include <catch2/catch.hpp>
#include <regex>
#include <string>

#include "nvrtc_compiler.h"
#include "stream_row_product_kernels.h"

using Catch::Matchers::Contains;
using llmc::cuda::compileWithNvrtc;
using llmc::testing::rowProductKernelName;
using llmc::testing::rowProductKernelSource;

namespace {

size_t count(const std::string& text, const std::regex& pattern) {
  return std::distance(std::sregex_iterator(text.begin(), text.end(), pattern), std::sregex_iterator());
}

}  // namespace

TEST_CASE("the product over the block's rows compiles for sm_90a to four MN-major wgmma",
          "[nvrtc][stream_row_product]") {
  for (const int kD : {64, 128})
    for (const bool add : {false, true}) {
      const std::string name = rowProductKernelName(kD, add);
      INFO(name);
      const auto compiled =
          compileWithNvrtc({.name = name, .source = rowProductKernelSource(kD, add), .arch = "sm_90a"});
      CHECK_THAT(compiled.ptx, Contains(".entry " + name + "("));
      // wgmma.mma_async...m64n<kD>k16.f32.bf16.bf16 {d}, desc_a, desc_b, p, scale-a 1, scale-b 1, tnspA 1, tnspB 1:
      // the 4 k16 slices over the 64 rows, unrolled.
      const std::regex wgmma(
          "wgmma\\.mma_async\\.sync\\.aligned\\.m64n" + std::to_string(kD) +
          "k16\\.f32\\.bf16\\.bf16\\s*\\{[^}]*\\},\\s*%rd\\d+,\\s*%rd\\d+,\\s*p,\\s*1,\\s*1,\\s*1,\\s*1;");
      CHECK(count(compiled.ptx, wgmma) == 4);
      CHECK(count(compiled.ptx, std::regex("wgmma\\.mma_async")) == 4);
      CHECK(count(compiled.ptx, std::regex("wgmma\\.commit_group")) == 1);
      CHECK(count(compiled.ptx, std::regex("wgmma\\.wait_group\\.sync\\.aligned 0")) == 1);
      // The weights' 16 stores a thread, then the fence (and the one after the rows' fill).
      CHECK(count(compiled.ptx, std::regex("st\\.shared\\.b32")) == 16);
      CHECK(count(compiled.ptx, std::regex("fence\\.proxy\\.async\\.shared::cta")) == 2);
      // The add kernel: two reductions a pair of its kD / 2 accumulators.
      CHECK(count(compiled.ptx, std::regex("red\\.global\\.add\\.v2\\.f32")) == size_t(add ? kD / 2 : 0));
      CHECK_FALSE(compiled.cubin.empty());
    }
}
