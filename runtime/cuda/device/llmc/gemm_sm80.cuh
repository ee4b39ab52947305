// llmc device library: GEMM tile for sm_80 and later (runs on Hopper too, compiled for sm_90).
//
// mma.sync m16n8k16 (bf16 -> fp32) per warp, fed by ldmatrix (.trans for MN-major operands)
// from swizzled shared memory, which a kStages-deep cp.async pipeline fills from global memory.
// One block computes a BM x BN tile of C; its warps form a kWarpsM x kWarpsN grid of
// (BM/kWarpsM) x (BN/kWarpsN) warp tiles. See gemm_common.cuh for the operand conventions,
// requirements and the epilogue contract.
//
// A generated kernel looks like
//
//   using Cfg = llmc::sm80::GemmConfig<128, 256, 64, 3, 2, 4, llmc::Major::K, llmc::Major::K>;
//   extern "C" __global__ void __launch_bounds__(Cfg::kThreads)
//   my_gemm(llmc::GemmShape shape, llmc::GemmOperand a, llmc::GemmOperand b, MyEpilogue epi) {
//     llmc::sm80::gemm<Cfg>(shape, a, b, epi);
//   }
//
// launched with grid (Cfg::tiles(M, N), 1, batch_outer * batch_inner), Cfg::kThreads threads and
// Cfg::kSmemBytes of dynamic shared memory (raise the kernel's limit beyond 48 KB first).
#pragma once

#include "llmc/gemm_common.cuh"

namespace llmc::sm80 {

template <int BM_, int BN_, int BK_, int kStages_, int kWarpsM_, int kWarpsN_, Major kAMajor_,
          Major kBMajor_>
struct GemmConfig {
  static constexpr int BM = BM_, BN = BN_, BK = BK_;
  static constexpr int kStages = kStages_, kWarpsM = kWarpsM_, kWarpsN = kWarpsN_;
  static constexpr Major kAMajor = kAMajor_, kBMajor = kBMajor_;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;

  static constexpr int kWarpTileM = BM / kWarpsM, kWarpTileN = BN / kWarpsN;
  static constexpr int kFragsM = kWarpTileM / 16, kFragsN = kWarpTileN / 8;

  // Stored tile shapes [outer][inner], inner = the operand's contiguous axis.
  static constexpr int kAOuter = kAMajor == Major::K ? BM : BK;
  static constexpr int kAInner = kAMajor == Major::K ? BK : BM;
  static constexpr int kBOuter = kBMajor == Major::K ? BN : BK;
  static constexpr int kBInner = kBMajor == Major::K ? BK : BN;

  static constexpr int kStageElems = (BM + BN) * BK;
  static constexpr int kPipelineBytes = kStages * kStageElems * 2;
  static constexpr int kStagingBytes = BM * BN * 4;
  static constexpr int kSmemBytes = kPipelineBytes > kStagingBytes ? kPipelineBytes : kStagingBytes;
  static constexpr int kGroupRows = 8;

  static_assert(kAInner % 64 == 0 && kBInner % 64 == 0,
                "a tile's contiguous extent (BK for K-major, BM/BN for MN-major) must be a multiple of 64");
  static_assert(BK % 16 == 0 && BN % 64 == 0, "BK multiple of 16, BN multiple of 64");
  static_assert(kWarpTileM % 16 == 0 && kWarpTileN % 16 == 0, "warp tile must be 16x16-divisible");
  static_assert((BM * BK / 8) % kThreads == 0 && (BN * BK / 8) % kThreads == 0,
                "every thread copies the same number of 16-byte chunks");
  static_assert(kStages >= 2, "at least double buffering");

  __host__ __device__ static constexpr int tiles(int M, int N) {
    return ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  }
};

namespace detail {

// 16-byte global->shared copy that reads src_bytes (0..16) and zero-fills the rest.
__device__ inline void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}
__device__ inline void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int kPending>
__device__ inline void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

__device__ inline void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ inline void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

__device__ inline void mma_bf16_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Copies the [kOuter][kInner] tile whose element (0, 0) is at `origin` into swizzled shared
// memory; rows at or past outer_left and elements at or past inner_left read as zero.
template <int kOuter, int kInner, int kThreads>
__device__ inline void load_tile_async(bf16* tile, const bf16* origin, index_t ld, int outer_left,
                                       int inner_left) {
  constexpr int kChunksPerRow = kInner / 8;
  constexpr int kChunks = kOuter * kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kChunks / kThreads; ++i) {
    const int c = threadIdx.x + i * kThreads;
    const int outer = c / kChunksPerRow, inner = (c % kChunksPerRow) * 8;
    const int elems = outer < outer_left ? min(max(inner_left - inner, 0), 8) : 0;
    // With nothing to read the source must still be a valid address: the tile origin.
    const bf16* src = elems > 0 ? origin + outer * ld + inner : origin;
    cp_async_16(smem_addr(tile + swizzled_offset<kOuter>(outer, inner)), src, elems * 2);
  }
}

}  // namespace detail

template <class Cfg, class Epilogue>
__device__ void gemm(const GemmShape& shape, const GemmOperand& a, const GemmOperand& b,
                     const Epilogue& epilogue) {
  using namespace detail;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, kStages = Cfg::kStages;
  constexpr int kThreads = Cfg::kThreads;
  constexpr bool kATrans = Cfg::kAMajor == Major::MN, kBTrans = Cfg::kBMajor == Major::MN;

  extern __shared__ __align__(128) unsigned char smem[];
  bf16* const smem_a = reinterpret_cast<bf16*>(smem);
  bf16* const smem_b = smem_a + kStages * BM * BK;

  const int M = shape.M, N = shape.N, K = shape.K;
  const TileCoord tile = grouped_tile<Cfg::kGroupRows>(blockIdx.x, (M + BM - 1) / BM, (N + BN - 1) / BN);
  const int m0 = tile.m * BM, n0 = tile.n * BN;
  const BatchIndex batch = shape.batch_index(blockIdx.z);
  const bf16* const a_base = a.ptr + a.batch.offset(batch);
  const bf16* const b_base = b.ptr + b.batch.offset(batch);
  const int k_tiles = (K + BK - 1) / BK;

  auto load_stage = [&](int stage, int kt) {
    const int k0 = kt * BK;
    bf16* const ta = smem_a + stage * BM * BK;
    bf16* const tb = smem_b + stage * BN * BK;
    if constexpr (kATrans)
      load_tile_async<BK, BM, kThreads>(ta, a_base + k0 * a.ld + m0, a.ld, K - k0, M - m0);
    else
      load_tile_async<BM, BK, kThreads>(ta, a_base + m0 * a.ld + k0, a.ld, M - m0, K - k0);
    if constexpr (kBTrans)
      load_tile_async<BK, BN, kThreads>(tb, b_base + k0 * b.ld + n0, b.ld, K - k0, N - n0);
    else
      load_tile_async<BN, BK, kThreads>(tb, b_base + n0 * b.ld + k0, b.ld, N - n0, K - k0);
  };

  // Fill kStages - 1 stages; one commit group per stage (empty groups past the last k-tile keep
  // the wait_group arithmetic below uniform).
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < k_tiles) load_stage(s, s);
    cp_async_commit();
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warp_m0 = (warp / Cfg::kWarpsN) * Cfg::kWarpTileM;
  const int warp_n0 = (warp % Cfg::kWarpsN) * Cfg::kWarpTileN;

  float acc[Cfg::kFragsM][Cfg::kFragsN][4];
#pragma unroll
  for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::kFragsN; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    // Stage kt has landed for this thread; the barrier publishes it to all threads and also
    // certifies that everyone finished reading stage kt - 1, which the load below overwrites.
    cp_async_wait<kStages - 2>();
    __syncthreads();
    const int next = kt + kStages - 1;
    if (next < k_tiles) load_stage(next % kStages, next);
    cp_async_commit();

    const int stage = kt % kStages;
    const unsigned ta = smem_addr(smem_a + stage * BM * BK);
    const unsigned tb = smem_addr(smem_b + stage * BN * BK);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      // ldmatrix.x4: lane l supplies the row address of matrix l/8. A fragment = four 8x8
      // matrices (rows 0-7|8-15) x (k 0-7|8-15); B pair = two n8 blocks x (k 0-7|8-15).
      unsigned fa[Cfg::kFragsM][4];
#pragma unroll
      for (int i = 0; i < Cfg::kFragsM; ++i) {
        const int m = warp_m0 + i * 16;
        if constexpr (kATrans)  // stored [k][m]: matrices are (k rows) x (8 m), transposed on load
          ldmatrix_x4_trans(fa[i], ta + 2 * swizzled_offset<BK>(kk + (lane & 7) + (lane >> 4) * 8,
                                                                 m + ((lane >> 3) & 1) * 8));
        else
          ldmatrix_x4(fa[i], ta + 2 * swizzled_offset<BM>(m + (lane & 15), kk + (lane >> 4) * 8));
      }
      unsigned fb[Cfg::kFragsN / 2][4];
#pragma unroll
      for (int j = 0; j < Cfg::kFragsN / 2; ++j) {
        const int n = warp_n0 + j * 16;
        if constexpr (kBTrans)
          ldmatrix_x4_trans(fb[j], tb + 2 * swizzled_offset<BK>(kk + (lane & 7) + ((lane >> 3) & 1) * 8,
                                                                 n + (lane >> 4) * 8));
        else
          ldmatrix_x4(fb[j], tb + 2 * swizzled_offset<BN>(n + (lane & 7) + (lane >> 4) * 8,
                                                          kk + ((lane >> 3) & 1) * 8));
      }
#pragma unroll
      for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
        for (int j = 0; j < Cfg::kFragsN; ++j)
          mma_bf16_16816(acc[i][j], fa[i], fb[j / 2][(j % 2) * 2], fb[j / 2][(j % 2) * 2 + 1]);
    }
  }

  // Epilogue: the pipeline buffers become the fp32 staging tile.
  cp_async_wait<0>();
  __syncthreads();
  const StagingTile<BM, BN> staging{reinterpret_cast<float*>(smem)};
#pragma unroll
  for (int i = 0; i < Cfg::kFragsM; ++i)
#pragma unroll
    for (int j = 0; j < Cfg::kFragsN; ++j) {
      const int row = warp_m0 + i * 16 + lane / 4, col = warp_n0 + j * 8 + (lane % 4) * 2;
      staging.store_pair(row, col, acc[i][j][0], acc[i][j][1]);
      staging.store_pair(row + 8, col, acc[i][j][2], acc[i][j][3]);
    }
  __syncthreads();
  staging.template drain<kThreads>(epilogue, batch, m0, n0, M, N, threadIdx.x);
}

}  // namespace llmc::sm80
