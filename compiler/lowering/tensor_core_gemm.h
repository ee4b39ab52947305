// Tensor-core GEMMs for matmul-like launches: whether a launch that the
// instruction selection calls a bf16 matmul-like contraction can run on the
// tile library (runtime/cuda/device/llmc: gemm_sm90.cuh, TMA + wgmma, for
// sm_90a; gemm_sm80.cuh, cp.async + mma.sync, for sm_80), and how: which
// stored arrays are A and B, their majorness, leading dimensions and batch
// strides (read through the views between the arrays and the contraction),
// the tile configuration (the lowering stage's priced choice, gemm_tiles.h),
// the grid, block and shared memory. Where the library cannot
// express the launch the plan says why, and the launch stays on CUDA cores.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codegen/cuda_kernel_writer.h"
#include "ir/ir.h"
#include "lowering/instruction_selection.h"
#include "planning/target.h"

namespace llmc {

// One axis of a staged operand in the stored array: its extent and stride.
struct StridedExtent {
  int64_t extent = 1, stride = 0;
  auto operator<=>(const StridedExtent&) const = default;
};

// Where an operand lies when the library cannot read it there: rows or
// batches not 16-byte aligned (an odd leading dimension, a view from an odd
// element); for the TMA, a batch stride of 0 (a broadcast); or GEMM axes
// that no single stride describes (contracted axes in another order than the
// other operand's, as a stack of windows puts them; row axes that do not
// flatten). A staging launch (gemm_staging.h) first gathers it into a
// scratch buffer of rows padded with zeros (stagedRowMultiple); the GEMM
// reads that.
struct GemmStagedSource {
  int64_t offset = 0;
  // The staged rows and the elements along each, in the stored array: each
  // a list of axes outermost first, a staged index decomposing over them.
  std::vector<StridedExtent> rows, columns;
  int64_t batchOuterStride = 0, batchInnerStride = 0;
};

// One GEMM operand in memory, in the library's terms (gemm_common.cuh): rows
// of `contiguous` elements `ld` apart, in batch_outer x batch_inner copies.
// Staged (`staged` set): the fields describe the packed scratch buffer
// [batch outer][batch inner][rows][ld] the staging launch writes, `array` the
// stored array it copies from, `staged` where the rows lie there.
struct GemmOperandPlacement {
  NodeId array = -1;       // the stored array it reads
  int64_t offset = 0;      // elements from the array's start (views: index, slice)
  bool kMajor = true;      // contiguous along k; otherwise along m (A) or n (B)
  int64_t contiguous = 0;  // extent of the contiguous GEMM dimension
  int64_t rows = 0;        // extent of the other one
  int64_t ld = 0;          // elements between rows
  int64_t batchOuterStride = 0, batchInnerStride = 0;  // elements
  std::optional<GemmStagedSource> staged;

  int64_t stagedElements(int64_t batches) const { return batches * rows * ld; }
};

struct TensorCoreGemm {
  enum class Library { Sm90, Sm80 } library = Library::Sm90;
  NodeId contraction = -1;
  // GEMM axes of the contraction, each group outermost first: the row index
  // decomposes into `m`, the column index into `n`, the k index into `k`.
  // `batch` holds at most two axes: (outer, inner) or (inner).
  std::vector<Axis> batch, m, n, k;
  int64_t M = 1, N = 1, K = 1;
  int batchOuter = 1, batchInner = 1;
  GemmOperandPlacement a, b;  // a holds the m axes, b the n axes
  bool swapped = false;       // a is the contraction's second operand (so that n is the output's innermost axis)
  // Tile configuration: sm90 GemmConfig<BM, BN, stages>; sm80 GemmConfig<BM, BN, BK, stages, warpsM, warpsN>.
  int BM = 128, BN = 128, BK = 64, stages = 4, warpsM = 2, warpsN = 2;
  std::string tileChoice;     // how the tile relates to the planned partition, for the source's comment
  int threads = 0;
  int64_t smemBytes = 0;      // the config's kSmemBytes
  int64_t grid[3] = {1, 1, 1};
  // sm90: units of work per output tile, each over a slice of the k-steps
  // (split-K), where the partition shares a k axis out across blocks and the
  // outputs are plain sums added atomically into zeroed f32 arrays: each
  // unit's epilogue adds its partial tile.
  int splits = 1;
  // sm90: the consumer warpgroups take whole tiles in turn (ping-pong), one's
  // epilogue beside the other's wgmmas; else they split each tile's rows. The
  // lowering stage's choice (GemmTile), priced with the tile; before it, where
  // the epilogue has work of its own (a bias, an activation).
  bool pingPong = false;
  // sm90 ping-pong: shared memory for the epilogue's inputs, loaded ahead by
  // the producer warpgroup (GemmConfig's kInputBytes; 0: by the epilogue).
  int64_t inputBytes = 0;
  // sm90: blocks of a cluster over consecutive row tiles sharing the B tile,
  // each loading half of it into both (GemmConfig's kClusterM; 1: none).
  int clusterM = 1;

  std::string configType() const;  // "llmc::sm90::GemmConfig<128, 256, 4, llmc::Major::K, llmc::Major::K>"
  std::string describe() const;    // one line: library, tile, layouts
  int64_t batches() const { return int64_t{batchOuter} * batchInner; }
};

// gemm_sm90.cuh's GemmConfig::kMaxInputSlots; the stages the lowering keeps
// where it gives shared memory to a ping-pong epilogue's inputs.
constexpr int kMaxInputSlots = 8;
constexpr int kInputsAheadMinStages = 4;

struct TensorCorePlan {
  std::optional<TensorCoreGemm> gemm;
  std::string scalarReason;  // why not, where the launch is matmul-like
};

// The elements a staged row is padded to a multiple of: on sm_90a 64 (128
// bytes: the TMA reads rows that start on a 128-byte line at full rate, rows
// 16 bytes aligned at half, target.unalignedRowBandwidth), on sm_80 8 (the
// 16 bytes cp.async needs).
int64_t stagedRowMultiple(const TensorCoreGemm& gemm);

// `stored`: values read from GMEM; `names`: printedNames(graph); `target`: sm_90a or sm_80.
// Reads the operand through a staging copy (gemm_staging.h): aligned bf16
// rows of its own, filled before the GEMM.
void stageOperand(GemmOperandPlacement& p, const TensorCoreGemm& gemm);
// The same for an operand whose rows (`rows`) and row elements (`columns`)
// are each several axes of the stored array, with their strides there.
void gatherOperand(GemmOperandPlacement& p, const TensorCoreGemm& gemm, std::vector<StridedExtent> rows,
                   std::vector<StridedExtent> columns);

// The tiles the library has for `gemm`'s library, each with splits = 1: on
// sm_90a with consumers that split a tile's rows and with ping-pong ones.
std::vector<GemmTile> libraryTiles(const TensorCoreGemm& gemm);

// The most units that may share one tile's k-steps (split-K: sm_90a only, at
// least 8 k-steps a unit).
int64_t maxSplits(const TensorCoreGemm& gemm);

TensorCorePlan planTensorCoreGemm(const Graph& graph, const LaunchPlan& plan, const InstructionChoice& choice,
                                  const std::set<NodeId>& stored, const std::vector<std::string>& names,
                                  const Target& target);

}  // namespace llmc
