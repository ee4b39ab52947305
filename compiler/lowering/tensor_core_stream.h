// Tensor cores for streamed launches: a stream over an axis c whose values at
// each (row r, position c) come from short contractions of two stored arrays
// (one along r, one along c, over a channel axis d: attention's scores q·k),
// and whose accumulators are sums and maxima of those values or contractions
// of them with a stored array along c (attention's p·v, and the backward's
// dq, dk, dv) runs as two chained tensor-core products per tile of 64
// positions, in the manner of FlashAttention-2 (runtime/cuda/device/llmc/
// stream_mma.cuh): the scores by mma.sync from shared-memory tiles, the
// launch's elementwise work on them in registers, the accumulation by mma.sync
// with the weights still in registers.
//
// Read from the stream analysis and the IR's structure alone: which axis is
// the row, which arrays are the tiles and which slots are products with a
// stored operand follows from the axes of the contractions and of the slots'
// factors. Where a launch does not fit, the plan says why and it stays on CUDA
// cores.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "analysis/step_skip.h"
#include "analysis/strided_view.h"
#include "codegen/cuda_kernel_writer.h"
#include "ir/ir.h"
#include "lowering/tensor_core_gemm.h"
#include "planning/target.h"

namespace llmc {

// The shape the device steps fix (stream_mma.cuh): a block of 4 warps of 16
// rows, steps of 64 positions; a tile holds 64 rows or 64 positions.
constexpr int kStreamRowsPerBlock = 64;
constexpr int kStreamPositionsPerStep = 64;
constexpr int kStreamThreads = 128;
// The most channels a tile holds where warps issue the products (registers:
// a warp's product accumulators hold 16 x channels floats, and its rows' A
// fragments channels / 16 x 4 more).
constexpr int kStreamMaxChannels = 128;
// Where the block's warpgroup issues them (wgmma reads both operands of a
// score from shared memory and takes N up to 256): the registers of the
// stream's fragments bound it further. A launch whose fragments count more
// than kStreamMaxRegisters a thread (fragmentRegisters, an overestimate at
// this end) stays off the stream: ptxas (sm_90a, 2026-12-08) fit attention's
// dK/dV stream at 160 channels, counted 312, in 252 registers without
// spilling, and spilled 2 KB a thread of it at 256 channels (376); a dK/dV
// stream with dQ its row product over 80 channels, counted 264, ran
// correctly at 2 blocks an SM (tests/lit/cuda/row_products.dg, own values).
constexpr int kWarpgroupStreamMaxChannels = 256;
constexpr int kStreamMaxRegisters = 320;
// wgmma reads a 128B-swizzled tile by its address bits: tiles start on this
// boundary, which the kernel finds in its shared memory (given this much more).
constexpr int64_t kSwizzleAlignment = 1024;

// Batch axes of a tile as one dimension of its tensor map: axes outermost
// first whose strides nest (each the next one's times its size), as the
// heads of grouped-query attention's queries split into groups and members.
struct TmaBatchDim {
  std::vector<Axis> axes;
  int64_t extent = 1, stride = 0;  // elements
};

// A tile the stream reads from a copy of its array rather than from the
// array itself (gemm_staging.h's launch, before the stream's): where the
// array's rows are not 16-byte aligned (a head dimension of 100, a view from
// an odd element), it is stored in f32 (accumulated by atomics; rounded to
// bf16 as it is copied, as a GEMM's operand is), or its channels are not
// contiguous. The copy packs the tile's elements into rows of `placement.ld`
// elements padded with zeros, its rows in the order they lie in the array;
// the tile's `layout` is then the copy's (offset 0), `placement.staged`
// where the elements lie in the array. One pass over the operand, against
// the whole stream on the CUDA cores over stored scores.
struct StreamTileStaging {
  GemmOperandPlacement placement;  // rows of `contiguous` channels, `ld` apart, copied from `staged`
  bool sourceF32 = false;
  std::string param;  // the kernel's pointer to the copy (where the warps load tiles by cp.async)
};

// One stored operand read as [64 outer positions][channels] tiles in shared memory.
struct StreamTile {
  NodeId value = -1;     // the value the launch reads (a view of `layout.array`)
  AffineLayout layout;   // where its elements lie in the stored array
  std::string outer;     // the tile's rows: the row axis or the stream axis
  Axis channel;          // contiguous in memory: the contracted axis, or the accumulator's
  int paddedChannels = 0;  // channel.size rounded up to 64 (the swizzled tile's column blocks)
  int64_t smemOffset = 0;  // bytes; a column tile has two stages, `stageBytes` apart
  bool sharesEarlierTile = false;  // the same elements as an earlier tile of the step: its stages, loaded once
  // Loaded by the TMA (a warpgroup's stream): the kernel's tensor-map
  // parameter, whose dims are (channels, outer, batchDims...): the group axes
  // along which the array has a stride, nested ones as one, at most two.
  std::string tensorMap;
  std::vector<TmaBatchDim> batchDims;
  std::optional<StreamTileStaging> staging;  // read from a staged copy
  int64_t stageBytes() const { return int64_t{kStreamPositionsPerStep} * paddedChannels * 2; }
};

// A contraction over a channel axis inside the stream: its value at (r, c) is
// a row tile times a column tile.
struct StreamScore {
  NodeId contraction = -1;
  StreamTile rows, columns;
};

// An accumulator slot that sums the elementwise weights times a stored
// operand along the stream axis: an output of channels per row.
struct StreamProduct {
  int slot = -1;        // index into the stream analysis's slots
  NodeId factor = -1;   // the slot's factor read from `values`
  StreamTile values;    // [64 positions][channels]
  // Floats between rows of the slot staged for the tail: odd, so that the
  // tail's threads reading down a column (rows apart) or along a row hit
  // distinct banks (at the tile's 64 rows would be a 32-way conflict).
  int stagedStride() const { return values.paddedChannels + 1; }
};

// A contraction over the block's rows of weights the step makes
// (planning/row_products.h: attention's dQ in the stream over the queries):
// out[position, channel] += sum over the block's 64 rows of
// weights[row, position] * values[row, channel], one more product a step
// (stream_wgmma.cuh, warpgroup_row_product: the weights staged in shared
// memory, the values' rows tile), each block adding its result into the f32
// output by atomics (zeroed by the launch list's clear first).
struct StreamRowProduct {
  NodeId contraction = -1;  // the output
  NodeId weights = -1;      // made by the step's elementwise work at (row, position)
  StreamTile values;        // [64 rows][channels], loaded with the rows (shared with a score's where the same)
  int64_t weightsOffset = 0;  // bytes: the step's weights, a [64 rows][64 positions] bf16 tile
};

// A stored value the step's elementwise work reads by the rows alone or by
// the stream alone (and the block's batch positions): a softmax's statistics
// in attention's backward. Loaded into registers ahead of the products that
// it would otherwise wait behind: a lane's two rows once before the loop, or
// its 16 positions of a step at the top of the step; or, along the stream
// where those 16 registers would cost the block its room (attention's dK/dV
// stream reads three such values), staged in shared memory a step ahead: a
// thread loads one position of the next step at the top of a step and
// stores it into the other stage at its end. A staged value the step divides
// by (a softmax's sums) is staged with its reciprocal beside it, taken once a
// position by the thread that stages it: otherwise each lane takes it at each
// of its scores (rcp.approx is a special-function instruction, as the exp
// beside it is: the two shared the SM's 16 a clock).
struct StreamPrefetch {
  NodeId value = -1;                         // the stored value (reached through views)
  bool alongStream = false;                  // by the stream's positions, else by the rows
  std::map<std::string, std::string> axes;   // its axes -> the launch's (through renames)
  int64_t smemOffset = -1;                   // bytes: staged, two stages of a step's floats; -1: in registers
  bool divisor = false;                      // staged: its reciprocal's two stages follow, kStagedBytes on
  bool staged() const { return smemOffset >= 0; }
  int registers() const { return staged() ? (divisor ? 2 : 1) : alongStream ? 16 : 2; }
  int64_t stagedBytes() const { return (divisor ? 2 : 1) * kStagedBytes; }
  static constexpr int64_t kStagedBytes = 2 * int64_t{kStreamPositionsPerStep} * 4;
};

// An output along the stream whose innermost axis is the stream's, stored
// each step through shared memory: the lanes write their fragment elements
// (a lane's two neighbouring positions at once) into their warp's tile of 16
// rows by the step's 64 positions, then the warp stores the tile 16 bytes a
// lane along the rows: whole sectors, a quarter of the store instructions of
// the lanes' pairs. Stored at the fragment elements, the stores' queue held
// such a stream at 3-4x its bytes' time (the H100, 2026-12-05: a forward's
// stored probabilities 229 us, through shared memory 146). An output whose
// innermost axis is the rows' stays at the fragment elements (8 rows a lane
// quarter, 16 bytes together): staged, d12-sized attention's dS ran 10%
// slower (638 us against 580), a smaller one 4% faster. bf16 storage only:
// with f32 storage such streams run on the CUDA cores.
struct StagedStepOutput {
  NodeId value = -1;
  int64_t smemOffset = 0;  // bytes: the four warps' tiles, kWarpBytes apart
  static constexpr int kVector = 8;  // bf16 values in 16 bytes
  // Elements from a row to the next: the step's 64 positions and 8 more, so
  // that the fragment's 8 rows of a pair write fall on distinct banks (and
  // each row starts 16-byte aligned).
  static constexpr int kPitch = kStreamPositionsPerStep + kVector;
  static constexpr int64_t kWarpBytes = 16 * kPitch * 2;
};

struct TensorCoreStream {
  // Who issues the products, and how the tiles load: each warp its 16 rows by mma.sync on tiles
  // every thread loads by cp.async (stream_mma.cuh); or the block's warpgroup all 64 rows by wgmma
  // on tiles the TMA loads (stream_wgmma.cuh: one thread issues a step's boxes, an mbarrier a stage
  // counts their bytes), where the target has wgmma with A from registers and the TMA, and each
  // tile's array has at most two strided group axes besides its rows and channels (a rank-4
  // tensor map). The fragments' layouts, and so the generated elementwise work, are the same.
  MmaIssuer issuer = MmaIssuer::Warp;
  int64_t barrierOffset = 0;  // bytes: the stages' two mbarriers (warpgroup)
  Axis rows;                 // the group axis tiled kStreamRowsPerBlock rows to a block (16 to a warp)
  std::vector<Axis> batch;   // the other group axes, one position per block
  Axis stream;               // the streamed axis, kStreamPositionsPerStep positions per step
  std::vector<StreamScore> scores;
  std::vector<StreamProduct> products;
  std::vector<StreamRowProduct> rowProducts;  // warpgroups only
  // Outputs along the stream (a stored dS beside attention's dK and dV, for
  // a GEMM of its own): each step stores them at its fragment elements; the
  // positions of the steps a condition skips, where they are 0 by the laws
  // (step_skip.h), are stored as zeros apart.
  std::vector<NodeId> stepOutputs;
  std::vector<StagedStepOutput> stagedOutputs;  // those of stepOutputs stored through shared memory
  std::optional<StreamStepSkip> skip;
  // Positions of the stream a block takes (whole steps), where its outputs
  // are plain sums over it, shared out across blocks that add their sums into
  // zeroed f32 outputs (LaunchPlan::splitTiles): few rows or a causal mask's
  // longest rows, spread over more blocks. 0: the whole stream.
  int64_t share = 0;
  int64_t grid = 1;
  int64_t smemBytes = 0;      // the larger of the tiles' and the accumulators' staging at the end,
                              // + with wgmma the mbarriers and kSwizzleAlignment (the kernel
                              // aligns its tiles)
  // Blocks an SM should hold at once (the kernel's __launch_bounds__ minimum):
  // as many as its shared memory allows and the registers its fragments need
  // leave room for (residentBlocks()).
  int residentBlocks = 1;
  std::map<int, int64_t> slotSmemOffset;  // bytes: each slot's values for the block's rows, after the stream
  // Loaded ahead (their registers counted in residentBlocks): those by the
  // rows always; those along the stream where their registers cost no
  // resident block the grid would use.
  std::vector<StreamPrefetch> prefetched;

  std::vector<const StreamTile*> loadedTiles() const;  // the rows' tiles, then a step's (not the shared ones)
  std::string describe() const;  // one line, for the source's comment and the JSON
};

struct TensorCoreStreamPlan {
  std::optional<TensorCoreStream> stream;
  std::string reason;  // why not, when not (empty for a launch without a stream)
};

// The most channels a tile of a stream holds on `target`: kWarpgroupStreamMaxChannels
// where its warpgroups issue bf16 wgmma with A from registers and the TMA loads tiles,
// else kStreamMaxChannels.
int streamMaxChannels(const Target& target);

// The row axis of a contraction inside a stream whose operand `rows` lies
// across the stream and `columns` along it: a group axis of `rows` that
// `columns` lacks, tiled 64 rows to a block; the others such (a query's heads
// where the keys have none: multi-query attention) are batch axes, one
// position a block. The longest is the row axis (the tiles fill best), the
// innermost of the longest on a tie: by sizes and order, never by names.
// Empty: none.
std::string streamRowAxis(const Type& rows, const Type& columns, const std::vector<Axis>& groupAxes);

// `stored`: values read from GMEM; `arrays`: how each is stored (bf16 tiles only); `names`: printedNames(graph).
TensorCoreStreamPlan planTensorCoreStream(const Graph& graph, const LaunchPlan& plan, const std::set<NodeId>& stored,
                                          const std::map<NodeId, StoredArray>& arrays,
                                          const std::vector<std::string>& names, const Target& target);

}  // namespace llmc
