#include "lowering/tensor_core_gemm.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>

#include "analysis/strided_view.h"
#include "ir/print.h"
#include "lowering/gemm_tiles.h"
#include "planning/fusion.h"

namespace llmc {

namespace {

int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// A group of GEMM axes as one strided dimension: the axes in their order
// (outermost first), each one's stride the next one's times its size.
struct Collapsed {
  int64_t extent = 1, stride = 0;
};

std::optional<Collapsed> collapse(const std::vector<Axis>& axes, const AffineLayout& layout) {
  Collapsed c;
  if (axes.empty()) return c;
  c.stride = layout.strides.at(axes.back().name);
  int64_t inner = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    if (layout.strides.at(axes[i].name) != c.stride * inner || c.stride == 0) return std::nullopt;
    inner *= axes[i].size;
  }
  c.extent = inner;
  return c;
}

// Ops an epilogue functor can compute at one point of the contraction's result.
bool pointwise(Op op) {
  switch (op) {
    case Op::Unary:
    case Op::Binary:
    case Op::Compare:
    case Op::Select:
    case Op::Cast:
    case Op::Constant:
    case Op::Pos:
    case Op::Split:
    case Op::Merge:
    case Op::Rename:
    case Op::Index:
    case Op::Slice:
    case Op::Transpose:
    case Op::Broadcast:
    case Op::StopGradient:
    case Op::Concat: return true;
    default: return false;
  }
}

// Walks what a launch's outputs are made of after `contraction`, each node
// once: `loaded(node)` for a stored array it reads (not made in the launch),
// `computed(node)` for the rest, whose operands are then walked unless it
// returns false (the walk stops).
template <class Loaded, class Computed>
void walkEpilogue(const Graph& g, const LaunchPlan& plan, NodeId contraction, const std::set<NodeId>& stored,
                  Loaded loaded, Computed computed) {
  std::set<NodeId> seen;
  std::vector<NodeId> work(plan.outputs.begin(), plan.outputs.end());
  while (!work.empty()) {
    NodeId id = work.back();
    work.pop_back();
    if (id == contraction || !seen.insert(id).second) continue;
    const Node& n = g.node(id);
    if (stored.count(id) && !plan.computed.count(id)) {
      loaded(n);
      continue;
    }
    if (!computed(n)) return;
    work.insert(work.end(), n.operands.begin(), n.operands.end());
  }
}

// Why the work after the contraction is not an elementwise epilogue of it
// (empty: it is).
std::string epilogueObstacle(const Graph& g, const LaunchPlan& plan, NodeId contraction, const std::set<NodeId>& stored,
                             const std::vector<std::string>& names) {
  const Type& result = g.node(contraction).type;
  for (NodeId o : plan.outputs) {
    const Type& t = g.node(o).type;
    bool same = t.axes.size() == result.axes.size();
    for (const Axis& a : t.axes) same = same && result.has(a.name);
    if (!same)
      return fmt::format("output {} does not have the contraction's axes, so the epilogue cannot store it once per point",
                         names[static_cast<size_t>(o)]);
  }
  std::string why;
  walkEpilogue(
      g, plan, contraction, stored, [](const Node&) {},
      [&](const Node& n) {
        if (pointwise(n.op)) return true;
        why = fmt::format("the launch also computes {} ({}) after the contraction, which an elementwise epilogue cannot",
                          names[static_cast<size_t>(n.id)], opName(n.op));
        return false;
      });
  return why;
}

// Whether the launch computes more after its contraction than views of it
// and conversions: a bias, an activation, a derivative read from a stored
// input; what ping-pong consumers run beside the other's mainloop.
bool epilogueHasWork(const Graph& g, const LaunchPlan& plan, NodeId contraction) {
  for (NodeId id : plan.computed) {
    const Node& n = g.node(id);
    if (id != contraction && !isView(n) && !isFree(g, n) && n.op != Op::Cast) return true;
  }
  return false;
}

// What the epilogue reads of stored arrays at its rows, in bytes a column
// group of 8 (a GELU's saved pre-activation or a residual along the columns:
// 16, one bf16 load; a softmax's row statistic: 4, a float), rounded as the
// functor's Ahead struct is: loads that miss L1 at every piece, which the
// sm_90a library can issue ahead into shared memory (GemmConfig's
// kInputBytes). A bias, along the columns alone, stays in L1.
int64_t epilogueRowInputBytes(const Graph& g, const LaunchPlan& plan, NodeId contraction,
                              const std::set<NodeId>& stored, const std::vector<Axis>& rows,
                              const std::vector<Axis>& columns) {
  auto hasAny = [](const Type& t, const std::vector<Axis>& axes) {
    return std::any_of(axes.begin(), axes.end(), [&](const Axis& a) { return t.has(a.name); });
  };
  int64_t columnCount = 1;
  for (const Axis& a : columns) columnCount *= a.size;
  int64_t bytes = 0;
  bool vectors = false;
  walkEpilogue(
      g, plan, contraction, stored,
      [&](const Node& n) {
        if (!hasAny(n.type, rows)) return;
        // Along the columns, a 16-byte load only where rows hold whole groups
        // of 8 (the writer's columnsVectorised); else operator() reads it itself.
        const bool alongColumns = hasAny(n.type, columns);
        if (alongColumns && columnCount % 8 != 0) return;
        bytes += alongColumns ? 16 : 4;
        vectors = vectors || alongColumns;
      },
      [](const Node&) { return true; });
  return vectors ? ceilDiv(bytes, 16) * 16 : bytes;
}

// Split-K for a launch whose partition shares k axes out across blocks
// (plan.splitTiles: its outputs are atomic sums): few output tiles over a
// long K, as weight gradients are (768 x 768 over 32K rows is 24 tiles of
// 128 x 192 for 132 SMs). The persistent blocks take units in waves, so the
// time goes as waves(units) / splits: the fewest splits within 10% of the
// best, up to the partition's own and 8 k-steps a unit (each split adds its
// partial tile once more by atomics).
int splitK(const LaunchPlan& plan, const TensorCoreGemm& gemm, int64_t tiles, int smCount) {
  int64_t planned = 1;
  for (const auto& [axis, perBlock] : plan.splitTiles)
    for (const Axis& k : gemm.k)
      if (k.name == axis) planned *= ceilDiv(k.size, perBlock);
  const int64_t limit = std::min<int64_t>(planned, maxSplits(gemm));
  if (limit <= 1 || smCount <= 0) return 1;
  auto time = [&](int64_t s) { return double(ceilDiv(tiles * s, smCount)) / double(s); };
  double best = time(1);
  for (int64_t s = 2; s <= limit; ++s) best = std::min(best, time(s));
  for (int64_t s = 1; s <= limit; ++s)
    if (time(s) <= 1.1 * best) return static_cast<int>(s);
  return 1;
}

}  // namespace

std::vector<GemmTile> libraryTiles(const TensorCoreGemm& gemm) {
  std::vector<GemmTile> legal;
  if (gemm.library == TensorCoreGemm::Library::Sm90) {
    // Two consumer warpgroups of m64 blocks, splitting a tile's rows or (ping-pong) a whole tile
    // each; one wgmma n of 64..256; at most 128 accumulators a thread. Consumers that split rows
    // may run as clusters of two blocks sharing B (gemm_sm90.cuh), B in halves of whole 64-column
    // blocks.
    for (bool pingPong : {false, true})
      for (int tm : {64, 128, 256})
        for (int tn : {64, 128, 192, 256}) {
          const int rowsPerConsumer = pingPong ? tm : tm / 2;
          if (rowsPerConsumer < 64 || rowsPerConsumer > 128 || (rowsPerConsumer / 64) * tn / 2 > 128) continue;
          legal.push_back({tm, tn, 1, pingPong});
          if (!pingPong && tn % 128 == 0) legal.push_back({tm, tn, 1, pingPong, 2});
        }
  } else {
    // 2 x BN/64 warps of (BM/2) x 64; BM = 256 would need 256 accumulators a thread.
    for (int tm : {64, 128})
      for (int tn : {64, 128, 256}) legal.push_back({tm, tn, 1});
  }
  return legal;
}

int64_t maxSplits(const TensorCoreGemm& gemm) {
  if (gemm.library != TensorCoreGemm::Library::Sm90) return 1;
  return std::max<int64_t>(1, ceilDiv(gemm.K, gemm.BK) / 8);
}

std::string TensorCoreGemm::configType() const {
  auto major = [](bool kMajor) { return kMajor ? "llmc::Major::K" : "llmc::Major::MN"; };
  if (library == Library::Sm90 && clusterM > 1)
    return fmt::format("llmc::sm90::GemmConfig<{}, {}, {}, {}, {}, {}, {}, {}>", BM, BN, stages, major(a.kMajor),
                       major(b.kMajor), pingPong, inputBytes, clusterM);
  if (library == Library::Sm90)
    return fmt::format("llmc::sm90::GemmConfig<{}, {}, {}, {}, {}{}{}>", BM, BN, stages, major(a.kMajor),
                       major(b.kMajor), pingPong ? ", true" : "", inputBytes > 0 ? fmt::format(", {}", inputBytes) : "");
  return fmt::format("llmc::sm80::GemmConfig<{}, {}, {}, {}, {}, {}, {}, {}>", BM, BN, BK, stages, warpsM, warpsN,
                     major(a.kMajor), major(b.kMajor));
}

std::string TensorCoreGemm::describe() const {
  const char* staged = a.staged && b.staged ? "; A and B staged to aligned rows"
                       : a.staged          ? "; A staged to aligned rows"
                       : b.staged          ? "; B staged to aligned rows"
                                           : "";
  return fmt::format("tensor cores: {} {}x{}x{} tiles, {} stages{}{}; GEMM {}x{}x{}{}{}, A {}-major, B {}-major{}",
                     library == Library::Sm90 ? "llmc::sm90::gemm (TMA + wgmma)" : "llmc::sm80::gemm (cp.async + mma.sync)",
                     BM, BN, BK, stages,
                     pingPong ? ", ping-pong consumers"
                     : clusterM > 1 ? fmt::format(", clusters of {} blocks sharing B", clusterM)
                                    : "",
                     inputBytes > 0 ? fmt::format(", epilogue inputs loaded ahead ({} KB)", inputBytes / 1024) : "", M, N, K,
                     batchOuter * batchInner > 1 ? fmt::format(" x {} batches", batchOuter * batchInner) : "",
                     splits > 1 ? fmt::format(", split-K {} ways (atomic adds)", splits) : "", a.kMajor ? "K" : "M",
                     b.kMajor ? "K" : "N", staged);
}

namespace {

// The tile: the lowering stage's (plan.gemmTile) where the library has it,
// else the library's tile nearest the planned partition's extents along the
// rows and columns.
void chooseTile(const Graph& g, const LaunchPlan& plan, NodeId contraction, TensorCoreGemm& gemm) {
  std::vector<GemmTile> legal = libraryTiles(gemm);
  for (const GemmTile& t : legal)
    if (plan.gemmTile.chosen() && t.bm == plan.gemmTile.bm && t.bn == plan.gemmTile.bn &&
        t.pingPong == plan.gemmTile.pingPong && t.cluster == plan.gemmTile.cluster) {
      gemm.BM = t.bm, gemm.BN = t.bn;
      gemm.pingPong = gemm.library == TensorCoreGemm::Library::Sm90 && t.pingPong;
      gemm.clusterM = gemm.library == TensorCoreGemm::Library::Sm90 ? t.cluster : 1;
      gemm.tileChoice =
          gemmTileOverride() == gemmTileName(t)
              ? "the tile LLMC_GEMM_TILE names"
              : fmt::format("the cheapest of the library's {} tiles as the cost model prices them", legal.size());
      return;
    }
  // Before the lowering stage has priced them: consumers that ping-pong
  // where the epilogue has work of its own, the tile nearest the partition.
  std::erase_if(legal, [](const GemmTile& t) { return t.cluster > 1; });
  gemm.pingPong = gemm.library == TensorCoreGemm::Library::Sm90 && epilogueHasWork(g, plan, contraction);
  std::erase_if(legal, [&](const GemmTile& t) { return t.pingPong != gemm.pingPong; });
  auto planned = [&](const std::vector<Axis>& axes) {
    int64_t t = 1;
    for (const Axis& a : axes) t *= plan.tiles.count(a.name) ? plan.tiles.at(a.name) : a.size;
    return t;
  };
  const int64_t bm = planned(gemm.m), bn = planned(gemm.n);
  auto distance = [&](const GemmTile& t) {
    return std::abs(std::log2(double(t.bm) / double(bm))) + std::abs(std::log2(double(t.bn) / double(bn)));
  };
  GemmTile best = legal[0];
  for (const GemmTile& t : legal)
    if (distance(t) < distance(best) - 1e-9 ||
        (std::abs(distance(t) - distance(best)) < 1e-9 && t.bm * t.bn > best.bm * best.bn))
      best = t;
  gemm.BM = best.bm, gemm.BN = best.bn;
  gemm.tileChoice = best.bm == bm && best.bn == bn
                        ? fmt::format("the planned tile {}x{}", bm, bn)
                        : fmt::format("the library's tile nearest to the planned {}x{} (not one of its configurations)", bm, bn);
}

// The pipeline's stages (the deepest that fit the shared memory), the
// threads and the grid of the tile chosen. `rowInputBytes`: what the
// epilogue reads at its rows a column group (epilogueRowInputBytes).
void sizeLaunch(const LaunchPlan& plan, const Target& target, int64_t rowInputBytes, TensorCoreGemm& gemm) {
  const int64_t smemLimit = target.level("SMEM").maxPerBlock;
  const int64_t tiles = ceilDiv(gemm.M, gemm.BM) * ceilDiv(gemm.N, gemm.BN);
  const int64_t batches = int64_t(gemm.batchOuter) * gemm.batchInner;
  if (gemm.library == TensorCoreGemm::Library::Sm90) {
    // The deepest ring of stages that fits (gemm_sm90.cuh's kSmemBytes), up to 8.
    auto smem = [&](int stages, int64_t inputBytes) {
      return 1024 + int64_t(stages) * (gemm.BM + gemm.BN) * gemm.BK * 2 + 2 * 64 * 64 * 4 + inputBytes +
             2 * stages * 8 + (inputBytes > 0 ? 2 * kMaxInputSlots * 8 : 0) + 16;
    };
    // Ping-pong consumers whose epilogue reads arrays at its rows get those
    // inputs loaded ahead, a unit's pieces of 64x64 (at least 2) in slots of
    // 512 column groups, keeping 4 stages at least: each epilogue piece
    // otherwise waits a GMEM latency, which the other consumer's k-steps did
    // not hide (the GELU derivative's GEMM at 0.61 of cuBLAS's time, H100,
    // 2026-12-07).
    gemm.inputBytes = 0;
    if (gemm.pingPong && rowInputBytes > 0) {
      const int64_t slot = 512 * rowInputBytes;
      int64_t slots = std::clamp<int64_t>((gemm.BM / 64) * (gemm.BN / 64), 2, kMaxInputSlots);
      while (slots >= 2 && smem(kInputsAheadMinStages, slots * slot) > smemLimit) --slots;
      if (slots >= 2) gemm.inputBytes = slots * slot;
    }
    gemm.stages = 2;
    while (gemm.stages < 8 && smem(gemm.stages + 1, gemm.inputBytes) <= smemLimit) ++gemm.stages;
    gemm.smemBytes = smem(gemm.stages, gemm.inputBytes);
    gemm.threads = 384;
    gemm.splits = gemm.clusterM > 1 ? 1  // clusters run unsplit (gemm_sm90.cuh)
                  : plan.gemmTile.chosen() && !plan.splitTiles.empty()
                      ? static_cast<int>(std::clamp<int64_t>(plan.gemmTile.splits, 1, maxSplits(gemm)))
                      : splitK(plan, gemm, tiles * batches, target.smCount);
    // Persistent: one block per SM at most, walking the units (tiles x splits) of every batch;
    // clusters: whole clusters, each walking tile pairs.
    const int64_t c = gemm.clusterM;
    const int64_t units = ceilDiv(ceilDiv(gemm.M, gemm.BM), c) * ceilDiv(gemm.N, gemm.BN) * batches * gemm.splits;
    gemm.grid[0] = c * std::min<int64_t>(units, target.smCount / c);
  } else {
    gemm.warpsM = 2, gemm.warpsN = gemm.BN / 64;
    auto smem = [&](int stages) {
      return std::max<int64_t>(int64_t(stages) * (gemm.BM + gemm.BN) * gemm.BK * 2, int64_t(gemm.BM) * gemm.BN * 4);
    };
    gemm.stages = 2;
    while (gemm.stages < 4 && smem(gemm.stages + 1) <= smemLimit) ++gemm.stages;
    gemm.smemBytes = smem(gemm.stages);
    gemm.threads = 32 * gemm.warpsM * gemm.warpsN;
    gemm.grid[0] = tiles, gemm.grid[2] = batches;
  }
}

// Axes of extent 1 left out (always position 0), the rest outermost first
// by their strides in `layout`.
std::vector<Axis> byStride(std::vector<Axis> axes, const AffineLayout& layout) {
  axes.erase(std::remove_if(axes.begin(), axes.end(), [](const Axis& a) { return a.size == 1; }), axes.end());
  std::stable_sort(axes.begin(), axes.end(), [&](const Axis& x, const Axis& y) {
    return layout.strides.at(x.name) > layout.strides.at(y.name);
  });
  return axes;
}

// The rows' (or the columns') axes in the order the output stores them,
// where it has them all: the epilogue writes a row's columns as the GEMM
// runs them, so columns in another order than the output's are stores
// apart (a convolution's window gradient [b u c k] from w[k c o], columns
// (k c): 8 values 3 elements apart, 73 us on the H200 where 14 were
// priced). An operand that lays them out otherwise is gathered by a
// staging copy instead, which the lowering prices.
std::vector<Axis> inOrderOf(std::vector<Axis> axes, const Type& output) {
  std::map<std::string, size_t> position;
  for (size_t i = 0; i < output.axes.size(); ++i) position[output.axes[i].name] = i;
  if (std::any_of(axes.begin(), axes.end(), [&](const Axis& a) { return !position.count(a.name); })) return axes;
  std::stable_sort(axes.begin(), axes.end(),
                   [&](const Axis& x, const Axis& y) { return position.at(x.name) < position.at(y.name); });
  return axes;
}

int64_t extentOf(const std::vector<Axis>& axes) {
  int64_t e = 1;
  for (const Axis& a : axes) e *= a.size;
  return e;
}

// Whether an operand's rows and columns (`mn`, `k`, each in its order) are
// each one strided dimension, one of them contiguous: what the library reads
// in place (alignment aside).
bool readsInPlace(const std::vector<Axis>& mn, const std::vector<Axis>& k, const AffineLayout& l) {
  const std::optional<Collapsed> a = collapse(mn, l), b = collapse(k, l);
  return a && b && (a->stride == 1 || b->stride == 1);
}

// The elements the staging copies gather with the k axes in `k`'s order.
int64_t stagedElements(const std::vector<Axis>& m, const std::vector<Axis>& n, const std::vector<Axis>& k,
                       const AffineLayout& la, const AffineLayout& lb) {
  return (readsInPlace(m, k, la) ? 0 : extentOf(m) * extentOf(k)) + (readsInPlace(n, k, lb) ? 0 : extentOf(n) * extentOf(k));
}

std::vector<StridedExtent> stridesOf(const std::vector<Axis>& axes, const AffineLayout& l) {
  std::vector<StridedExtent> out;
  for (const Axis& a : axes) out.push_back({a.size, l.strides.at(a.name)});
  return out;
}

// Where the library reads an operand: in place, as rows of one strided
// dimension contiguous along the other; staged where those rows or batches
// are not 16-byte aligned (or, for the TMA, a batch is broadcast); gathered
// by a staging copy where the axes are no such rows (contiguous then along
// whichever holds the array's innermost axis, so that the copy's reads
// coalesce).
void placeOperand(const AffineLayout& l, const std::vector<Axis>& mn, const std::vector<Axis>& k, const TensorCoreGemm& gemm,
                  GemmOperandPlacement& p) {
  p.array = l.array;
  p.offset = l.offset;
  if (gemm.batch.size() == 2) p.batchOuterStride = l.strides.at(gemm.batch[0].name);
  if (!gemm.batch.empty()) p.batchInnerStride = l.strides.at(gemm.batch.back().name);
  if (!readsInPlace(mn, k, l)) {
    auto innermost = [&](const std::vector<Axis>& axes) {
      int64_t least = INT64_MAX;
      for (const Axis& a : axes) least = std::min(least, l.strides.at(a.name));
      return least;
    };
    p.kMajor = innermost(k) <= innermost(mn);
    gatherOperand(p, gemm, stridesOf(p.kMajor ? mn : k, l), stridesOf(p.kMajor ? k : mn, l));
    return;
  }
  const Collapsed rows = *collapse(mn, l), ks = *collapse(k, l);
  if (ks.stride == 1) p.kMajor = true, p.contiguous = ks.extent, p.rows = rows.extent, p.ld = rows.stride;
  else p.kMajor = false, p.contiguous = rows.extent, p.rows = ks.extent, p.ld = ks.stride;
  // The library reads 16-byte aligned rows and batches (gemm_common.cuh),
  // the TMA no batch stride of 0: elsewhere the operand is staged.
  const bool broadcastForTma = gemm.library == TensorCoreGemm::Library::Sm90 && !gemm.batch.empty() &&
                               (p.batchInnerStride == 0 || (gemm.batch.size() == 2 && p.batchOuterStride == 0));
  if (p.ld % 8 != 0 || p.offset % 8 != 0 || p.batchOuterStride % 8 != 0 || p.batchInnerStride % 8 != 0 || broadcastForTma)
    stageOperand(p, gemm);
}

}  // namespace

void gatherOperand(GemmOperandPlacement& p, const TensorCoreGemm& gemm, std::vector<StridedExtent> rows,
                   std::vector<StridedExtent> columns) {
  if (p.staged) return;
  p.rows = p.contiguous = 1;
  for (const StridedExtent& r : rows) p.rows *= r.extent;
  for (const StridedExtent& c : columns) p.contiguous *= c.extent;
  p.staged = GemmStagedSource{p.offset, std::move(rows), std::move(columns), p.batchOuterStride, p.batchInnerStride};
  p.offset = 0;
  p.ld = ceilDiv(p.contiguous, stagedRowMultiple(gemm)) * stagedRowMultiple(gemm);
  p.batchInnerStride = gemm.batch.empty() ? 0 : p.rows * p.ld;
  p.batchOuterStride = gemm.batch.size() == 2 ? p.rows * p.ld * gemm.batchInner : 0;
}

int64_t stagedRowMultiple(const TensorCoreGemm& gemm) { return gemm.library == TensorCoreGemm::Library::Sm90 ? 64 : 8; }

void stageOperand(GemmOperandPlacement& p, const TensorCoreGemm& gemm) {
  gatherOperand(p, gemm, {{p.rows, p.ld}}, {{p.contiguous, 1}});
}

TensorCorePlan planTensorCoreGemm(const Graph& g, const LaunchPlan& plan, const InstructionChoice& choice,
                                  const std::set<NodeId>& stored, const std::vector<std::string>& names,
                                  const Target& target) {
  TensorCorePlan out;
  if (choice.kind != InstructionChoice::Kind::MatmulLike) return out;
  auto no = [&](std::string why) {
    out.scalarReason = std::move(why);
    return out;
  };
  if (!choice.lowPrecisionOperands) return no("f32 storage: the tile library takes bf16 operands");
  TensorCoreGemm gemm;
  if (target.arch == "sm_90a") gemm.library = TensorCoreGemm::Library::Sm90;
  else if (target.arch == "sm_80") gemm.library = TensorCoreGemm::Library::Sm80;
  else return no(fmt::format("no tile library for {}", target.arch));
  const Node& c = g.node(choice.contraction);
  gemm.contraction = c.id;
  if (std::string why = epilogueObstacle(g, plan, c.id, stored, names); !why.empty()) return no(why);

  // A is the operand with the GEMM's rows. The output's innermost axis is
  // best a column axis: the epilogue then stores 8 consecutive elements.
  const Type& firstOutput = g.node(plan.outputs.at(0)).type;
  gemm.swapped = !firstOutput.axes.empty() &&
                 std::find(choice.m.begin(), choice.m.end(), firstOutput.axes.back().name) != choice.m.end();
  const NodeId aNode = c.operands[gemm.swapped ? 1 : 0], bNode = c.operands[gemm.swapped ? 0 : 1];
  std::string why;
  std::optional<AffineLayout> la = layoutThroughViews(g, aNode, plan.computed, stored, names, why);
  if (!la) return no(why);
  std::optional<AffineLayout> lb = layoutThroughViews(g, bNode, plan.computed, stored, names, why);
  if (!lb) return no(why);

  auto axesOf = [&](const std::vector<std::string>& list) {
    std::vector<Axis> axes;
    for (const std::string& s : list) axes.push_back(*c.type.find(s));
    return axes;
  };
  std::vector<Axis> kAxes;
  for (const std::string& s : c.axes) kAxes.push_back(*g.node(c.operands[0]).type.find(s));
  auto mAxes = axesOf(gemm.swapped ? choice.n : choice.m), nAxes = axesOf(gemm.swapped ? choice.m : choice.n);

  // Each operand's GEMM axes, outermost first by their strides there; the k
  // axes in one order for both: A's, unless B's own leaves fewer elements to
  // stage. What no single stride describes is gathered by a staging copy.
  const std::vector<Axis> mOrder = inOrderOf(byStride(mAxes, *la), firstOutput),
                          nOrder = inOrderOf(byStride(nAxes, *lb), firstOutput);
  std::vector<Axis> kOrder = byStride(kAxes, *la);
  if (const std::vector<Axis> kOrderB = byStride(kAxes, *lb);
      stagedElements(mOrder, nOrder, kOrderB, *la, *lb) < stagedElements(mOrder, nOrder, kOrder, *la, *lb))
    kOrder = kOrderB;
  if (mOrder.empty() || nOrder.empty() || kOrder.empty())
    return no("a GEMM dimension of extent 1 (a matrix-vector product): not worth a tensor-core tile");
  gemm.m = mOrder, gemm.n = nOrder, gemm.k = kOrder;
  gemm.M = extentOf(mOrder), gemm.N = extentOf(nOrder), gemm.K = extentOf(kOrder);
  if (gemm.M > INT_MAX || gemm.N > INT_MAX || gemm.K > INT_MAX) return no("a GEMM dimension past 2^31");

  for (const std::string& s : choice.batch)
    if (c.type.find(s)->size > 1) gemm.batch.push_back(*c.type.find(s));
  if (gemm.batch.size() > 2) return no(fmt::format("{} batch axes (the library takes two)", gemm.batch.size()));
  if (gemm.batch.size() == 2) gemm.batchOuter = static_cast<int>(gemm.batch[0].size);
  if (!gemm.batch.empty()) gemm.batchInner = static_cast<int>(gemm.batch.back().size);

  placeOperand(*la, mOrder, kOrder, gemm, gemm.a);
  placeOperand(*lb, nOrder, kOrder, gemm, gemm.b);

  chooseTile(g, plan, c.id, gemm);
  sizeLaunch(plan, target, epilogueRowInputBytes(g, plan, c.id, stored, gemm.m, gemm.n), gemm);
  const int64_t smemLimit = target.level("SMEM").maxPerBlock;
  if (gemm.smemBytes > smemLimit) return no("the smallest tile's shared memory exceeds the target's per-block limit");
  out.gemm = gemm;
  return out;
}

}  // namespace llmc
