// llmc device library: GEMM tile for sm_90a (Hopper): TMA + mbarrier ring + wgmma, warp-specialised.
//
// One persistent block of 3 warpgroups walks the tiles blockIdx.x, blockIdx.x + gridDim.x, ...
// of all batches (grid = min(#tiles, #SMs)):
//  - warpgroup 0, the producer, gives most of its registers away (setmaxnreg) and one of its
//    threads issues the TMA loads of each k-step into a ring of kStages shared-memory stages
//    (ptxas still fits the whole kernel, consumers with 128 accumulators included, in the 168
//    registers that __launch_bounds__(384, 1) allows, without spills; keep it so when editing:
//    check `-Xptxas -v` of an nvcc build for spill stores);
//  - warpgroups 1 and 2, the consumers, take the registers and each computes half of the
//    BM x BN tile (BM/2 rows, as BM/128 wgmma m64nBNk16 row blocks) from the stages, then stages
//    its half through shared memory in 64x64 fp32 pieces and hands it to the epilogue. The
//    producer meanwhile fills the ring for the next tile.
//  - ping-pong (GemmConfig's kPingPong, for epilogues with work of their own: a bias, an
//    activation, its derivative from a stored input): each consumer takes whole tiles, the
//    block's units alternately, so one consumer's epilogue runs while the other's wgmmas keep
//    the tensor cores busy. A stage is then freed by the 4 warps of the consumer that read it;
//    the other consumer steps its ring position past the stages of the units it leaves. The
//    mainloops take turns (named barriers 5 and 6: a consumer starts its unit's k-steps once the
//    other has finished the previous unit's), so the stages are read in the order they were
//    filled and a full barrier is never waited on more than one phase ahead (its parity would
//    alias an earlier phase).
//  - epilogue inputs ahead (GemmConfig's kInputBytes > 0, ping-pong only): what the epilogue
//    reads at its rows (a GELU's stored pre-activation, a residual: the functor's Ahead part) is
//    copied into shared memory by warp 1 of the producer warpgroup, with cp.async through the
//    functor's prefetch(), while the consumer that will need it still runs its k-steps; its
//    epilogue then reads it there instead of waiting a GMEM latency a piece with its registers
//    full of accumulators (loads issued a piece ahead into registers, or asked of L2 ahead, ran
//    slower: docs/codegen.md). The inputs go through a ring of slots, a 64x64 piece's each (512
//    column groups of Epilogue::Ahead), filled in the order the block's units run:
//      input_full[s]  (count 32): each loader lane arrives once its copies into slot s have
//                     landed (cp.async.mbarrier.arrive.noinc). The consumer waits for parity p.
//      input_empty[s] (count 4): each warp of the consumer arrives once it has read slot s.
//    A consumer's epilogue starts once the other's previous one has waited for all its slots
//    (named barriers 7 and 8), so that no input_full barrier is waited on more than one phase
//    ahead either. With fewer than two slots' room the inputs are loaded as without it.
//
// Ring protocol (stage s, pass p = how often the ring wrapped):
//   full[s]  (count 1): the producer arrives with expect_tx(stage bytes); the TMA's completed
//            bytes finish the phase. Consumers wait for phase parity p.
//   empty[s] (count 8 = consumer warps): each consumer warp arrives once its wgmmas that read
//            stage s have completed (wgmma.wait_group). The producer waits for parity p ^ 1
//            before refilling (on a fresh barrier, parity 1 counts as complete: the first pass
//            never waits).
//
// Clusters (GemmConfig's kClusterM = 2, consumers that split a tile's rows, no split-K): the
// kernel runs as clusters of two blocks (__cluster_dims__(2, 1, 1)) over tile pairs, the two
// blocks of a cluster the tiles (2p, n) and (2p + 1, n) of one pair, in step: each loads its own
// A tile and half of the B tile they share, which the TMA writes into both blocks' stage
// (multicast), so the B operand is read from L2 once for two tiles. Each CTA's full barrier counts
// the whole stage's bytes, half of B from the other block's copy; a stage is freed once the
// consumer warps of both blocks have read it (each warp arrives on both blocks' empty barrier),
// since either block's producer writes into both. A tile past M (an odd count of row tiles)
// still runs its k-steps on zeros (the TMA fills what lies outside) for its partner's sake, and
// stores nothing. Both blocks wait for each other before they start (their barriers initialised)
// and before they exit (no arrival into a block that has gone).
//
// Operands come through tensor maps, encoded on the host (runtime/cuda/gemm_tensor_map.h) as
// rank-4 bf16 maps (contiguous extent, strided extent, batch_inner, batch_outer), 128B swizzle,
// zero out-of-bounds fill, box {64, kABoxRows or kBBoxRows, 1, 1}. See gemm_common.cuh for the
// operand conventions, requirements and the epilogue contract. A generated kernel looks like
//
//   using Cfg = llmc::sm90::GemmConfig<128, 256, 4, llmc::Major::K, llmc::Major::K>;
//   extern "C" __global__ void __launch_bounds__(Cfg::kThreads, 1)
//   my_gemm(const __grid_constant__ llmc::sm90::TmaDescriptor a,
//           const __grid_constant__ llmc::sm90::TmaDescriptor b, llmc::GemmShape shape, MyEpilogue epi) {
//     llmc::sm90::gemm<Cfg>(a, b, shape, epi);
//   }
//
// compiled for sm_90a, launched with min(#units, #SMs) blocks (#units = Cfg::tiles(M, N) times the
// batch count times split.splits), Cfg::kThreads threads and Cfg::kSmemBytes of dynamic shared
// memory.
//
// Split-K (for few output tiles over a long K, as the weight gradients dW = dOutᵀ·X with K = all
// rows): with SplitK::splits = S > 1 each tile becomes S units over consecutive slices of the
// k-steps. A unit stores its fp32 partial tile to the workspace and counts itself in the tile's
// counter; the unit that arrives last adds the S partials in split order (so results do not
// depend on timing), runs the epilogue, and resets the counter to zero for the next launch.
// Without a workspace each unit runs the epilogue on its own partial tile: for an epilogue that
// adds atomically into a zeroed fp32 array (the compiler's split sums), the partials sum there
// in the order the units finish; the units then go slice by slice over all tiles (below).
#pragma once

#include "llmc/gemm_common.cuh"
#include "llmc/wgmma_bf16.cuh"

namespace llmc::sm90 {

// A CUtensorMap (cuda.h cannot be included under NVRTC): 128 opaque bytes, 64-byte aligned,
// passed by value as a __grid_constant__ kernel parameter so that the TMA can read it in place.
struct alignas(64) TmaDescriptor {
  unsigned long long opaque[16];
};

// Split-K work space: S <= ceil(K / 64); workspace holds #tiles * S * BM * BN floats, counters
// #tiles ints that are zero before the first launch (the kernel leaves them zero). #tiles counts
// all batches. A null workspace: each unit's epilogue gets its partial tile (atomic epilogues).
struct SplitK {
  int splits = 1;
  float* workspace = nullptr;
  int* counters = nullptr;
};

template <int BM_, int BN_, int kStages_, Major kAMajor_, Major kBMajor_, bool kPingPong_ = false,
          int kInputBytes_ = 0, int kClusterM_ = 1>
struct GemmConfig {
  static constexpr int BM = BM_, BN = BN_, kStages = kStages_;
  // Blocks of a cluster, over consecutive row tiles sharing the B tile (see above): 1 or 2.
  static constexpr int kClusterM = kClusterM_;
  // Shared memory for the epilogue's inputs loaded ahead (see above); 0: loaded by the epilogue.
  static constexpr int kInputBytes = kInputBytes_;
  static constexpr int kMaxInputSlots = 8;
  // A k-step is one 128-byte swizzle atom of k (K-major) or 64 k rows (MN-major).
  static constexpr int BK = 64;
  static constexpr Major kAMajor = kAMajor_, kBMajor = kBMajor_;
  static constexpr bool kPingPong = kPingPong_;

  static constexpr int kConsumers = 2;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  static constexpr int kConsumerRows = kPingPong ? BM : BM / kConsumers;  // a consumer's rows of a tile
  static constexpr int kRowBlocks = kConsumerRows / 64;  // wgmma m64 blocks per consumer
  static constexpr int kAccumulators = kRowBlocks * BN / 2;  // fp32 per consumer thread
  // Warps whose arrivals free a stage: its readers in every block of the cluster.
  static constexpr int kStageReaders = (kPingPong ? 4 : 4 * kConsumers) * kClusterM;

  static constexpr int kATileBytes = BM * BK * 2, kBTileBytes = BN * BK * 2;
  static constexpr int kStageBytes = kATileBytes + kBTileBytes;
  static constexpr int kStagingBytes = kConsumers * 64 * 64 * 4;
  // The ring's barriers, the inputs' (2 a slot) and the split-K "last unit" flags (one a consumer).
  static constexpr int kBarrierBytes = 2 * kStages * 8 + (kInputBytes > 0 ? 2 * kMaxInputSlots * 8 : 0) + 16;
  // 1024 bytes of slack to align the swizzled tiles to the 1024-byte swizzle period.
  static constexpr int kSmemBytes = 1024 + kStages * kStageBytes + kStagingBytes + kInputBytes + kBarrierBytes;

  // Rows of the TMA box: a K-major operand is loaded as one box of 64 k x all its rows, an
  // MN-major one as boxes of 64 (m or n) x 64 k.
  static constexpr int kABoxRows = kAMajor == Major::K ? BM : BK;
  static constexpr int kBBoxRows = kBMajor == Major::K ? BN / kClusterM : BK;
  static constexpr int kGroupRows = 8;

  static_assert(kConsumerRows % 64 == 0 && kConsumerRows >= 64 && BM <= 256,
                "BM: 128 or 256 (two consumers x m64 blocks), 64 or 128 with ping-pong");
  static_assert(BN % 64 == 0 && BN <= 256, "BN: 64, 128, 192 or 256 (one wgmma instruction)");
  static_assert(kAccumulators <= 128, "at most 128 fp32 accumulators per consumer thread");
  static_assert(kSmemBytes <= 227 * 1024, "shared memory per block");
  static_assert(kInputBytes % 16 == 0 && (kInputBytes == 0 || kPingPong), "inputs ahead: ping-pong, 16-byte slots");
  static_assert(kClusterM == 1 || (kClusterM == 2 && !kPingPong && BN % 128 == 0),
                "clusters: two blocks, consumers that split rows, B halves of whole 64-column blocks");

  __host__ __device__ static constexpr int tiles(int M, int N) {
    return ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  }
};

namespace detail {

// Epilogue::Ahead where the functor has one (kInputBytes > 0), else an empty struct.
template <class...>
struct make_void {
  using type = void;
};
template <class E, class = void>
struct AheadOf {
  struct type {};
};
template <class E>
struct AheadOf<E, typename make_void<typename E::Ahead>::type> {
  using type = typename E::Ahead;
};

__device__ inline void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count) : "memory");
}
__device__ inline void mbar_arrive(unsigned bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}
__device__ inline void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
}
// Arrives on `bar` once the calling thread's cp.async copies issued so far have landed (the
// arrival is not counted in advance: the barrier's count includes it).
__device__ inline void mbar_arrive_on_copies(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
}
// Arrives on the barrier at `bar`'s offset in block `cta` of the cluster (this one included).
__device__ inline void mbar_arrive_cluster(unsigned bar, unsigned cta) {
  asm volatile(
      "{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];\n}\n" ::"r"(bar),
      "r"(cta)
      : "memory");
}
__device__ inline unsigned cluster_rank() {
  unsigned rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(rank));
  return rank;
}
// Every thread of every block of the cluster, as __syncthreads is for one block.
__device__ inline void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
__device__ inline void mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
}

// TMA: box at coordinates (c0 = contiguous, c1 = strided, batch inner, batch outer) -> smem,
// completion counted on `bar` in bytes.
__device__ inline void tma_load(unsigned dst, const TmaDescriptor& map, int c0, int c1, BatchIndex b,
                                unsigned bar) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6];\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(b.inner), "r"(b.outer), "r"(bar)
      : "memory");
}

// The same box written into the same shared-memory offset of every block in `mask` (of the
// cluster), each one's barrier at `bar`'s offset counting its bytes.
__device__ inline void tma_load_multicast(unsigned dst, const TmaDescriptor& map, int c0, int c1, BatchIndex b,
                                          unsigned bar, unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n" ::"r"(dst),
      "l"(reinterpret_cast<unsigned long long>(&map)), "r"(c0), "r"(c1), "r"(b.inner), "r"(b.outer), "r"(bar),
      "h"(mask)
      : "memory");
}

// Split-K partial tiles: unit (tile, split) owns BM * BN floats; consumer thread `thread` of
// consumer c keeps its accumulator j at float4 index (c * kAccumulators / 4 + j / 4) * 128 + thread,
// so each float4 access of a warpgroup covers 2 KB contiguously.
template <class Cfg>
__device__ inline float4* partial_slot(const SplitK& split, int tile, int s, int consumer, int thread, int j4) {
  float* base = split.workspace + (static_cast<index_t>(tile) * split.splits + s) * (Cfg::BM * Cfg::BN);
  return reinterpret_cast<float4*>(base) + (consumer * Cfg::kAccumulators / 4 + j4) * 128 + thread;
}

__device__ inline void named_barrier(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
// Counts the calling warp's threads towards barrier `id` without waiting (a bar.sync by the others completes it).
__device__ inline void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// wgmma shared-memory matrix descriptor for a 128B-swizzled operand: start address, leading
// byte offset (MN-major: distance between 64-element column blocks; unused for K-major), stride
// byte offset (distance between 8-row groups: 8 rows x 128 bytes), swizzle mode 1 = 128B.
__device__ inline unsigned long long smem_descriptor(unsigned addr, unsigned leading_bytes) {
  return static_cast<unsigned long long>((addr & 0x3FFFF) >> 4) |
         static_cast<unsigned long long>(leading_bytes >> 4) << 16 |
         static_cast<unsigned long long>(1024 >> 4) << 32 | 1ull << 62;
}

// A consumer warp's accumulators of one m64 row block (`acc`, wgmma's layout) for the 64 columns of
// piece column `c` into the staging piece.
template <int kAccumulators>
__device__ __forceinline__ void stage_accumulators(const StagingTile<64, 64>& piece, const float (&acc)[kAccumulators],
                                                   int c, int warp, int lane) {
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int row = 16 * warp + lane / 4, col = 8 * j + 2 * (lane % 4);
    const float* d = &acc[4 * (8 * c + j)];
    piece.store_pair(row, col, d[0], d[1]);
    piece.store_pair(row + 8, col, d[2], d[3]);
  }
}

// Warp 1 of the producer warpgroup, where the epilogue's inputs at its rows are loaded ahead: the
// Ahead part of each of the block's units' pieces, in the order the consumers' epilogues take them,
// into the ring of `kInputSlots` slots (512 column groups each) at `slots`.
template <class Cfg, int kInputSlots, class Epilogue, class TileOf>
__device__ void load_inputs_ahead(const Epilogue& epilogue, const GemmShape& shape, int units, TileOf tile_of,
                                  typename AheadOf<Epilogue>::type* slots, unsigned input_full, unsigned input_empty) {
  constexpr int kPieceCols = Cfg::BN / 64, kPieces = Cfg::kRowBlocks * kPieceCols, kPieceGroups = 64 * 64 / 8;
  const int tiles_m = (shape.M + Cfg::BM - 1) / Cfg::BM, tiles_n = (shape.N + Cfg::BN - 1) / Cfg::BN;
  const int lane = threadIdx.x % 32;
  int slot = 0;
  unsigned pass = 0;
  for (int u = blockIdx.x; u < units; u += gridDim.x) {
    const int t = tile_of(u);
    const BatchIndex batch = shape.batch_index(t / (tiles_m * tiles_n));
    const TileCoord tile = grouped_tile<Cfg::kGroupRows>(t % (tiles_m * tiles_n), tiles_m, tiles_n);
    for (int q = 0; q < kPieces; ++q) {
      const int row0 = tile.m * Cfg::BM + 64 * (q / kPieceCols), col0 = tile.n * Cfg::BN + 64 * (q % kPieceCols);
      mbar_wait(input_empty + 8 * slot, pass ^ 1);
      for (int g = lane; g < kPieceGroups; g += 32) {
        const int row = row0 + g / 8, col = col0 + (g % 8) * 8;
        if (row < shape.M && col < shape.N) epilogue.prefetch(batch, row, col, slots[slot * kPieceGroups + g]);
      }
      mbar_arrive_on_copies(input_full + 8 * slot);
      if (++slot == kInputSlots) slot = 0, pass ^= 1;
    }
  }
}

}  // namespace detail

template <class Cfg, class Epilogue>
__device__ void gemm(const TmaDescriptor& tma_a, const TmaDescriptor& tma_b, const GemmShape& shape,
                     const Epilogue& epilogue, const SplitK& split = {}) {
  using namespace detail;
  constexpr int BM = Cfg::BM, BN = Cfg::BN, BK = Cfg::BK, kStages = Cfg::kStages;
  constexpr bool kATrans = Cfg::kAMajor == Major::MN, kBTrans = Cfg::kBMajor == Major::MN;
  // An MN-major tile is stored as column blocks of 64 (m or n) x BK rows of 128 bytes.
  constexpr unsigned kColumnBlockBytes = BK * 128;
  constexpr int kCluster = Cfg::kClusterM;

  extern __shared__ unsigned char smem_raw[];
  const unsigned smem_base = (smem_addr(smem_raw) + 1023) & ~1023u;
  unsigned char* const smem = smem_raw + (smem_base - smem_addr(smem_raw));
  const unsigned tiles_a = smem_base;                               // kStages x A tile
  const unsigned tiles_b = tiles_a + kStages * Cfg::kATileBytes;    // kStages x B tile
  float* const staging = reinterpret_cast<float*>(smem + kStages * Cfg::kStageBytes);
  const unsigned full_bar = smem_base + kStages * Cfg::kStageBytes + Cfg::kStagingBytes + Cfg::kInputBytes;
  const unsigned empty_bar = full_bar + kStages * 8;
  const unsigned input_full = empty_bar + kStages * 8;
  const unsigned input_empty = input_full + (Cfg::kInputBytes > 0 ? Cfg::kMaxInputSlots * 8 : 0);
  volatile int* const last_unit_flag = reinterpret_cast<volatile int*>(
      smem + (input_empty + (Cfg::kInputBytes > 0 ? Cfg::kMaxInputSlots * 8 : 0) - smem_base));

  // Epilogue inputs ahead: a slot holds one 64x64 piece's Ahead part, a column group each.
  using Ahead = typename AheadOf<Epilogue>::type;
  constexpr int kPieceCols = BN / 64;
  constexpr int kPieces = Cfg::kRowBlocks * kPieceCols;  // a consumer's pieces a unit
  constexpr int kPieceGroups = 64 * 64 / 8;
  constexpr int kInputSlotsFit = Cfg::kInputBytes / (kPieceGroups * static_cast<int>(sizeof(Ahead)));
  constexpr int kInputSlots = kInputSlotsFit < Cfg::kMaxInputSlots ? kInputSlotsFit : Cfg::kMaxInputSlots;
  constexpr bool kInputsAhead = Cfg::kInputBytes > 0 && kInputSlots >= 2 && sizeof(Ahead) >= 4;
  Ahead* const input_slots = reinterpret_cast<Ahead*>(smem + kStages * Cfg::kStageBytes + Cfg::kStagingBytes);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      mbar_init(full_bar + 8 * s, 1);
      mbar_init(empty_bar + 8 * s, Cfg::kStageReaders);
    }
    if constexpr (kInputsAhead) {
      for (int s = 0; s < kInputSlots; ++s) {
        mbar_init(input_full + 8 * s, 32);
        mbar_init(input_empty + 8 * s, 4);
      }
    }
    // Make the initialised barriers visible to the async proxy (TMA) as well.
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  if constexpr (kCluster > 1) {
    cluster_sync();  // the other block's barriers too, before anything arrives on them
  } else {
    __syncthreads();
  }

  const int M = shape.M, N = shape.N, K = shape.K;
  const int tiles_m = (M + BM - 1) / BM, tiles_n = (N + BN - 1) / BN;
  // Clusters walk tile pairs (rows 2p and 2p + 1 of one column): a unit is a pair, and the block
  // of rank r takes its row 2p + r. Without clusters a unit's tile is the block's.
  const int rank = kCluster > 1 ? static_cast<int>(cluster_rank()) : 0;
  const int row_units = (tiles_m + kCluster - 1) / kCluster;
  const int tiles_per_batch = row_units * tiles_n;
  const int tiles_total = tiles_per_batch * shape.batch_count();
  const int k_steps = (K + BK - 1) / BK;
  const int splits = split.splits;
  const int units = tiles_total * splits;
  // With a workspace, unit u = (tile u / splits, slice u % splits of the k-steps): the slices of
  // a tile are consecutive units, so they run at about the same time and the last to arrive waits
  // little. Atomic split-K (no workspace) is slice-major, u = (tile u % tiles, slice u / tiles):
  // the units running together read the same k-slice of A and B (held in L2, not re-read from
  // HBM) and add into different tiles. Tile-major, GPT-2's weight gradients (K = 32768 rows split
  // 7 ways) ran 1.5x as long as their data gradients of the same work; slice-major, within 8% (d12
  // on an H100, 2026-12-06: fc 324 -> 220 us, proj 323 -> 223, qkv 237 -> 167; the step's graph
  // 57.8 -> 55.1 ms).
  if (kCluster > 1 && splits > 1) __trap();  // the lowering never asks for both
  const bool slice_major = splits > 1 && !split.workspace;
  // A split-K unit that is not its tile's last runs no epilogue: its inputs are loaded by it.
  const bool inputs_ahead = kInputsAhead && !(splits > 1 && split.workspace);
  auto tile_of = [&](int unit) { return slice_major ? unit % tiles_total : unit / splits; };
  auto slice_of = [&](int unit) { return slice_major ? unit / tiles_total : unit % splits; };
  auto k_begin = [&](int unit) { return slice_of(unit) * k_steps / splits; };
  auto k_end = [&](int unit) { return (slice_of(unit) + 1) * k_steps / splits; };
  const int warpgroup = threadIdx.x / 128;
  // The cluster's units go to its blocks together: cluster c takes c, c + clusters, ...
  const int first_unit = blockIdx.x / kCluster, unit_stride = gridDim.x / kCluster;
  auto tile_at = [&](int t) {
    TileCoord tile = grouped_tile<Cfg::kGroupRows>(t % tiles_per_batch, row_units, tiles_n);
    tile.m = tile.m * kCluster + rank;
    return tile;
  };

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
    if (threadIdx.x == 0) {
      int stage = 0;
      unsigned pass = 0;
      for (int u = first_unit; u < units; u += unit_stride) {
        const int t = tile_of(u);
        const BatchIndex batch = shape.batch_index(t / tiles_per_batch);
        const TileCoord tile = tile_at(t);
        const int m0 = tile.m * BM, n0 = tile.n * BN;
        for (int ks = k_begin(u); ks < k_end(u); ++ks) {
          const int k0 = ks * BK;
          mbar_wait(empty_bar + 8 * stage, pass ^ 1);
          const unsigned bar = full_bar + 8 * stage;
          mbar_arrive_expect_tx(bar, Cfg::kStageBytes);
          const unsigned a_dst = tiles_a + stage * Cfg::kATileBytes;
          const unsigned b_dst = tiles_b + stage * Cfg::kBTileBytes;
          if constexpr (kATrans) {
#pragma unroll
            for (int c = 0; c < BM / 64; ++c) tma_load(a_dst + c * kColumnBlockBytes, tma_a, m0 + 64 * c, k0, batch, bar);
          } else {
            tma_load(a_dst, tma_a, k0, m0, batch, bar);
          }
          if constexpr (kCluster > 1) {
            // This block's half of the shared B tile, into both blocks.
            constexpr unsigned short kBoth = 0x3;
            if constexpr (kBTrans) {
#pragma unroll
              for (int c = rank * BN / 128; c < (rank + 1) * BN / 128; ++c)
                tma_load_multicast(b_dst + c * kColumnBlockBytes, tma_b, n0 + 64 * c, k0, batch, bar, kBoth);
            } else {
              tma_load_multicast(b_dst + rank * (BN / 2) * 128, tma_b, k0, n0 + rank * (BN / 2), batch, bar, kBoth);
            }
          } else if constexpr (kBTrans) {
#pragma unroll
            for (int c = 0; c < BN / 64; ++c) tma_load(b_dst + c * kColumnBlockBytes, tma_b, n0 + 64 * c, k0, batch, bar);
          } else {
            tma_load(b_dst, tma_b, k0, n0, batch, bar);
          }
          if (++stage == kStages) stage = 0, pass ^= 1;
        }
      }
    } else if (inputs_ahead && threadIdx.x / 32 == 1) {
      if constexpr (kInputsAhead)
        load_inputs_ahead<Cfg, kInputSlots>(epilogue, shape, units, tile_of, input_slots, input_full, input_empty);
    }
  } else {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
    const int consumer = warpgroup - 1;
    const int thread = threadIdx.x % 128, warp = thread / 32, lane = thread % 32;
    const int row_base = Cfg::kPingPong ? 0 : consumer * Cfg::kConsumerRows;  // first tile row of this consumer
    const StagingTile<64, 64> piece{staging + consumer * 64 * 64};
    // Split-K with a workspace: the threads that hold one unit's partial tile.
    const int slot_consumer = Cfg::kPingPong ? 0 : consumer;
    const int unit_barrier = Cfg::kPingPong ? 3 + consumer : 3;
    const int unit_threads = Cfg::kPingPong ? 128 : 128 * Cfg::kConsumers;
    const bool unit_leader = Cfg::kPingPong ? thread == 0 : threadIdx.x == 128;
    volatile int* const unit_flag = last_unit_flag + (Cfg::kPingPong ? consumer : 0);

    float acc[Cfg::kRowBlocks][BN / 2];
    int stage = 0;
    unsigned pass = 0;
    int input_slot = 0;  // the loader's ring, as it fills it
    unsigned input_pass = 0;
    int turn = 0;  // the block's units in order; with ping-pong, consumer c takes those of parity c
    // A stage read: its readers arrive on the empty barrier of every block that writes it.
    auto free_stage = [&](int s) {
      if (lane != 0) return;
      if constexpr (kCluster > 1) {
#pragma unroll
        for (int c = 0; c < kCluster; ++c) mbar_arrive_cluster(empty_bar + 8 * s, c);
      } else {
        mbar_arrive(empty_bar + 8 * s);
      }
    };
    for (int u = first_unit; u < units; u += unit_stride, ++turn) {
      const int t = tile_of(u);
      const BatchIndex batch = shape.batch_index(t / tiles_per_batch);
      const TileCoord tile = tile_at(t);
      const int m0 = tile.m * BM, n0 = tile.n * BN;
      const int ks_first = k_begin(u), ks_end = k_end(u);
      if (Cfg::kPingPong && turn % 2 != consumer) {
        // The other consumer's unit: its k-steps pass through the ring without this one.
        const int next = stage + (ks_end - ks_first);
        pass ^= (next / kStages) & 1;
        stage = next % kStages;
        if (inputs_ahead) {
          const int next_slot = input_slot + kPieces;
          input_pass ^= (next_slot / kInputSlots) & 1;
          input_slot = next_slot % kInputSlots;
        }
        continue;
      }

      // Ping-pong: this unit's k-steps after the other consumer's previous unit's.
      if (Cfg::kPingPong && turn > 0) named_barrier(5 + consumer, 256);
      int previous_stage = -1;
      for (int ks = ks_first; ks < ks_end; ++ks) {
        mbar_wait(full_bar + 8 * stage, pass);
        const unsigned a_tile = tiles_a + stage * Cfg::kATileBytes;
        const unsigned b_tile = tiles_b + stage * Cfg::kBTileBytes;
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
        for (int kk = 0; kk < BK / 16; ++kk) {
          // k16 slice kk: K-major rows advance 32 bytes inside the swizzle atom (the hardware
          // applies the xor on the final address); MN-major tiles advance 16 rows of 128 bytes.
          const unsigned b_desc_addr = kBTrans ? b_tile + kk * 16 * 128 : b_tile + kk * 32;
          const unsigned long long b_desc = smem_descriptor(b_desc_addr, kColumnBlockBytes);
#pragma unroll
          for (int i = 0; i < Cfg::kRowBlocks; ++i) {
            const int row = row_base + 64 * i;
            const unsigned a_desc_addr = kATrans ? a_tile + (row / 64) * kColumnBlockBytes + kk * 16 * 128
                                                 : a_tile + row * 128 + kk * 32;
            wgmma_bf16<BN, kATrans, kBTrans>(acc[i], smem_descriptor(a_desc_addr, kColumnBlockBytes), b_desc,
                                             ks > ks_first || kk > 0);
          }
        }
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        // Keep this k-step's wgmmas in flight; the previous step's are done, so its stage is free.
        asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
        if (previous_stage >= 0) free_stage(previous_stage);
        previous_stage = stage;
        if (++stage == kStages) stage = 0, pass ^= 1;
      }
      asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
      free_stage(previous_stage);
      // Ping-pong: the other consumer's next unit may start its k-steps.
      if (Cfg::kPingPong && u + unit_stride < units) named_barrier_arrive(5 + (1 - consumer), 256);

      if (splits > 1 && split.workspace) {
        // Publish this slice's partial tile (st.cg: past L1, which other SMs do not see).
        float4* const mine = partial_slot<Cfg>(split, t, u % splits, slot_consumer, thread, 0);
#pragma unroll
        for (int j = 0; j < Cfg::kAccumulators; j += 4) {
          const float* a = &acc[j / (BN / 2)][j % (BN / 2)];
          __stcg(mine + (j / 4) * 128, make_float4(a[0], a[1], a[2], a[3]));
        }
        __threadfence();
        named_barrier(unit_barrier, unit_threads);
        if (unit_leader) *unit_flag = atomicAdd(&split.counters[t], 1) == splits - 1;
        named_barrier(unit_barrier, unit_threads);
        const bool last = *unit_flag;
        if (!last) continue;
        __threadfence();
        // Sum all slices (this unit's too, read back) in split order into zeroed accumulators,
        // slice-outer so that only the accumulators stay live: the result does not depend on which
        // unit came last.
#pragma unroll
        for (int i = 0; i < Cfg::kRowBlocks; ++i)
#pragma unroll
          for (int j = 0; j < BN / 2; ++j) acc[i][j] = 0.f;
        for (int s = 0; s < splits; ++s) {
          const float4* slice = partial_slot<Cfg>(split, t, s, slot_consumer, thread, 0);
#pragma unroll
          for (int j = 0; j < Cfg::kAccumulators; j += 4) {
            float* a = &acc[j / (BN / 2)][j % (BN / 2)];
            const float4 p = __ldcg(slice + (j / 4) * 128);
            a[0] += p.x, a[1] += p.y, a[2] += p.z, a[3] += p.w;
          }
        }
        if (unit_leader) split.counters[t] = 0;
      }

      // Epilogue, one 64x64 piece at a time through this consumer's staging buffer. Each piece's
      // inputs are loaded first, so their latency passes while the piece is staged; the first
      // barrier waits until the previous piece has been read out.
      constexpr int kGroups = StagingTile<64, 64>::groups<128>();
      if (inputs_ahead) {
        if constexpr (kInputsAhead) {
          // Inputs loaded ahead: after the other consumer's previous epilogue has waited for its own.
          if (turn > 0) named_barrier(7 + consumer, 256);
#pragma unroll
          for (int q = 0; q < kPieces; ++q) {
            const int i = q / kPieceCols, c = q % kPieceCols;
            typename Epilogue::Inputs in[kGroups];
            piece.template load_column_inputs<128>(epilogue, batch, m0 + 64 * i, n0 + 64 * c, M, N, thread, in);
            mbar_wait(input_full + 8 * input_slot, input_pass);
            if (q == kPieces - 1 && u + unit_stride < units) named_barrier_arrive(7 + (1 - consumer), 256);
            named_barrier(1 + consumer, 128);
            stage_accumulators(piece, acc[i], c, warp, lane);
            named_barrier(1 + consumer, 128);
            piece.template compute_ahead<128>(epilogue, batch, m0 + 64 * i, n0 + 64 * c, M, N, thread,
                                              input_slots + input_slot * kPieceGroups, in);
            __syncwarp();
            if (lane == 0) mbar_arrive(input_empty + 8 * input_slot);
            if (++input_slot == kInputSlots) input_slot = 0, input_pass ^= 1;
          }
        }
        continue;
      }
#pragma unroll
      for (int q = 0; q < kPieces; ++q) {
        const int i = q / kPieceCols, c = q % kPieceCols;
        typename Epilogue::Inputs in[kGroups];
        piece.template load_inputs<128>(epilogue, batch, m0 + row_base + 64 * i, n0 + 64 * c, M, N, thread, 0, in);
        named_barrier(1 + consumer, 128);
        stage_accumulators(piece, acc[i], c, warp, lane);
        named_barrier(1 + consumer, 128);
        piece.template compute<128>(epilogue, batch, m0 + row_base + 64 * i, n0 + 64 * c, M, N, thread, 0, in);
      }
    }
  }
  // No block leaves while the other may still arrive on its barriers.
  if constexpr (kCluster > 1) cluster_sync();
}

}  // namespace llmc::sm90
