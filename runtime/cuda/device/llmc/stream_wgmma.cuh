// llmc device library: warpgroup tensor-core steps of a streamed kernel (sm_90a).
//
// The two chained products of stream_mma.cuh, issued by the block's one warpgroup (4 warps, 64
// rows) as wgmma instead of per warp as mma.sync:
//
//   S[64 x 64]  = A[64 rows x D] · B[64 c x D]ᵀ     warpgroup_scores:  wgmma m64n64k16, A and B
//                                                    (K-major) read by the tensor cores from their
//                                                    shared-memory tiles
//   O[64 x D'] += P[64 x 64] · V[64 c x D']          warpgroup_accumulate: wgmma m64nD'k16, A = the
//                                                    weights in registers, V (MN-major) from its tile
//
// and a third, a sum over the block's own rows rather than along the stream, for a backward whose
// gradient of a streamed operand sums over rows (attention's backward with the keys as rows and
// the queries streamed: dQ[t] = sum over the block's keys r of dS[r][t] K[r], FlashAttention-2/3's
// dQ in the dK/dV kernel, each block adding its part into an f32 dQ):
//
//   O[64 t x D'] = W[64 rows x 64 t]ᵀ · R[64 rows x D']  store_weight_tile + warpgroup_row_product:
//                                                    wgmma m64nD'k16 with M = the step's positions,
//                                                    K = the rows; the weights go through a tile
//                                                    (a register A operand holds M = rows, not t)
//
// The register layouts are those of mma.sync, warp w holding rows 16w..16w+15: wgmma's
// accumulator d[4j + r] is the mma.m16n8k16 C fragment acc[j][r], and its register A operand is
// the m16n8k16 A fragment (wgmma_bf16.cuh). So the generated kernel's elementwise work and
// weight_fragments() are the same for both issuers; the rows' fragments stay in shared memory.
//
// Tiles are the swizzled tiles of gemm_common.cuh ([64 outer][kD] in column blocks of 64, 128-byte
// rows, chunk ^ outer % 8), which is wgmma's 128B-swizzle canonical layout when the tile starts on
// a 1024-byte boundary. The steps issue and commit; the kernel issues all of a step's scores (or
// products), then waits once (warpgroup_wait), so the tensor cores run them back to back.
#pragma once

#include "llmc/gemm_sm90.cuh"
#include "llmc/stream_mma.cuh"

namespace llmc::stream {

namespace detail {
__device__ inline void warpgroup_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ inline void warpgroup_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
constexpr unsigned kColumnBlockBytes = kTileColumns * 128;  // 64 outer rows of 64 bf16
constexpr int kWarpgroupRows = 4 * kRowsPerWarp;            // the block's rows
}  // namespace detail

// Issues s = A·Bᵀ for the warpgroup's 64 rows and the tile's 64 columns, both operands read by the
// tensor cores from their tiles: A [64 rows][kD] and B [64 columns][kD] (both K-major).
template <int kD>
__device__ inline void warpgroup_scores(float (&s)[kColumnFrags][4], unsigned tile_a, unsigned tile_b) {
  float(&d)[4 * kColumnFrags] = reinterpret_cast<float(&)[4 * kColumnFrags]>(s);
  detail::warpgroup_fence();
#pragma unroll
  for (int kk = 0; kk < kD / 16; ++kk) {
    // k16 slice kk: column block kk / 4, then 32 bytes along the swizzled rows (the hardware applies
    // the xor to the final address).
    const unsigned slice = (kk / 4) * detail::kColumnBlockBytes + (kk % 4) * 32;
    sm90::wgmma_bf16<kTileColumns, 0, 0>(d, sm90::detail::smem_descriptor(tile_a + slice, 0),
                                          sm90::detail::smem_descriptor(tile_b + slice, 0), kk > 0);
  }
  detail::warpgroup_commit();
}

// Issues o += W·V for the warpgroup's 64 rows, W the step's weights in registers; V stored
// [column][kD] (MN-major for this product: the stream axis is its k, read 16 rows of 128 bytes a
// slice, column blocks of 64 channels apart).
template <int kD>
__device__ inline void warpgroup_accumulate(float (&o)[kD / 8][4], const unsigned (&fp)[kColumnFrags / 2][4],
                                            unsigned tile_v) {
  float(&d)[kD / 2] = reinterpret_cast<float(&)[kD / 2]>(o);
  detail::warpgroup_fence();
#pragma unroll
  for (int kc = 0; kc < kColumnFrags / 2; ++kc)
    sm90::wgmma_bf16_rs<kD, 1>(d, fp[kc], sm90::detail::smem_descriptor(tile_v + kc * 16 * 128, detail::kColumnBlockBytes), 1);
  detail::warpgroup_commit();
}

// ---- Products over the block's rows: O[t][d] = sum over the 64 rows r of W[r][t] * R[r][d], for
// the step's 64 positions t and the kD channels d of a rows tile R [64 rows][kD] (the tile the
// scores read as A). The weights are held in the C layout, rows down the warpgroup, so Wᵀ cannot be
// a register A operand (that would need t down the warps): they are stored to a tile and the
// tensor cores read both operands from shared memory. A step runs
//
//   weight_fragments(fp, w);                    // the step's weights, bf16 (stream_mma.cuh)
//   store_weight_tile(tile_w, fp);
//   __syncthreads();                            // every thread's part of the tile stored
//   warpgroup_row_product<kD>(o, tile_w, tile_rows);
//   warpgroup_wait(o);                          // before o is read and before tile_w is stored again
//
// then adds o into its home (a global f32 array, summed over the blocks of rows: add_f32x2).

// Stores the step's weights, packed as weight_fragments() leaves them, to tile_w: [64 rows r][64
// positions t] bf16, 1024-byte aligned, row r at r * 128 bytes with t's 16-byte chunk t / 8 at chunk
// (t / 8) ^ (r % 8) (the swizzled tile of gemm_common.cuh, one column block). Read with r as the k
// axis it is an MN-major operand (t contiguous). Each thread stores its 16 bf16 pairs with 32-bit
// stores: fp[kc][q] holds row 16w + l/4 + 8(q % 2), positions 16kc + 8(q / 2) + 2(l % 4) + {0, 1}.
// A store instruction's 32 lanes write 8 rows at chunks c ^ (l/4) and words l % 4 of them: 32
// distinct banks. The stores are the generic proxy's and the tensor cores read through the async
// proxy, so each thread fences them over to it; the caller then synchronises the block (the one
// warpgroup: __syncthreads) before warpgroup_row_product, which reads every thread's part, and
// waits for that product (warpgroup_wait) before the tile is stored again.
__device__ inline void store_weight_tile(unsigned tile, const unsigned (&fp)[kColumnFrags / 2][4]) {
  const int lane = threadIdx.x % 32, warp = (threadIdx.x / 32) % 4;
  const int quad = lane / 4;  // the row % 8 of every row the thread holds
#pragma unroll
  for (int kc = 0; kc < kColumnFrags / 2; ++kc)
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int row = 16 * warp + quad + 8 * (q % 2), chunk = 2 * kc + q / 2;
      const unsigned at = tile + row * 128 + ((chunk ^ quad) << 4) + 4 * (lane % 4);
      asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(at), "r"(fp[kc][q]) : "memory");
    }
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Issues o = Wᵀ·R for the step's 64 positions t and the kD channels d: wgmma m64n(kD)k16 with
// M = t, N = d and K = the block's 64 rows, four k16 slices, the first overwriting o. Both operands
// MN-major (TransA = TransB = 1), from their tiles: A = Wᵀ from tile_w (store_weight_tile's: t
// contiguous), B = R from tile_rows ([64 rows][kD], d contiguous, column blocks of 64 channels
// kColumnBlockBytes apart, the leading byte offset). The k16 slice kk of either is its rows
// 16kk..16kk+15: 16 rows of 128 bytes on, the two 8-row groups 1024 bytes apart (the descriptor's
// stride byte offset), as warpgroup_accumulate reads V and the GEMM an MN-major A.
// o[n][i] is the wgmma accumulator: thread (warp w, lane l) holds position t = 16w + l/4 + 8(i / 2),
// channel d = 8n + 2(l % 4) + i % 2. The caller waits for it with warpgroup_wait(o).
template <int kD>
__device__ inline void warpgroup_row_product(float (&o)[kD / 8][4], unsigned tile_w, unsigned tile_rows) {
  static_assert(kD % 64 == 0 && kD <= 256, "kD: 64, 128, 192 or 256 channels (one wgmma instruction)");
  float(&d)[kD / 2] = reinterpret_cast<float(&)[kD / 2]>(o);
  detail::warpgroup_fence();
#pragma unroll
  for (int kk = 0; kk < detail::kWarpgroupRows / 16; ++kk) {
    const unsigned slice = kk * 16 * 128;
    sm90::wgmma_bf16<kD, 1, 1>(d, sm90::detail::smem_descriptor(tile_w + slice, detail::kColumnBlockBytes),
                               sm90::detail::smem_descriptor(tile_rows + slice, detail::kColumnBlockBytes), kk > 0);
  }
  detail::warpgroup_commit();
}

// Adds (a, b) to the two consecutive floats at p (global memory, 8-byte aligned) as one vector
// reduction (sm_90's red.global.add.v2.f32): where the blocks of rows each add their part of a
// product over rows into one f32 array, an accumulator pair o[n][2h], o[n][2h + 1] in one go.
__device__ inline void add_f32x2(float* p, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(a), "f"(b) : "memory");
}

namespace detail {
// An empty asm statement that "changes" every register of a fragment: reads of them stay after it.
template <int kRows, int kColumns>
__device__ inline void pin_fragment(float (&fragment)[kRows][kColumns]) {
#pragma unroll
  for (int r = 0; r < kRows; ++r)
#pragma unroll
    for (int c = 0; c < kColumns; ++c) asm volatile("" : "+f"(fragment[r][c])::"memory");
}
}  // namespace detail

// Waits for all of the warpgroup's issued products: the step's scores before its elementwise work
// reads them, its products before the weights, accumulators and stage may change. The fragments
// the products write are passed so that the compiler sees them change here: it may not move a read
// of them above the wait (the wgmma's asm statement gave them their values at its issue).
template <class... Fragments>
__device__ inline void warpgroup_wait(Fragments&... fragments) {
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  (detail::pin_fragment(fragments), ...);
}

// ---- Tiles loaded by the TMA. A stage's tiles are counted on one mbarrier (two: one a stage, at
// `barriers`): one thread arrives on it with the bytes the stage's boxes will write, the TMA's
// completed bytes finish its phase, and every thread waits for the phase: a stage's n-th fill
// completes phase parity n % 2.

// Thread 0 makes the barriers, the block waits for them.
__device__ inline void init_stage_barriers(unsigned barriers) {
  if (threadIdx.x == 0) {
    sm90::detail::mbar_init(barriers, 1);
    sm90::detail::mbar_init(barriers + 8, 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();
}

// The calling thread (one a block) expects `bytes` on a stage's barrier before its boxes are issued.
__device__ inline void expect_tile_bytes(unsigned barrier, unsigned bytes) {
  sm90::detail::mbar_arrive_expect_tx(barrier, bytes);
}

// One tile [64 outer][kD] as kD / 64 boxes of 64 channels x 64 outer positions from `outer` (the
// map's dims: channels, outer, batch inner, batch outer); past the array's ends the TMA writes
// zeros, and counts the whole box's bytes all the same.
template <int kD>
__device__ inline void tma_tile(unsigned tile, const sm90::TmaDescriptor& map, int outer, int batch_inner,
                                int batch_outer, unsigned barrier) {
#pragma unroll
  for (int b = 0; b < kD / 64; ++b)
    sm90::detail::tma_load(tile + b * detail::kColumnBlockBytes, map, b * 64, outer, {batch_outer, batch_inner}, barrier);
}

__device__ inline void wait_tiles(unsigned barrier, unsigned parity) { sm90::detail::mbar_wait(barrier, parity); }

}  // namespace llmc::stream
