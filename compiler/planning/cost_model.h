// The performance model of one kernel under one partition, and the search for
// the partition that minimises its predicted time on a target.
//
// Partition (docs/performance.md, "Partition and cost"): the kernel's output axes are group-partitioned —
// tiles of g_a positions, one per thread block across the GRID; its stream
// axis is stream-partitioned — chunks of s positions looped over with the
// accumulator on chip; other reduced axes are taken whole inside a chunk.
//
// Transfers into SMEM (H, bytes through L2): each input once per tile of every
// group axis it lacks, the outputs once:
//     H = sum_inputs bytes(I) * prod_{g not in I} ceil(n_g / g_g) + sum_outputs bytes(O)
// (a matmul A[a,b] B[b,c]: H = abc(1/g_a + 1/g_c) + ac elements).
// Memory (M, bytes of SMEM per block): the inputs' tiles (double-buffered when
// streamed), the output tiles (the accumulator) and the largest intermediate
// tile (a matmul: s_b(g_a + g_c) + g_a g_c elements).
// HBM (GMEM) itself moves each array once: the re-reads of a tile hit in L2.
// Time: the largest of bytes/bandwidth and work/peak per unit, divided by how
// evenly the blocks spread over the SMs, plus per-chunk syncs and the launch.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "planning/fusion.h"
#include "planning/target.h"

namespace llmc {

// A tile launch without a stream whose threads take several points each
// unrolls its points' loop by this much (codegen/cuda_writer_tile.cpp), so a
// thread has that many points' loads in flight: the latency term counts them.
constexpr int kPointsInFlight = 4;

struct CostOptions {
  int storageBytes = 2;  // bytes per float element in GMEM/SMEM (bf16 mixed precision); 0: the IR's dtype
  // Whether contractions may run on the tensor cores. The lowering stage
  // (lowering.h) prices a kernel whose launch stays on the CUDA cores with
  // this false: its contractions at the FMA units' rate.
  bool tensorCores = true;
  // Every running sum the masked-sums pass matches becomes a scan node
  // whatever the prices (ir/masked_sums.h): for the fuzzer, whose diagrams
  // are too small for a blocked scan to be chosen, so that random diagrams
  // exercise its launch too.
  bool scansAlways = false;
  // Contractions over a stream's rows made in the stream (FusionOptions::
  // rowProducts), in every fusion the passes and stages run.
  bool rowProducts = false;
  // Without rowProducts: the kernels fused with row products, where fusion
  // makes any, planned too, and kept where they price cheaper (the unfuse
  // stage, lowering/unfuse.h). False: never.
  bool rowProductsWhereCheaper = true;
  // Values stored in f32 whatever storageBytes says: under bf16 storage, the
  // graph inputs and outputs EmitOptions::f32Values names (a training step's
  // gradients for its f32 master weights) and what scatter-adds accumulate
  // into. Filled by the lowering stage (lowering.h, pricedAsWritten), so
  // that they are priced as written.
  std::set<NodeId> f32Stored = {};
};

struct Partition {
  std::map<std::string, int64_t> groupTiles;  // output axis -> tile size
  int64_t streamChunk = 0;                    // chunk of the stream axis (0: no stream)
  // Loop axes split across blocks (split-K): axis -> positions per block. The
  // blocks of one output tile add their partial results with atomics.
  std::map<std::string, int64_t> splitTiles = {};
};

// Whether the blocks sharing `splitTiles`'s axes out each add a partial sum
// into `output` (it lacks one of those axes: an f32 array zeroed first, added
// to by atomics) rather than store their own positions of it (an output
// along a shared stream, analysis/streamability.h, sharesStreamOut).
bool addsPartialSums(const Type& output, const std::map<std::string, int64_t>& splitTiles);

struct LevelCost {
  std::string level;        // "GMEM", "SMEM", "REG"
  double memoryBytes = 0;   // used at once (per block for SMEM, per thread for REG)
  double capacityBytes = 0;
  double movedBytes = 0;    // into and out of the level, whole kernel
  double seconds = 0;       // moved / bandwidth
};

struct KernelCost {
  std::vector<LevelCost> levels;  // GMEM, L2, SMEM, REG
  const LevelCost& level(const std::string& name) const;
  std::map<std::string, double> work;     // unit -> operations
  std::map<std::string, double> seconds;  // term -> time (levels, units, sync)
  int64_t blocks = 0;
  int64_t chunks = 0;     // stream chunks per block, times the positions of the axes it loops over
  int64_t synced = 0;     // the barriers a block passes: its stream chunks (its loops have none)
  double waveEfficiency = 1;
  double predicted = 0;   // seconds
  std::string bottleneck;
  bool fits = true;       // memory within every level's capacity
  // On-chip memory per block, SMEM and registers together: the M of the
  // closed forms (docs/performance.md, "Partition and cost").
  double onChipBytes = 0;
  // Set by the lowering stage (lowering.h): the engine the kernel's launch
  // runs on, and the launches made for it besides (staging copies), whose
  // time `seconds["helpers"]` and `predicted` include.
  std::string engine;
  int helperLaunches = 0;
  // False where the module makes no launch for the kernel at all (a
  // concatenation whose parts are written where it has them): it costs
  // nothing.
  bool launched = true;
  // Set after the write stage (lowering.h, recordLaunches): the emitted tile
  // launch's blocks (its grid) and, for a launch on the tensor cores (a GEMM
  // of the tile library, a tensor-core stream), the dynamic shared memory a
  // block takes, which is all of its shared memory (a ring of stages,
  // staging tiles, staged outputs), where the SMEM level's memoryBytes are
  // the partition's tile bytes the model prices. -1: not known (a CUDA-core
  // launch's static arrays are not counted here).
  int64_t launchedBlocks = -1, launchedSmemBytes = -1;
};

// What a kernel's partition constrains, derived from its nodes.
struct KernelShape {
  std::vector<Axis> groupAxes;                 // tiled across blocks
  std::string streamAxis;                      // chunked, with an accumulator
  int64_t streamExtent = 0;
  std::map<std::string, int64_t> tileMultiple; // axis -> tiles must be multiples (lcm of the constraints)
  // Group axes whose only constraint is the coalescing segment: tiles under
  // one segment (1, 2, 4, ...) are offered too, each array along them priced
  // as moving whole segments (a row reduction's output, one value a row:
  // rows of a long axis spread over as many blocks as there are rows).
  std::map<std::string, int64_t> segment;      // axis -> the coalescing segment in elements (below it: priced)
  int64_t coalescingBytes = 0;                 // the target's segment in bytes; 0 before addTileMultiples
  std::vector<std::string> loopAxes;           // other reduced axes looped over around the stream, one position at a time
  std::map<std::string, int64_t> loopExtent;   // loop axis -> its extent
  std::vector<std::string> splitAxes;          // loop axes blocks may share (split-K): the outputs are sums over them
  bool perPosition = false;  // a contraction at each position of the stream: a tensor-core stream
  double stepsRun = 1;       // the fraction of such a stream's steps a comparison of positions leaves to run
  int64_t longestSteps = 0;  // the most of them one block of rows runs (0: all)
  // On the CUDA cores (CostOptions::tensorCores false): how often the code
  // redoes each node's points (planning/recomputed_work.h); else empty.
  std::map<NodeId, double> redone;
  // Each input read through shifting views as the renamed type it is tiled
  // as (planning/shifted_axes.h); inputs read under their own names are absent.
  std::map<NodeId, Type> shiftedInputs;
};

// The operations a node performs and the unit that performs them
// ("tensor_bf16", "fp32", "sfu", ...).
struct NodeWork {
  std::string unit;
  double operations = 0;
};
NodeWork nodeWork(const Graph& graph, const Node& node, const Target& target, const CostOptions& options);

// Seconds a contraction of `operations` (2 a multiply-add) takes on the
// tensor cores when one of its operands, of `stagedBytes`, is written and read
// once more to feed them: what an IR pass's rewrite into a contraction costs
// (ir/one_hot_gathers.h, ir/masked_sums.h), priced before fusion. Infinite
// where the target has no tensor cores for the storage or they are off.
double stagedTensorContractionSeconds(double operations, double stagedBytes, const Target& target,
                                      const CostOptions& options);

// The launch zeroing an f32 array that atomics then add into
// (codegen/launch_list.cpp): a graph node and the zeros' bytes. Part of the
// predicted time of the kernel it is made for, and its own launch's.
double clearLaunchSeconds(const Type& type, const Target& target);

// The bytes an element of `type` takes in GMEM (floats at the storage's width).
int elementBytes(const Type& type, const CostOptions& options);
// The bytes an element of stored value `id` takes in GMEM: as elementBytes,
// but 4 for a float value options.f32Stored holds.
int storedElementBytes(const Graph& g, NodeId id, const CostOptions& options);

// The positions of the stream a block takes: all, or its share of a split.
int64_t streamShare(const KernelShape& shape, const Partition& partition);

// The bytes an array takes in GMEM.
double storedBytes(const Type& type, const CostOptions& options);

KernelShape kernelShape(const Graph& graph, const Kernel& kernel, const Target& target, const CostOptions& options);

KernelCost evaluate(const Graph& graph, const Kernel& kernel, const KernelShape& shape, const Partition& partition,
                    const Target& target, const CostOptions& options);

// A reduced axis longer than this is not held whole inside a chunk: the block
// loops over it (a weight gradient's batch and positions).
constexpr int64_t kInnerLimit = 256;
// The fewest positions of a stream a block takes where blocks share it out
// (a split stream): a column sum over 333 rows of 771 columns, 13 blocks
// whole, fills the device as 8 shares of 42 rows.
constexpr int64_t kSplitPositionsMin = 32;

// What the partition search minimises (partition_search.cpp).
enum class Objective {
  Time,       // the predicted time (the default: what llmc-compile uses)
  Transfers,  // the bytes moved into SMEM (the closed forms' H)
};

// Tile sizes the search tries along an axis of `extent` positions: multiples
// of `multiple`, growing by 1/growthDivisor each step (doubling without a
// constraint), up to the whole axis rounded up. Finite and ascending for any
// extent up to 2^63 - 1.
std::vector<int64_t> tileCandidates(int64_t extent, int64_t multiple, int64_t growthDivisor);

// The legal partition (every level within capacity, tiles multiples of their
// constraints) with the least predicted time or transfers.
Partition searchPartition(const Graph& graph, const Kernel& kernel, const KernelShape& shape, const Target& target,
                          const CostOptions& options, Objective objective = Objective::Time);

}  // namespace llmc
