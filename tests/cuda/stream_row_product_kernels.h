// The kernels that test stream_wgmma.cuh's product over the block's rows (store_weight_tile,
// warpgroup_row_product, add_f32x2), shared by the NVRTC test (llmc_cuda_tests, they compile for
// sm_90a) and the GPU test (stream_row_product_gpu_test, they compute the right thing).
//
// One block of 128 threads, one warpgroup: it fills the rows tile R [64 rows][kD] bf16 from
// rows[r * kD + d] (swizzled, plain stores), takes its weights W[r][t] from w[r * 64 + t] (f32) in
// the mma C layout, and computes O[t][d] = sum over r of bf16(W[r][t]) * R[r][d] as a step of a
// streamed kernel would. The store kernel writes out[t * kD + d] = O[t][d]; the add kernel adds O
// twice into out with add_f32x2 (every block of the grid does: out ends at 2 · blocks · O).
#pragma once

#include <fmt/format.h>

#include <string>

namespace llmc::testing {

inline const char* const kRowProductCommon = R"(
#include <llmc/stream_wgmma.cuh>

namespace {

template <int kD, bool kAdd>
__device__ void row_product(const float* __restrict__ w, const llmc::bf16* __restrict__ rows, float* out) {
  namespace st = llmc::stream;
  constexpr int kRowsBytes = 64 * kD * 2;
  __shared__ __align__(1024) unsigned char smem[1024 + kRowsBytes + 64 * 64 * 2];
  const unsigned raw = llmc::smem_addr(smem);
  const unsigned base = (raw + 1023) & ~1023u;  // the swizzle period
  llmc::bf16* const rows_tile = reinterpret_cast<llmc::bf16*>(smem + (base - raw));
  const unsigned tile_rows = base, tile_w = base + kRowsBytes;

  // R, swizzled by plain (generic-proxy) stores, then fenced over to the async proxy.
  for (int i = threadIdx.x; i < 64 * kD; i += blockDim.x)
    rows_tile[llmc::swizzled_offset<64>(i / kD, i % kD)] = rows[i];
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  __syncthreads();

  // The weights in the C layout: w[j][i] is row 16 warp + lane / 4 + 8 (i / 2), position
  // 8 j + 2 (lane % 4) + i % 2.
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float weights[st::kColumnFrags][4];
  for (int j = 0; j < st::kColumnFrags; ++j)
    for (int i = 0; i < 4; ++i)
      weights[j][i] = w[(16 * warp + lane / 4 + 8 * (i / 2)) * 64 + 8 * j + 2 * (lane % 4) + i % 2];
  unsigned fp[st::kColumnFrags / 2][4];
  st::weight_fragments(fp, weights);
  st::store_weight_tile(tile_w, fp);
  __syncthreads();

  float o[kD / 8][4];
  st::warpgroup_row_product<kD>(o, tile_w, tile_rows);
  st::warpgroup_wait(o);

  // o[n][i]: position 16 warp + lane / 4 + 8 (i / 2), channel 8 n + 2 (lane % 4) + i % 2.
  for (int n = 0; n < kD / 8; ++n)
    for (int h = 0; h < 2; ++h) {
      float* const p = out + (16 * warp + lane / 4 + 8 * h) * kD + 8 * n + 2 * (lane % 4);
      if (kAdd) {
        st::add_f32x2(p, o[n][2 * h], o[n][2 * h + 1]);
        st::add_f32x2(p, o[n][2 * h], o[n][2 * h + 1]);
      } else {
        p[0] = o[n][2 * h];
        p[1] = o[n][2 * h + 1];
      }
    }
}

}  // namespace
)";

// The name of the kernel for kD channels that stores O (add: adds it twice).
inline std::string rowProductKernelName(int kD, bool add) {
  return fmt::format("row_product_{}_{}", add ? "add" : "store", kD);
}

// Its source: the common part and its own entry point (one a source, so the JIT compiles each).
inline std::string rowProductKernelSource(int kD, bool add) {
  return std::string(kRowProductCommon) +
         fmt::format(
             "extern \"C\" __global__ void __launch_bounds__(128) {}(const float* w, const llmc::bf16* rows, "
             "float* out) {{\n  row_product<{}, {}>(w, rows, out);\n}}\n",
             rowProductKernelName(kD, add), kD, add ? "true" : "false");
}

}  // namespace llmc::testing
