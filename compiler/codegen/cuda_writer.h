// The CUDA writer's internals, shared by the files that write each kind of
// launch (cuda_kernel_writer.h is the interface): one CudaWriter writes one
// launch's function body. Its methods are defined by concern:
//
//   cuda_writer.cpp                scopes, values, loads, elementwise work, reductions
//   cuda_writer_stream.cpp         streams on the CUDA cores: slots, lanes, aggregates, stores
//   cuda_writer_tile.cpp           tile launches: the GRID, points, slices
//   cuda_writer_tensor_stream.cpp  streams on the tensor cores (tensor_core_stream.h)
//   cuda_writer_launches.cpp       GEMM epilogues, grid sums, scatter-adds, clears
//   cuda_writer_scan.cpp           scans: a pass over the positions carrying each line's aggregate
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <tuple>
#include <vector>

#include "analysis/streamability.h"
#include "analysis/strided_view.h"
#include "codegen/cuda_kernel_writer.h"
#include "ir/print.h"
#include "lowering/tensor_core_stream.h"
#include "planning/cost_model.h"
#include "planning/fusion.h"
#include "planning/held_rows.h"
#include "planning/staged_rows.h"
#include "planning/transposed_reads.h"

namespace llmc::cuda_writer {

inline int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The C type a value is computed in: fp32 for every float, int for integers.
inline const char* valueType(DType d) {
  if (d == DType::Bool) return "bool";
  if (isInteger(d)) return "int";
  return "float";
}

inline std::string floatLiteral(double v) {
  if (std::isinf(v)) return v > 0 ? "LLMC_INF" : "(-LLMC_INF)";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s + "f";
}

// Where an index comes from: a C expression, and the scope that defines the
// variables it uses (0: none, a constant).
struct Binding {
  std::string expr;
  int scope = 0;
};
using Env = std::map<std::string, Binding>;

class CudaWriter {
 public:
  CudaWriter(const Graph& g, const LaunchPlan& plan, const std::map<NodeId, StoredArray>& stored,
         const std::vector<std::string>& names, const GemmEpilogueAxes* epilogue = nullptr,
         const TensorCoreStream* tensorStream = nullptr, DeviceResidency resident = {})
      : g_(g), plan_(plan), stored_(stored), names_(names), resident_(resident), epilogue_(epilogue),
        tcs_(tensorStream),
        approximate_(std::any_of(stored.begin(), stored.end(), [](const auto& a) { return a.second.ctype == "llmc_bf16"; })) {
    scopes_.push_back({-1, 0, "", {}});
  }

  WrittenKernel run();

 private:
  struct Scope {
    int parent;
    int depth;
    std::string header;
    std::vector<std::string> lines;
  };

  // ---- scopes: a block of code under a header (a loop, an if). Code that
  // depends only on the indices of an outer scope is emitted there, ahead of
  // the open inner scopes (which join their parent when closed).
  int open(int parent, std::string header);
  // A scope whose lanes no longer run in step: a loop strided by the lanes, or
  // code for one lane alone. A loop over the lane axis inside one runs whole in
  // each lane (shuffles there would mix lanes at different positions, or wait
  // on lanes that never come).
  int openLanes(int parent, std::string header);
  bool underLanes(int s) const;
  // Whether a loop over `axis` opened under `parent` is strided by the lanes.
  bool laneLoop(const std::string& axis, int parent) const { return axis == laneAxis_ && !underLanes(parent); }
  void close(int s);
  void emit(int s, std::string line) { scopes_[static_cast<size_t>(s)].lines.push_back(std::move(line)); }
  int depth(int s) const { return scopes_[static_cast<size_t>(s)].depth; }
  int deeper(int a, int b) const { return depth(a) >= depth(b) ? a : b; }
  // base_N, N counting up: two fresh names never meet, and a fresh name
  // never takes one of the fixed per-axis variables' names (i_AXIS, t_AXIS,
  // ... : axisVariable), which an axis name ending in _N could spell.
  std::string fresh(const std::string& base);
  bool axisVariable(const std::string& name);
  std::string define(int s, const std::string& ctype, const std::string& base, const std::string& expr);
  // define() for an elementwise node's value: an expression already defined
  // in the same scope is read from there. The recompute pass gives each
  // stream its own copy of a value (ir/recompute.h), and where copies land in
  // one kernel (GELU and its derivative in one GEMM's epilogue) they would be
  // computed twice: the compiler keeps a second tanh.approx, which is not
  // known to be pure. Operands are const values, so equal text is equal value.
  std::string defineValue(int s, const std::string& ctype, const std::string& base, const std::string& expr);
  static std::string memberStem(const std::string& printed);
  // A loop over a whole axis, binding it in env; over the block's share of
  // an axis split across blocks.
  int loop(int parent, const Axis& axis, Env& env);
  // The loop over a span's 8 positions of `axis` from `base` (a lane's 8, in
  // the span loop `span`), binding the axis in env: arrays along it are read
  // and written 16 bytes at once (load, store).
  int openSpanElements(int span, const std::string& axis, const std::string& base, Env& env);
  void closeAll(std::vector<int>& opened);

  int64_t axisSize(NodeId id, const std::string& axis) const;

  // ---- values
  std::string value(NodeId id, const Env& env);

  const std::map<NodeId, std::vector<AggregateTerm>>& aggregateTerms() const { return stream_.aggregateTerms; }

  // Row-major offset of a position of a stored array (Horner form), or at
  // its strides where it lies interleaved in a concatenation.
  std::string offset(NodeId id, const Env& env) const;
  std::string stridedOffset(NodeId id, const StoredArray& arr, const Env& env) const;
  // Whether the innermost `innermost` axes of stored array `id` lie nested
  // and contiguous, as row-major (16-byte accesses along them stay whole).
  bool contiguousAlong(NodeId id, size_t innermost) const;

  std::string load(const Node& n, const Env& own, int target);

  // Whether the innermost axes of `n` are the epilogue's columns, in order,
  // read at the contraction's columns, and its other axes are the same for
  // the 8 columns (bound outside the column loop: a row, a batch, a layer).
  // Its other strides are then multiples of the columns' count, so the 8
  // columns from col (a multiple of 8) are 16-byte aligned.
  bool alongColumns(const Node& n, const Env& own) const;
  // Whether `n` varies with the epilogue's rows (a residual, a row's
  // statistic; not a bias along the columns).
  bool atEpilogueRows(const Node& n) const;

  // Whether the epilogue's read of `n` at `at` is addressed by the call's
  // coordinates (batch, row, col) and constants alone: no value the functor
  // computes (a gathered index) goes into it, so load() can issue it first.
  bool addressedByCoordinates(const Node& n, const Env& at) const;

  std::string storeConversion(const StoredArray& arr, const std::string& v) const;

  std::string compute(const Node& n, const Env& own, int target);

  // A sum, a max or a contraction over its axes, looped whole.
  std::string reduction(const Node& n, const Env& own, int target);

  // table[a = index]; NaN (0 for integers) for an index out of range.
  std::string gather(const Node& n, const Env& own, int target);
  std::optional<std::string> gatheredSpan(const Node& n, const Env& own, int target);

  static std::string joinAxes(const std::vector<std::string>& axes);

  // ---- the stream: accumulator slots (head), their update per position of
  // the stream axis (body, with the online-softmax rescaling), and the
  // aggregates read from them afterwards (tail).
  struct SlotLayout {
    std::string name;
    std::vector<Axis> local;  // the accumulator's axes inside a point of the tile
    std::vector<std::string> innerAxes;  // reduced axes other than the stream axis, looped whole
    int maxSlotOfRescale = -1;  // a sum rescaled by a running max: that max's slot
    bool keepsPrevious = false; // a max some sum is rescaled by: its value before the update is kept
  };

  std::string slotRef(int k, const Env& env) const;
  std::string previousRef(int k, const Env& env) const;

  bool setUpStream();

  // The chunk-local product of a slot's factors at a position of the stream.
  // `leftOut`: a factor not multiplied in (a tensor-core product's operand).
  std::string core(int k, const Env& env, NodeId leftOut = -1);

  void streamLoop(int point, const Env& env, WrittenKernel& out);

  // Lanes take 8 adjacent positions each where the axis is a multiple of 8
  // long and holds a span of 8 x the point's lanes (every lane busy), under bf16 storage.
  bool lanesTake8(int64_t extent) const { return approximate_ && extent % 8 == 0 && extent >= 8 * lanes_; }

  // The lanes a point takes: a warp's 32, or, where the lane axis is shorter
  // than a warp's span of 8 positions a lane and a bf16 array lies along it
  // (16-byte loads), as many as hold it, several points a warp (attention's
  // 64 channels: 8 lanes, 4 points; at 2 positions a lane of 32 the loads are
  // 4 bytes: measured 2.4x the model's time on the H200, 2026-11-30). The
  // points must fill whole warps, and no tile may end past its axis (a point
  // there is skipped): the shuffles take all 32 lanes of a warp.
  int lanesPerPoint(int64_t points) const;
  std::string lanesNote() const;

  // A warp-per-point stream whose lanes can take 8 adjacent positions each:
  // a multiple of 8 positions, at least 256 (every lane busy), scalar slots,
  // and a bf16 array read along the
  // stream with the stream axis innermost (the loss's logits). (Its chunks
  // only split the loop: a CUDA-core launch reads its inputs from GMEM.)
  bool vectorisableLanes(int64_t extent) const;
  // The positions of the stream a block takes: all, or its share of a split.
  int64_t streamShare() const;
  // Every slot one scalar per point (a softmax's max and sum over a row),
  // all looping the same other reduced axes at each position (a group
  // norm's batch, or none).
  bool scalarSlots() const;

  // The stream's positions 8 to a lane: per span of 8 x lanes, each bf16 array read
  // along the stream (innermost) by one 16-byte load per lane; the running
  // maxima over the lane's 8 positions first, then each sum rescaled once to
  // them and its 8 terms added (the online softmax's update per group of
  // positions, as the tensor-core streams do it per step).
  //
  // `strided` (the axis not a multiple of 8, or no bf16 array contiguous along
  // it: the logits of an odd vocabulary): a lane's 8 positions are the
  // lanes' count apart, each read by its own load, past the end skipped. The
  // 8 loads are independent, so a lane has 8 in flight, as one 16-byte load
  // of bf16 has (Little's law: planning/cost_model.cpp's latency term). `start`,
  // `end`: the positions the block streams (its share where the stream is
  // split across blocks).
  void vectorLanes(int point, const Env& env, const std::string& start, const std::string& end, bool strided);

  // The lanes' scalar slots combined after a lane-strided stream: each
  // running max over the warp, the sums rescaled to it (exp(m_lane - m_warp))
  // first, then every sum over the warp.
  void mergeLaneSlots(int point);

  // A point's warps (lanes_ > 32, streamLanes) join their slots through
  // shared memory the same way: the maxima over the warps, each warp's sums
  // rescaled to them, then added. Every thread of the block runs the point
  // loop once (the block is the tile's points times their lanes, no
  // remainder tile), so all reach the barrier.
  void mergeWarpSlots(int point);

  // The lanes of a point of a lane stream (scalar slots along a long axis)
  // double, beyond a warp, while the blocks resident at once stay within the
  // device's threads, a block within 256 and each lane 32 positions or more:
  // a grid of few rows (the classifier's 777 rows of 50257 logits: 777 warps
  // kept 1.4 MB in flight of the ~2 MB the H200 needs) takes a block a row.
  // planning/cost_model.cpp's laneStream counts the threads so.
  int streamLanes(int64_t grid, int64_t points) const;

  int64_t innerSize(const std::string& axis) const;

  // exp(m_old - m_new) of a running max, once per position of the max.
  std::string rescaleFactor(int maxSlot, const Env& env);
  // A factor of a slot rescaled by exp(-k m) taken k times.
  std::string rescalePower(const std::string& factor, int slot) const;
  // A pivoted factor's pivot (analysis/streamability.h), as llmc_pivot(...).
  std::string pivot(const StreamFactor& f, const Env& env);

  // A value of the stream body that reads the running max of a slot: computed
  // once per position of the stream and of the axes of `node` (-1: none) and
  // of the max, after the max's update.
  std::string streamValue(NodeId node, int maxSlot, const Env& env, const std::string& base, const std::string& expr);

  // An aggregate after the stream: the sum of its terms over the slots.
  std::string aggregate(const Node& n, const Env& own, int target);

  // ---- launches
  void store(int scope, NodeId id, const Env& env);

  // A warp per point where the tile's points walk rows of at least a
  // warp's width: the longest axis (kLaneAxisMin or more) that a reduction of the launch loops over,
  // outside the group, in a launch without a stream. Its loops stride by the
  // 32 lanes (adjacent lanes, adjacent elements: coalesced), reductions over
  // it end in a shuffle butterfly, so every lane continues with the whole.
  // A stream's axis is the lanes' only where its chunks fill a warp, and not
  // where the arrays read along it are contiguous along the axis the tile's
  // threads walk instead (coalesced as they are): the gradient of a position
  // embedding, summed over a batch of 32 in chunks of 4, would leave 28 lanes
  // idle and the others reading rows 1536 bytes apart.
  static constexpr int64_t kLaneAxisMin = 32;

  // The layouts of the stored arrays the launch reads along `along`, through
  // the views it reads them through (a renamed axis is the array's own).
  std::vector<AffineLayout> readLayoutsAlong(const std::string& along) const;
  // Whether every stored array the launch reads along the stream lies
  // contiguous along it (the stream is the arrays' innermost axis).
  bool contiguousAlongStream() const;

  // Whether a stored array the launch reads along `along` is contiguous
  // along `walked`.
  bool contiguousAcrossPoints(const std::string& along, const std::string& walked) const;
  // A stream whose slots are all scalars per point (a softmax's max and
  // sum over a vocabulary) strides its positions by the lanes instead: each
  // lane keeps its own slots, merged after the stream (online-softmax style).
  std::string laneAxis() const;

  // How a thread's 8 adjacent points lie: `step` positions of `axis` (from
  // the thread's first, a multiple of step) times every position of the
  // group axes inside it, `inner` (whole in the tile, 8 / step positions in
  // all, outermost first; empty where step is 8).
  struct EightPoints {
    std::string axis;
    int64_t step = 8;
    std::vector<Axis> inner;
  };
  void tile(WrittenKernel& out);
  std::string unrolledAxis() const;
  // A plain launch whose threads take 8 consecutive elements of the
  // flattened index (planning/flat_points.h): the partition's blocks, each an
  // equal run of it.
  bool flatPoints() const;
  void flatTile(WrittenKernel& out);
  // A run of 8 consecutive elements of the flattened index, opened inside a
  // point's scope (cuda_writer_flat.cpp): the loop over the 8 (`e`) and the
  // variable saying how many of them are inside the arrays.
  struct FlatRun {
    int elements = 0;
    std::string inside;
  };
  FlatRun flatRun(int point, const std::vector<Axis>& axes, const std::string& first, int64_t total, bool wide, Env& env);

  // A plain tile's transposed reads (planning/transposed_reads.h): each
  // array's tile copied into shared memory by threads walking its contiguous
  // axis, before the points' loop (`origins`: the tile's first positions).
  void stageTransposedReads(const std::vector<std::string>& origins);
  // A staged value at `own` (its axes at the point's positions): its element
  // in shared memory; else empty (read as any other).
  std::optional<std::string> stagedValue(NodeId id, const Env& own, int target);

  // Rows held whole in shared memory (planning/staged_rows.h): where a tile
  // launch without a stream holds long rows of its lane axis, the block takes
  // one point at a time with all its threads (lanes_), and its rows go to
  // `out`'s dynamic shared memory. Whether it does: stagedRows_ non-empty.
  void setUpStagedRows(WrittenKernel& out);
  // A staged array's element (or a lane's 8) at `own`, read from shared
  // memory, its row copied there first for the point; else empty.
  std::optional<std::string> stagedRowValue(const Node& n, const Env& own, int target);
  // Rows held in registers (planning/held_rows.h): where a warp-per-point
  // tile launch's passes over the lane axis read the point's rows, each
  // lane loads its chunks of them once at the start of the point (`point`,
  // `env` binding its position) and every loop over the axis is unrolled
  // over the chunks (heldRowsLoop). Whether it does: heldRows_ non-empty.
  void setUpHeldRows(int point, const Env& env);
  int heldRowsLoop(int parent, const Axis& axis, Env& env);
  std::string chunkLoopHeader(const std::string& k) const;  // over a lane's chunks, the last's positions past the end skipped
  std::string chunkPosition(const std::string& k) const;    // a lane's first position of chunk k
  // A held array's element (or a lane's 8) at `own`, read from its registers; else empty.
  std::optional<std::string> heldRowValue(const Node& n, const Env& own, int target);
  // A reduction's lanes combined across the block's warps (after each warp's
  // shuffles), through shared memory: every thread then holds the whole.
  void combineWarps(const std::string& acc, const char* ctype, const std::string& combine, int target);

  // The thread's 8 adjacent points along an axis (the last group axis, from
  // eightBase_, unless named), a loop inside `parent`: bf16 arrays along the
  // axis load and store 16 bytes at once, at `span` (load, store).
  int openEightPoints(int parent, int span, Env& env);
  int openEightPoints(int parent, int span, const std::string& axis, const std::string& base, Env& env);
  int openEightPoints(int parent, int span, const EightPoints& eight, const std::string& base, Env& env);

  // Slots every thread can keep as scalars per point and combine with
  // another thread's by one + or max: no per-point axes, no sum rescaled by a
  // running max, the same axes looped inside each position.
  bool plainSlots() const;
  bool slicedSlots() const;

  // A stream on CUDA cores whose launch has fewer threads than the device
  // holds (the columns of a bias gradient: 384 blocks of 8 threads of 8
  // channels, each summing rows) deals its positions out to slices of the
  // block's threads, every slice taking each slices-th position, and joins
  // the slices' slots after it. Without them the loads in flight are too few
  // to cover the memory's latency (Little's law: 4.8 TB/s x ~0.8 us is ~4 MB
  // in flight across the H200; 384 blocks of 64 threads reading 2 bytes each
  // kept 1.2 TB/s). Slices double while the threads of the blocks resident
  // at once (a grid larger than the device's blocks runs in turns) stay
  // within the device's, a block within 256 threads, and each slice 8 or more
  // positions. The cost model's latency term counts the threads so.
  int streamSlices(int64_t grid, int64_t threadPoints) const;
  std::vector<NodeId> alongStreamAfterIt() const;
  void storeSlicedAlongStream(int point, const std::string& outside, Env env);

  // The slices' slots joined after the stream: a tree over shared memory,
  // each round the upper half of the slices handing theirs to the lower.
  void mergeSlices(int point, int64_t threadPoints, bool shared);
  void storeSlots(int scope, const std::string& at, int width);

  // A launch without lanes whose threads can take 8 adjacent points each,
  // under bf16 storage: along the last group axis (its tile and size
  // multiples of 8) where a bf16 array it reads or writes has that axis
  // innermost (a gradient of the logits, the concatenation of dq, dk, dv, a
  // bias's gradient summed over the rows); else, without a stream, over the
  // tile's innermost whole axes and the one outside them (8 / step positions
  // whole, a multiple of step of the next) where a bf16 output ends in those
  // axes: RoPE's channel pairs, [.. i r:2], 4 pairs a thread, whose parts
  // the unrolled points pick at compile time instead of diverging.
  // A stream's slots must then be plain (one per point, joined by + or max):
  // each becomes 8 registers, the points' loop inside the stream's positions.
  std::optional<EightPoints> pointsTake8(bool streamed) const;

  // Whether the launch reads or writes a bf16 array whose innermost axis is
  // `axis` (read through views: a renamed axis is the array's own): what
  // taking 8 adjacent positions at once turns into 16-byte accesses.
  bool bf16ArrayAlong(const std::string& axis) const;
  // Whether a bf16 output's innermost axes are `axes`, in order.
  bool bf16OutputEndsWith(const std::vector<std::string>& axes) const;

  // The launch's outputs at a point of the tile: each one's axes outside the
  // group looped whole; an output without some group axis stored by the
  // point at position 0 of it.
  void storeOutputs(int point, const Env& env) { storeOutputs(point, env, plan_.outputs); }
  void storeOutputs(int point, const Env& env, const std::vector<NodeId>& outputs);

  // A warp per point whose reduction over the lanes keeps fewer group axes
  // than the tail has (a row statistic broadcast over other axes: attention's
  // rowsum(dO * O) per (h, t) beside dS per (h, t, x)): a point is a position
  // of the axes the reduction keeps (its row), the reduction is made once
  // per row, and the row's lanes then stride over the tile's positions of
  // the other group axes (these, the spread axes) for the tail. Empty where
  // the tile has one position of them (a point is then a row already).
  std::vector<Axis> spreadAxes() const;
  // The outputs of a row: those without a spread axis stored once by the
  // row (lane 0), the others by its lanes over the spread positions, adjacent
  // lanes adjacent along the last spread axis (the outputs' innermost).
  void storeSpread(int point, const Env& env);

  // ---- a stream on the tensor cores (tensor_core_stream.h): one block per 64
  // rows and batch position, 16 rows per warp; per step of 64 positions, the
  // scores by mma.sync, the running maxima, then the sums and the products'
  // weights at the 32 fragment elements each lane holds, the products by
  // mma.sync; after the stream the slots are staged in shared memory and the
  // tail runs per row as in a CUDA-core tile.
  const StreamProduct* productOf(int slot) const;

  std::string tileOrigin(const StreamTile& tile, const std::string& outerPosition);

  // A tile by the TMA (one thread a block issues it), counted on `barrier`.
  std::string tmaTile(const StreamTile& tile, const std::string& smemAt, const std::string& outerPosition,
                      const std::string& barrier) const;

  std::string loadTile(const StreamTile& tile, const std::string& smemAt, const std::string& outerPosition,
                       int64_t outerSize);

  // The loop over the lane's two rows, binding the row axis (clamped into the
  // array: rows past the end are computed on the last row and never stored).
  int openRows(int parent, Env& env);

  // The loops over the lane's 16 columns of the step, binding the stream
  // axis; `valid` is set to the condition of a position inside the axis.
  int openColumns(int parent, Env& env, std::vector<int>& opened, std::string& valid);

  // The box of a step starting at `step` (a CUDA expression) and the
  // block's rows, for the skip's conditions (step_skip.h).
  TextRange stepBox(const std::string& step) const;

  static std::string masked(const std::string& valid, const std::string& v, const char* otherwise);

  void tensorCoreStream(WrittenKernel& out);
  // What the parts of a tensor-core stream's body share (tensorCoreStream).
  struct TcsBody {
    explicit TcsBody(const TensorCoreStream& stream) : t(stream) {}
    const TensorCoreStream& t;
    bool warpgroup = false;               // wgmma and the TMA (sm_90a); else mma.sync and cp.async
    const char* issuer = "warp";          // who issues the MMAs: "warpgroup" or "warp"
    Env env;                              // the group axes other than the rows, at the block's origin
    std::string rowOrigin;                // the block's first row
    int64_t positions = 0;                // the stream's extent
    int64_t rowBytes = 0, stepBytes = 0;  // the TMA's bytes: the row tiles, a step's other tiles
  };
  TcsBody tcsBlockOrigin(WrittenKernel& out);
  void tcsTmaStep(const TcsBody& b, int scope, const std::string& stage, const std::string& first, bool withRows);
  void tcsLoadStep(const TcsBody& b, int scope, const std::string& stage, const std::string& first);
  void tcsFirstStep(TcsBody& b);
  void tcsSteps(const TcsBody& b);
  void tcsElementwise(const TcsBody& b, int parent);
  // The step's row products (tensor_core_stream.h, StreamRowProduct): their
  // weights staged for the tensor cores, the products, each block's share
  // added into the f32 outputs (cuda_writer_row_products.cpp).
  void tcsRowProducts(const TcsBody& b, int step);
  void tcsAddRowProduct(const TcsBody& b, int step, size_t k);
  // Stored values the step reads along only the rows or only the stream (a
  // softmax's statistics), loaded into registers ahead of the products that
  // they would otherwise wait behind: per row once before the loop, per
  // position at the top of each step (tcsPrefetchRows, tcsPrefetchColumns).
  struct Prefetched {
    std::string name;  // the registers: [2] a lane's rows, [8][2] its positions of the step
    bool alongStream = false;
    std::map<std::string, std::string> axes;  // the stored array's axes -> the launch's (through renames)
    int64_t smemOffset = -1;  // staged in shared memory a step ahead (StreamPrefetch::staged)
    int half = 0;             // staged: the half of the block's threads that loads it
    std::string reciprocal;   // staged with its reciprocal (StreamPrefetch::divisor): that array's name
    bool staged() const { return smemOffset >= 0; }
  };
  std::map<NodeId, Prefetched> prefetched_;
  std::string rowInside_;  // openRows: the lane's row lies inside the axis (empty: every row does)
  std::string rowBinding_, columnBinding_;  // the rows' and positions' indices where the step reads them
  bool prefetching_ = false;
  void tcsFindPrefetched(const TcsBody& b);
  // A staged value's (or its reciprocal's) element at the lane's position.
  std::string stagedRead(const std::string& array) const;
  void tcsPrefetchRows(const TcsBody& b);
  void tcsPrefetchColumns(const TcsBody& b, int step);
  void tcsStageAlong(const TcsBody& b, int scope, const std::string& first, const std::string& into);
  void tcsStoreAlongAhead(int step);
  static Env storedAt(const Prefetched& ahead, const Env& launch);
  std::optional<std::string> prefetchedValue(const Node& n, const Env& own) const;
  void tcsStageSlots(const TcsBody& b);
  void tcsSkippedOutputs(const TcsBody& b);
  std::string tcsGatherPair(NodeId o, const Env& e, const std::vector<int>& opened);
  bool tcsPairStore(const TcsBody& b, NodeId o, const Env& e, const std::vector<int>& opened);
  bool tcsStageOutput(const TcsBody& b, NodeId o, const Env& e, const std::vector<int>& opened);
  void tcsStoreStaged(const TcsBody& b, int step);
  void tcsTail(TcsBody& b, WrittenKernel& out);

  // The channel axis of a product slot when it is the innermost axis of
  // output `o` and the only one outside the launch's group; else null.
  const Axis* channelsInnermost(NodeId o) const;

  // Binds `axes` (outermost first) to the digits of the flat index `flat`.
  static void bindDigits(const std::vector<Axis>& axes, const std::string& flat, int scope, Env& env);

  // operator()(batch, row, col, v, count) of a GEMM's epilogue functor: a
  // loop over the 8 columns (unrolled, so v stays in registers); values that
  // depend on the row alone are computed once, before it.
  void gemmEpilogue();

  // Thread index over every element of `t`, with the axes bound in env.
  // A grid-stride loop over the points of `t`, binding its axes; at most
  // `maxBlocks` blocks.
  int flatPoints(const Type& t, Env& env, WrittenKernel& out, int64_t maxBlocks = INT_MAX);

  // isGridSum: each thread sums its share of the array in a grid-stride
  // loop, the lanes of a warp combine theirs with shuffles, the warps theirs
  // in shared memory, and one atomic add per block lands in the zeroed
  // output. A few blocks per SM keep the atomics few while every SM streams.
  void gridSum(WrittenKernel& out);

  void scatter(WrittenKernel& out);

  // A scan launch (LaunchPlan::Kind::Scan, planning/scan_layout.h): each
  // thread its line's slice of positions a round, scanned in registers; the
  // slices' totals scanned in shared memory; the carry added; stored.
  void scanLines(WrittenKernel& out);
  std::string operatorLambda(const Graph& op) const;

  // Zeroes a whole f32 array: 16-byte stores where it is 4 floats a multiple
  // and 16-byte aligned (a caller may place it anywhere), else 4-byte ones
  // (they cleared the token embedding's 154 MB gradient at 1.6 TB/s on the
  // H200, 2026-11-30).
  void clear(WrittenKernel& out);

  const Graph& g_;
  const LaunchPlan& plan_;
  const std::map<NodeId, StoredArray>& stored_;
  const std::vector<std::string>& names_;  // printedNames(g_)
  std::map<std::tuple<int, std::string, std::string>, std::string> valueDefined_;  // defineValue's (scope, type, expression)
  const DeviceResidency resident_;         // the device's threads and blocks at once (0 threads: not known, no slices)
  std::vector<Scope> scopes_;
  std::set<int> laneScopes_;  // openLanes: scopes whose lanes do not run in step
  std::map<std::string, std::string> cache_;
  std::set<NodeId> reads_;
  int floor_ = 0;  // values are computed no further out than this scope
  int positions_ = 0;  // the loop over the positions of the stream axis
  int slices_ = 1;     // the block's threads share a point's stream in this many slices (streamSlices)
  int blockThreads_ = 256;  // the launch's block
  std::string eightBase_;  // set: each thread takes 8 adjacent points, from this one (pointsTake8)
  // A CUDA-core stream's outputs along its axis stored at each position in
  // the stream (streamStepOutputs), not made again after it; and the
  // condition of a point past the end of its tile that the stream still
  // runs (sliced: every thread reaches the slices' joins), its stores skipped.
  std::vector<NodeId> streamStored_;
  std::string pointOutside_;
  std::vector<NodeId> streamStepOutputs() const;
  std::vector<NodeId> outputsAfterStream() const;
  EightPoints eight_;      // how they lie, where eightBase_ is set
  // Lanes taking 8 adjacent positions (vectorLanes, loop): each element's
  // position variable -> the span loop around it and the span's first
  // position; the 8 values of an array loaded at a span (by array and offset).
  struct VectorSpan {
    std::string base;  // the span's first position
    int scope = 0;     // the span loop
    int elements = 0;  // the loop over its 8 positions
    // Where the 8 positions run over several axes (a thread's 8 points over
    // the tile's whole innermost axes, EightPoints): those axes, outermost
    // first, the first from `base`, the others from 0; an array's innermost
    // axes must be these to be read or written 16 bytes at once. Empty: the
    // innermost axis alone.
    std::vector<std::string> axes = {};
    // Flat points (planning/flat_points.h): the 8 run over all the group
    // axes along the flattened index. Each axis' variable at an element and
    // at the span's first, in the order of `axes`; an array is read or
    // written 16 bytes at once where it has exactly these axes at these
    // positions. `remaining`: how many of the 8 are inside the arrays (8 or
    // more but at the very end).
    std::vector<std::string> elementVars = {};
    std::vector<std::string> startVars = {};
    std::string remaining = {};
  };
  std::map<std::string, VectorSpan> vectorElements_;
  std::map<int, std::vector<std::string>> afterClose_;  // lines a scope's parent gets after the scope (a span's stores)

  // The span of 8 positions a value of `n` at `env` is read or written in:
  // where its innermost axis is a lane's (or thread's) element position and
  // its other indices are known at the span (bound in it or outside), outside
  // any branch taken per element; else null.
  const VectorSpan* vectorSpanOf(const Node& n, const Env& env) const;
  Env spanStart(const Node& n, const VectorSpan& span, const Env& env) const;
  std::map<std::string, std::string> vectorLoads_;
  std::map<int, int> spanOf_;  // a lane loop's scope of 8 positions -> its span's scope
  int counter_ = 0;
  std::set<std::string> axisNames_;  // of the values the kernel touches (axisVariable), made on first use
  StreamAnalysis stream_;
  std::vector<SlotLayout> slots_;
  const GemmEpilogueAxes* epilogue_ = nullptr;  // set: writing a GEMM's epilogue functor
  const TensorCoreStream* tcs_ = nullptr;      // set: writing a stream on the tensor cores

  // exp, division and 1/sqrt in the launch's float arithmetic. Under bf16
  // storage (any array of the module stored bf16) they are the hardware's
  // approximations: llmc_fast_exp (ex2.approx.ftz after x log2(e): 2 ulp, plus 2 per unit of |x|),
  // llmc_fast_divide and llmc_fast_rsqrt (div and rsqrt .approx.ftz: 2 ulp), far inside bf16's 2^-8, as FlashAttention
  // and llm.c's kernels use them. The accurate forms cost tens of instructions
  // each: per score element of attention, per element of a layernorm's
  // backward recomputing 1/sqrt(variance). With f32 storage the kernels keep
  // expf, IEEE division and 1.0f / sqrtf (the f32 oracle's 1e-5).
  const bool approximate_;
  // stored_'s keys, the set the analyses take: made once a launch, on first use.
  const std::set<NodeId>& storedIds() const {
    if (!storedIds_) {
      storedIds_.emplace();
      for (const auto& [id, array] : stored_) storedIds_->insert(storedIds_->end(), id);
    }
    return *storedIds_;
  }
  mutable std::optional<std::set<NodeId>> storedIds_;
  std::string exp(const std::string& x) const;
  // An elementwise operation's C spelling (isF: on floats), for compute() and a scan's operator.
  std::string unaryExpression(UnaryOp op, const std::string& x, bool isF) const;
  std::string binaryExpression(BinaryOp op, const std::string& x, const std::string& y, bool isF) const;
  std::string divide(const std::string& x, const std::string& y) const;
  std::string reciprocal(NodeId divisor, const Env& env, const std::string& y);
  const char* rescale() const { return approximate_ ? "llmc_fast_rescale" : "llmc_rescale"; }
  std::string reciprocalSqrt(const std::string& x) const;
  std::map<NodeId, int> scoreIndex_;           // its score contractions: the register tile sc<k>
  struct {
    std::string half, column, element;  // the loop variables of the fragment element being written
  } fragment_;
  bool inTail_ = false;                        // past the stream: slots read from shared memory
  std::string laneAxis_;                       // set: a warp per point, its lanes along this axis
  std::vector<Axis> spread_;                   // with laneAxis_: group axes the lanes spread over after the reduction (spreadAxes)
  int lanes_ = 32;                             // with laneAxis_: the lanes a point takes (lanesPerPoint)
  Env contractionAt_;  // the epilogue's position of the contraction, v[e]
  Env firstColumn_;    // the same at column col (e = 0)
  bool columnsVectorised_ = false;  // the epilogue's rows hold a multiple of 8 columns
  std::map<NodeId, std::string> fixed_;  // values known where the code is written (a step's unmasked comparison)
  std::set<NodeId> readInLaunch_;        // computed values another node of the launch reads (run())
  bool wholeStep_ = false;  // writing a step whose positions all lie inside the stream axis: no clamps, no masks
  std::vector<WrittenKernel::EpilogueInput> epilogueInputs_;  // WrittenKernel::epilogueInputs
  struct StagedRead {
    TransposedRead read;
    std::string buffer;  // its tile in shared memory
  };
  std::map<NodeId, StagedRead> staged_;           // stageTransposedReads
  StagedRows stagedRows_;                         // setUpStagedRows
  std::map<NodeId, std::string> rowBuffers_;      // a staged array -> its row in shared memory, once copied
  HeldRows heldRows_;                             // setUpHeldRows
  std::map<NodeId, std::string> heldBuffers_;     // a held array -> its registers
  std::map<int, std::string> heldChunk_;          // a loop over a lane's chunks (heldRowsLoop) -> its chunk index
  std::map<std::string, std::string> heldPositions_;  // a chunk loop's position variable (one a chunk) -> its chunk index
  std::map<std::string, std::string> pointVars_;  // group axis -> the variable of the point's position along it
};

}  // namespace llmc::cuda_writer
