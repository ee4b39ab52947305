// stream_wgmma.cuh's product over the block's rows on the GPU (sm_90a): O[t][d] = sum over the
// block's 64 rows r of W[r][t] * R[r][d], W the weights in registers in the mma C layout
// (store_weight_tile), R a swizzled rows tile, the wgmma reading both MN-major
// (warpgroup_row_product); for kD = 64 and 128 channels, checked against the CPU. Then add_f32x2:
// four blocks each add their O twice into a zeroed array, which must end at 8 · O.
//
// W and R are uniform in [-1, 1], rounded to bf16 as the kernel does (W by weight_fragments, R on
// the host); the reference sums the rounded products in double. The tolerance: the largest error
// at most 1e-2 of the largest |O| (fp32 sums of 64 exact bf16 products are far closer; a wrong
// layout is off by the order of |O| itself). Output is poisoned with NaN first. Exits 77 (ctest:
// skipped) when there is no driver, no GPU, or a GPU other than sm_90 (wgmma is sm_90a's).
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "cuda_context.h"
#include "device_buffer.h"
#include "jit.h"
#include "loaded_kernels.h"
#include "stream_row_product_kernels.h"

namespace cuda = llmc::cuda;
using llmc::testing::rowProductKernelName;
using llmc::testing::rowProductKernelSource;

namespace {

constexpr int kRows = 64, kPositions = 64;

struct Checks {
  int failed = 0;
  void expect(bool ok, const std::string& what) {
    fmt::print("{} {}\n", ok ? "ok  " : "FAIL", what);
    if (!ok) ++failed;
  }
};

// Round to nearest even, as __floats2bfloat162_rn (no NaN or infinity here).
uint16_t toBf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
float fromBf16(uint16_t b) {
  const uint32_t u = uint32_t(b) << 16;
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

struct Problem {
  int kD;
  std::vector<float> w;           // W[r][t], f32 (the kernel rounds it)
  std::vector<uint16_t> rows;     // R[r][d], bf16 bits
  std::vector<double> reference;  // O[t][d]
};

Problem makeProblem(int kD, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  Problem p{.kD = kD,
            .w = std::vector<float>(kRows * kPositions),
            .rows = std::vector<uint16_t>(kRows * kD),
            .reference = std::vector<double>(kPositions * kD, 0.0)};
  for (float& x : p.w) x = uniform(rng);
  for (uint16_t& x : p.rows) x = toBf16(uniform(rng));
  for (int t = 0; t < kPositions; ++t)
    for (int d = 0; d < kD; ++d) {
      double sum = 0;
      for (int r = 0; r < kRows; ++r)
        sum += double(fromBf16(toBf16(p.w[r * kPositions + t]))) * double(fromBf16(p.rows[r * kD + d]));
      p.reference[t * kD + d] = sum;
    }
  return p;
}

// Runs kernel `name` on `blocks` blocks over `p` into an array first filled with `fill`, and checks
// out = scale · O. Prints the first wrong entries when there are any.
void check(cuda::Kernel& kernel, const cuda::Context& context, const Problem& p, unsigned blocks, unsigned char fill,
           double scale, const std::string& what, Checks& checks) {
  const int n = kPositions * p.kD;
  cuda::DeviceBuffer dw(p.w.size() * sizeof(float)), drows(p.rows.size() * sizeof(uint16_t)), dout(n * sizeof(float));
  dw.upload(std::span<const float>(p.w));
  drows.upload(std::span<const uint16_t>(p.rows));
  dout.fillBytes(fill);
  kernel({.grid = {blocks}, .block = {128}}, dw.address(), drows.address(), dout.address());
  context.synchronize();
  std::vector<float> out(n);
  dout.download(std::span<float>(out));

  double largest = 0, error = 0;
  for (int i = 0; i < n; ++i) largest = std::max(largest, std::abs(scale * p.reference[i]));
  const double tolerance = 1e-2 * largest;
  int wrong = 0;
  for (int i = 0; i < n; ++i) {
    const double e = std::isnan(out[i]) ? INFINITY : std::abs(out[i] - scale * p.reference[i]);
    error = std::max(error, e);
    if (e > tolerance && ++wrong <= 8)
      fmt::print("     O[t {}][d {}]: {} against {}\n", i / p.kD, i % p.kD, out[i], scale * p.reference[i]);
  }
  checks.expect(wrong == 0, fmt::format("{}: largest error {:.2e} of the largest |O| {:.3g} (tolerance 1e-2), {} of {} "
                                        "entries past it",
                                        what, error / largest, largest, wrong, n));
}

}  // namespace

int main() {
  try {
    const std::optional<cuda::Context> context = cuda::contextOrSkip();
    if (!context) return 77;
    if (context->computeCapability() != 90) {
      // wgmma is sm_90a's alone: neither its CUBIN nor its PTX runs on another architecture.
      fmt::print("skipped: {} is compute capability {}, not 9.0 (wgmma, sm_90a)\n", context->name(),
                 context->computeCapability());
      return 77;
    }
    fmt::print("GPU 0: {}, compiling for sm_90a\n", context->name());
    Checks checks;

    std::vector<cuda::KernelSource> sources;
    for (const int kD : {64, 128})
      for (const bool add : {false, true})
        sources.push_back(
            {.name = rowProductKernelName(kD, add), .source = rowProductKernelSource(kD, add), .arch = "sm_90a"});
    const cuda::JitResult compiled = cuda::compileKernels(sources, nullptr);
    fmt::print("{}\n", compiled.summary.describe());
    cuda::LoadedKernels kernels(compiled.kernels);

    std::mt19937 rng(std::random_device{}());
    for (const int kD : {64, 128}) {
      const Problem p = makeProblem(kD, rng);
      check(kernels[rowProductKernelName(kD, false)], *context, p, 1, 0xFF, 1.0,
            fmt::format("kD {}: O = Wᵀ·R stored (wgmma m64n{}k16, both MN-major)", kD, kD), checks);
      check(kernels[rowProductKernelName(kD, true)], *context, p, 4, 0, 8.0,
            fmt::format("kD {}: 4 blocks add O twice with add_f32x2, 8·O", kD), checks);
    }

    fmt::print("{}\n", checks.failed ? fmt::format("{} checks FAILED", checks.failed) : "all checks passed");
    return checks.failed ? 1 : 0;
  } catch (const std::exception& error) {
    fmt::print("error: {}\n", error.what());
    return 1;
  }
}
