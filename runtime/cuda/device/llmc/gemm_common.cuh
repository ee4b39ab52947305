// llmc device library: what the tensor-core GEMM tiles of every architecture share.
//
// A GEMM here computes, for each batch index and 0 <= row < M, 0 <= col < N,
//     C(row, col) = sum_{k < K} A(row, k) * B(col, k)          (bf16 operands, fp32 sums)
// and hands C to an epilogue functor instead of storing it (see "Epilogue contract").
//
// Operands are row-major arrays with a leading dimension; each is either
//   Major::K  : contiguous along k   (A[row * ld + k],  B[col * ld + k])
//   Major::MN : contiguous along M/N (A[k * ld + row],  B[k * ld + col])
// so GPT-2's three training GEMMs are
//   forward          out = X · Wᵀ  : A = X (K),     B = W (K)
//   backward data    dX = dOut · W : A = dOut (K),  B = W (MN)      (GEMM N = C_in, K = C_out)
//   backward weights dW = dOutᵀ · X: A = dOut (MN), B = X (MN)      (GEMM M = C_out, N = C_in, K = rows)
//
// Requirements (all paths): operand base pointers 16-byte aligned, leading dimensions multiples
// of 8 elements (16 bytes), K >= 1. M, N and K are otherwise arbitrary: tile edges are
// zero-filled on load and masked on store.
//
// Include root: runtime/cuda/device (this file is <llmc/gemm_common.cuh>); needs cuda_bf16.h
// (NVRTC: --include-path=<cuda>/include). No host headers.
#pragma once

#include <cuda_bf16.h>

namespace llmc {

using bf16 = __nv_bfloat16;
using index_t = long long;

// Which axis of an operand is contiguous in memory.
enum class Major { K, MN };

// A launch runs batch_outer * batch_inner independent GEMMs (say batch × heads). Batch z is
// (outer, inner) = (z / batch_inner, z % batch_inner); each array places batch (outer, inner)
// at outer * outer_stride + inner * inner_stride elements from its base, which covers both
// packed batches and heads sliced out of a wider row (attention's q/k/v in [b, t, 3, h, d]).
struct BatchIndex {
  int outer, inner;
};

struct BatchStrides {
  index_t outer = 0, inner = 0;
  __device__ index_t offset(BatchIndex b) const { return b.outer * outer + b.inner * inner; }
};

struct GemmShape {
  int M, N, K;
  int batch_outer = 1, batch_inner = 1;

  __device__ int batch_count() const { return batch_outer * batch_inner; }
  __device__ BatchIndex batch_index(int z) const { return {z / batch_inner, z % batch_inner}; }
};

// An operand as the cp.async path reads it (the TMA path reads it through a tensor map).
struct GemmOperand {
  const bf16* ptr;
  index_t ld;
  BatchStrides batch;
};

// ---------------------------------------------------------------------------------------------
// Tile order. Consecutive tile indices walk down a group of `kGroupRows` tile rows before moving
// to the next tile column, so the blocks resident at one time share a few A row-bands and a few
// B column-bands, which then stay in L2 (GPT-2's M = 32768 would otherwise stream A once per
// tile column).
struct TileCoord {
  int m, n;  // tile indices
};

template <int kGroupRows>
__device__ inline TileCoord grouped_tile(int t, int tiles_m, int tiles_n) {
  const int per_group = kGroupRows * tiles_n;
  const int first_m = (t / per_group) * kGroupRows;
  const int rows = min(kGroupRows, tiles_m - first_m);
  const int r = t % per_group;
  return {first_m + r % rows, r / rows};
}

// ---------------------------------------------------------------------------------------------
// Operand tiles in shared memory. A tile is [outer][inner] with `inner` the operand's contiguous
// GMEM axis, in column blocks of 64 elements: block b holds rows of 128 bytes, one per outer
// index, and inside a row the eight 16-byte chunks are permuted chunk' = chunk ^ (outer % 8).
// That is exactly what the TMA writes with CU_TENSOR_MAP_SWIZZLE_128B (box of 64 inner elements,
// tile 1024-byte aligned) and what wgmma's 128B-swizzle descriptors read, and it makes the
// sm80 path's ldmatrix conflict-free: the eight 16-byte rows one 8x8 matrix reads are at
// consecutive outer indices and the same logical chunk, so they land in eight distinct chunk
// slots, i.e. all 32 banks.
template <int Outer>
__device__ inline int swizzled_offset(int outer, int inner) {
  const int chunk = (inner >> 3) & 7;
  return (inner >> 6) * (Outer * 64) + outer * 64 + ((chunk ^ (outer & 7)) << 3) + (inner & 7);
}

// ---------------------------------------------------------------------------------------------
// Epilogue contract
//
// The kernels call a functor supplied by the generated kernel,
//     struct E {
//       struct Inputs { ... };  // what one call reads from global memory (may be empty)
//       __device__ void load(BatchIndex batch, int row, int col, Inputs& in) const;
//       __device__ void operator()(BatchIndex batch, int row, int col, const float (&v)[8],
//                                  int count, const Inputs& in) const;
//     };
// with v[i] = C(row, col + i) of GEMM `batch` in fp32 for i < count (entries past count are
// unspecified), where 0 <= row < M, col % 8 == 0, count = min(8, N - col). Every
// (batch, row, col-group) is passed exactly once, to load and then to operator() with what load
// filled in: a thread loads the inputs of several column groups before it computes any of them,
// so their loads are in flight together (one call that loads, computes and stores would wait a
// whole memory latency per group). The tile is staged through shared memory so that consecutive
// threads of a warp get consecutive column groups of one row, and 16-byte stores from the functor
// (store_bf16x8) coalesce into whole 128-byte segments. The functor may read any memory (bias,
// residual) but not write what the running GEMM reads; it must not synchronise (not all threads
// call it equally often).
//
// A functor for a GemmConfig with kInputBytes > 0 (sm_90a, gemm_sm90.cuh) splits its inputs:
//       struct Ahead { ... };          // those that vary with the row (a residual, a row's statistic)
//       struct Inputs : Ahead { ... }; // and the others (a bias along the columns)
//       __device__ void prefetch(BatchIndex batch, int row, int col, Ahead& in) const;
//       __device__ void load_columns(BatchIndex batch, int row, int col, Inputs& in) const;
// prefetch() fills `in`, in shared memory, with what load() would put in the Ahead part: by
// cp.async where it can (the caller waits for those), by plain stores otherwise. It runs ahead,
// in another warp, while the tile's k-steps still run: like load(), it must not read what another
// tile's epilogue writes. load_columns() loads the rest, as load() does.

// Stores v[0..count) to p as bf16; one 16-byte store when count == 8 (p then 16-byte aligned,
// which the requirements above guarantee for p = base + row * ld + col).
__device__ inline void store_bf16x8(bf16* p, const float (&v)[8], int count) {
  if (count == 8) {
    uint4 packed;
    __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&packed);
#pragma unroll
    for (int i = 0; i < 4; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
    *reinterpret_cast<uint4*>(p) = packed;
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < count) p[i] = __float2bfloat16_rn(v[i]);
  }
}

// Stores v[0..count) to p as bf16 where p need only be 2-byte aligned (rows of an odd number of
// columns): the 8 values in the widest stores the address allows, 16 bytes, 4-byte pairs, or a
// single value, a pair of pairs... rather than 8 single ones.
__device__ inline void store_bf16x8_unaligned(bf16* p, const float (&v)[8], int count) {
  const unsigned long long at = reinterpret_cast<unsigned long long>(p);
  if (count == 8 && (at & 15) == 0) {
    store_bf16x8(p, v, 8);
  } else if (count == 8) {
    const int first = (at & 3) == 0 ? 0 : 1;  // p + first is 4-byte aligned
    if (first) p[0] = __float2bfloat16_rn(v[0]);
#pragma unroll
    for (int i = 0; i < 3; ++i)
      *reinterpret_cast<__nv_bfloat162*>(p + first + 2 * i) = __floats2bfloat162_rn(v[first + 2 * i], v[first + 2 * i + 1]);
    if (first) p[7] = __float2bfloat16_rn(v[7]);
    else *reinterpret_cast<__nv_bfloat162*>(p + 6) = __floats2bfloat162_rn(v[6], v[7]);
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i)
      if (i < count) p[i] = __float2bfloat16_rn(v[i]);
  }
}

// The plain epilogue: C rounded to bf16 into out[batch offset + row * ld + col].
struct EpilogueStoreBf16 {
  bf16* out;
  index_t ld;
  BatchStrides batch;

  struct Inputs {};
  __device__ void load(BatchIndex, int, int, Inputs&) const {}
  __device__ void operator()(BatchIndex b, int row, int col, const float (&v)[8], int count, const Inputs&) const {
    store_bf16x8(out + batch.offset(b) + row * ld + col, v, count);
  }
};

// ---------------------------------------------------------------------------------------------
// fp32 staging tile between the accumulator registers and the epilogue: kRows x kCols floats,
// row-major, with the 16-byte units of a row permuted unit' = unit ^ (2 * (row % 8)).
//  - Writers hold the mma accumulator layout (a float2 at row l/4 (+8), column 8j + 2(l%4)):
//    half a warp writes rows r..r+3, units {2j, 2j+1}; the xor spreads them over 8 distinct
//    unit slots = 32 banks.
//  - Readers take 8 consecutive floats: 8 lanes read one row, units {2q, 2q+1}, q = 0..7. The
//    lanes with q >= 4 read their odd unit first, so each 16-byte load instruction touches units
//    {0,2,4,6, 9,11,13,15} (xor 2s) of the row: 8 distinct bank groups, no conflict.
template <int kRows, int kCols>
struct StagingTile {
  static_assert(kCols % 64 == 0, "the unit xor needs rows of at least 16 units");
  float* base;

  __device__ int offset(int row, int col) const {
    const int unit = (col >> 2) ^ ((row & 7) << 1);
    return row * kCols + (unit << 2) + (col & 3);
  }
  // col even.
  __device__ void store_pair(int row, int col, float x, float y) const {
    *reinterpret_cast<float2*>(base + offset(row, col)) = make_float2(x, y);
  }
  // col % 8 == 0.
  __device__ void load8(int row, int col, float (&v)[8]) const {
    const bool odd_first = (col >> 5) & 1;
    const float4 p = *reinterpret_cast<const float4*>(base + offset(row, col + (odd_first ? 4 : 0)));
    const float4 q = *reinterpret_cast<const float4*>(base + offset(row, col + (odd_first ? 0 : 4)));
    const float4 lo = odd_first ? q : p, hi = odd_first ? p : q;
    v[0] = lo.x, v[1] = lo.y, v[2] = lo.z, v[3] = lo.w;
    v[4] = hi.x, v[5] = hi.y, v[6] = hi.z, v[7] = hi.w;
  }

  // Column groups of 8 a thread of kThreads takes from the tile.
  template <int kThreads>
  __host__ __device__ static constexpr int groups() {
    static_assert(kRows * (kCols / 8) % kThreads == 0, "the tile's column groups shared evenly by the threads");
    return kRows * (kCols / 8) / kThreads;
  }

  // The epilogue's inputs of this thread's column groups first .. first + kCount - 1 of the tile
  // whose element (0, 0) is C(row0, col0); `thread` is the calling thread's rank among kThreads.
  template <int kThreads, int kCount, class Epilogue>
  __device__ void load_inputs(const Epilogue& epilogue, BatchIndex batch, int row0, int col0, int M, int N, int thread,
                              int first, typename Epilogue::Inputs (&in)[kCount]) const {
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      const int g = thread + (first + i) * kThreads;
      const int row = g / (kCols / 8), col = (g % (kCols / 8)) * 8;
      if (row0 + row < M && col0 + col < N) epilogue.load(batch, row0 + row, col0 + col, in[i]);
    }
  }

  // Hands the same groups of the staged tile to the epilogue with the inputs loaded for them.
  template <int kThreads, int kCount, class Epilogue>
  __device__ void compute(const Epilogue& epilogue, BatchIndex batch, int row0, int col0, int M, int N, int thread,
                          int first, const typename Epilogue::Inputs (&in)[kCount]) const {
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      const int g = thread + (first + i) * kThreads;
      const int row = g / (kCols / 8), col = (g % (kCols / 8)) * 8;
      if (row0 + row < M && col0 + col < N) {
        float v[8];
        load8(row, col, v);
        epilogue(batch, row0 + row, col0 + col, v, min(8, N - (col0 + col)), in[i]);
      }
    }
  }

  // With the inputs that vary with the rows loaded ahead (gemm_sm90.cuh, kInputBytes): load_inputs
  // by the functor's load_columns(), which leaves them out ...
  template <int kThreads, int kCount, class Epilogue>
  __device__ void load_column_inputs(const Epilogue& epilogue, BatchIndex batch, int row0, int col0, int M, int N,
                                     int thread, typename Epilogue::Inputs (&in)[kCount]) const {
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      const int g = thread + i * kThreads;
      const int row = g / (kCols / 8), col = (g % (kCols / 8)) * 8;
      if (row0 + row < M && col0 + col < N) epilogue.load_columns(batch, row0 + row, col0 + col, in[i]);
    }
  }
  // ... and compute with them taken from shared memory, the tile's column group g's at ahead[g].
  template <int kThreads, int kCount, class Epilogue>
  __device__ void compute_ahead(const Epilogue& epilogue, BatchIndex batch, int row0, int col0, int M, int N,
                                int thread, const typename Epilogue::Ahead* ahead,
                                typename Epilogue::Inputs (&in)[kCount]) const {
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      const int g = thread + i * kThreads;
      const int row = g / (kCols / 8), col = (g % (kCols / 8)) * 8;
      if (row0 + row < M && col0 + col < N) {
        static_cast<typename Epilogue::Ahead&>(in[i]) = ahead[g];
        float v[8];
        load8(row, col, v);
        epilogue(batch, row0 + row, col0 + col, v, min(8, N - (col0 + col)), in[i]);
      }
    }
  }

  // Hands rows [0, kRows) x columns [0, kCols) of the staged tile to the epilogue, four column
  // groups at a time: their inputs loaded, then computed.
  template <int kThreads, class Epilogue>
  __device__ void drain(const Epilogue& epilogue, BatchIndex batch, int row0, int col0, int M, int N,
                        int thread) const {
    constexpr int kGroups = groups<kThreads>();
    constexpr int kAtOnce = kGroups < 4 ? kGroups : 4;
    static_assert(kGroups % kAtOnce == 0, "whole batches of column groups");
#pragma unroll
    for (int first = 0; first < kGroups; first += kAtOnce) {
      typename Epilogue::Inputs in[kAtOnce];
      load_inputs<kThreads>(epilogue, batch, row0, col0, M, N, thread, first, in);
      compute<kThreads>(epilogue, batch, row0, col0, M, N, thread, first, in);
    }
  }
};

// Shared-memory address of a generic pointer, for PTX operands.
__device__ inline unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

}  // namespace llmc
