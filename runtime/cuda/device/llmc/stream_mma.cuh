// llmc device library: warp-level tensor-core steps of a streamed kernel (sm_80 and later).
//
// A stream kernel whose per-position values come from short contractions of stored operands
// (attention's scores q·k over a head's channels) and whose accumulators are contractions along
// the stream axis with another stored operand (attention's p·v) runs them as two chained
// mma.sync products per block tile, as FlashAttention-2 does:
//
//   for each tile of 64 stream positions c:
//     S[16 x 64]  = A[16 rows x D] · B[64 c x D]ᵀ          warp_scores    (per warp, 16 rows)
//     P           = the compiler's elementwise work on S     (registers, in the mma C layout)
//     O[16 x D'] += P[16 x 64] · V[64 c x D']                warp_accumulate (P stays in registers:
//                                                             the C layout of two n8 tiles is the A
//                                                             layout of one k16 step)
//
// The generated kernel owns the loop, the elementwise work and the accumulators; this header
// only holds the steps whose fragment layouts must agree. Tiles live in shared memory as the
// GEMM tiles do (gemm_common.cuh, swizzled_offset): [64 outer][kD inner], kD a multiple of 64,
// zero-filled past the operand's extent, loaded with sm80::detail::load_tile_async.
//
// Fragment layout (mma.m16n8k16 C): lane l holds rows l/4 and l/4 + 8 of the warp's 16, columns
// 8j + 2(l%4) + {0, 1} of n-tile j: acc[j][2h + e] is (row l/4 + 8h, column 8j + 2(l%4) + e).
#pragma once

#include "llmc/gemm_sm80.cuh"

namespace llmc::stream {

constexpr int kRowsPerWarp = 16;
constexpr int kTileColumns = 64;  // stream positions per tile
constexpr int kColumnFrags = kTileColumns / 8;

// The warp's A fragments for all of kD (loaded once: A does not move along the stream).
template <int kD>
__device__ inline void load_row_fragments(unsigned (&fa)[kD / 16][4], unsigned tile_a, int warp_row0) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
    sm80::detail::ldmatrix_x4(fa[kk], tile_a + 2 * swizzled_offset<64>(warp_row0 + (lane & 15), kk * 16 + (lane >> 4) * 8));
}

// s = A·Bᵀ for the warp's 16 rows and the tile's 64 columns; B stored [column][k] (K-major).
template <int kD>
__device__ inline void warp_scores(float (&s)[kColumnFrags][4], const unsigned (&fa)[kD / 16][4], unsigned tile_b) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kColumnFrags; ++j)
#pragma unroll
    for (int r = 0; r < 4; ++r) s[j][r] = 0.f;
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk)
#pragma unroll
    for (int j = 0; j < kColumnFrags / 2; ++j) {
      unsigned fb[4];
      sm80::detail::ldmatrix_x4(fb, tile_b + 2 * swizzled_offset<64>(j * 16 + (lane & 7) + (lane >> 4) * 8,
                                                                      kk * 16 + ((lane >> 3) & 1) * 8));
      sm80::detail::mma_bf16_16816(s[2 * j], fa[kk], fb[0], fb[1]);
      sm80::detail::mma_bf16_16816(s[2 * j + 1], fa[kk], fb[2], fb[3]);
    }
}

__device__ inline unsigned pack_bf16x2(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<unsigned*>(&v);
}

// The A fragments (one per k16 step along the tile's columns) of a weight tile held in the C
// layout, rounded to bf16.
__device__ inline void weight_fragments(unsigned (&fp)[kColumnFrags / 2][4], const float (&w)[kColumnFrags][4]) {
#pragma unroll
  for (int kc = 0; kc < kColumnFrags / 2; ++kc) {
    fp[kc][0] = pack_bf16x2(w[2 * kc][0], w[2 * kc][1]);
    fp[kc][1] = pack_bf16x2(w[2 * kc][2], w[2 * kc][3]);
    fp[kc][2] = pack_bf16x2(w[2 * kc + 1][0], w[2 * kc + 1][1]);
    fp[kc][3] = pack_bf16x2(w[2 * kc + 1][2], w[2 * kc + 1][3]);
  }
}

// o += W·V for the warp's 16 rows; V stored [column][kD] (the stream axis outer, so it is read
// transposed: contiguous along the output's channels).
template <int kD>
__device__ inline void warp_accumulate(float (&o)[kD / 8][4], const unsigned (&fp)[kColumnFrags / 2][4],
                                       unsigned tile_v) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int kc = 0; kc < kColumnFrags / 2; ++kc)
#pragma unroll
    for (int n = 0; n < kD / 16; ++n) {
      unsigned fb[4];
      sm80::detail::ldmatrix_x4_trans(fb, tile_v + 2 * swizzled_offset<64>(kc * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                                          n * 16 + (lane >> 4) * 8));
      sm80::detail::mma_bf16_16816(o[2 * n], fp[kc], fb[0], fb[1]);
      sm80::detail::mma_bf16_16816(o[2 * n + 1], fp[kc], fb[2], fb[3]);
    }
}

// Reductions across the four lanes that share a row.
__device__ inline float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ inline float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace llmc::stream
