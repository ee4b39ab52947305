#include "lowering/tensor_core_stream.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "analysis/step_skip.h"
#include "analysis/streamability.h"
#include "ir/print.h"
#include "planning/row_products.h"

namespace llmc {

namespace {

// The blocks an SM holds of a stream kernel: as many as its shared memory
// allows, while each thread keeps the registers the step needs; more blocks
// than those leave room for make ptxas spill.
//
// Where warps issue (mma.sync), the fragments a thread keeps through a step:
// per product its accumulators and its weights (16 rows x 64 columns of fp32
// over a warp's 32 lanes: 32 each), per score its scores (32) and the rows'
// A operand (channels/16 k-steps of 4), and never fewer than 128 (the step's
// elementwise work, indices and addresses need theirs: the logsumexp stream
// of tests/lit/cuda/logsumexp.dg takes 109 registers with 48 of fragments,
// and spills at 64).
//
// Where the warpgroup issues (wgmma, both operands of a score and a
// product's values read from their tiles by descriptor), what a thread holds
// at the step's peak, its elementwise work: each product's accumulators
// (channels / 2), each score's fragment (32), the weights beyond those (a
// weight takes the registers of the score it is made from as that dies),
// the prefetched values, and the rest ptxas keeps (indices, addresses, the
// stage and its barrier's phase): 36, as ptxas (sm_90a, 2026-12-07) fits
// attention's dK/dV stream in 168 = 2 x 32 + 2 x 32 + 4 staged + 36 at 3
// blocks an SM with no spill; dQ takes 123 (counted 138), the forward fewer.
// Measured, GPT-2 d12's dK/dV at 3 blocks against 2: 305 against 349 us
// (H100, 2026-12-07; with its statistics in registers, 11-30, 3 blocks had
// spilled and ran 25% slower); dQ at 3 blocks 8% faster than at 2, at 4 no
// faster (H200, 2026-11-30, benchmarks/kernels/results/
// 2026-11-30-h200-stream-wgmma.txt at commit 1dd54ee); the forward at 4 4%
// faster than at 3.
constexpr int64_t kWarpgroupStepRegisters = 36;

int64_t fragmentRegisters(const TensorCoreStream& s) {
  int64_t registers = 0;
  if (s.issuer == MmaIssuer::Warpgroup) {
    for (const StreamProduct& p : s.products) registers += p.values.paddedChannels / 2;
    registers += 32 * std::max(s.scores.size(), s.products.size());
    for (const StreamPrefetch& p : s.prefetched) registers += p.registers();
    // An output stored each step: the lane's 32 values as 16 bf16 pairs
    // until stored (tests/lit/cuda/row_products.dg's dK/dV stream storing
    // dS spilled 104 bytes at 3 blocks uncounted; 2 counted).
    registers += 16 * static_cast<int64_t>(s.stepOutputs.size());
  } else {
    for (size_t p = 0; p < s.products.size(); ++p) registers += 2 * 32;
    for (const StreamScore& sc : s.scores) registers += 32 + sc.rows.paddedChannels / 16 * 4;
    for (const StreamPrefetch& p : s.prefetched) registers += p.registers();
  }
  // A row product's result (channels / 2 a thread) and its weights' bf16
  // pairs (16) live after the step's scores are spent. Where warps issue
  // they take the scores' registers, and only what exceeds those counts (an
  // estimate, not yet measured); where the warpgroup does, all of them:
  // counted so, tests/lit/cuda/row_products.dg's dK/dV stream with dQ its
  // row product spilled 104 bytes at the 3 blocks it was given (ptxas,
  // sm_90a, 2026-12-07).
  int64_t rowProducts = 0;
  for (const StreamRowProduct& r : s.rowProducts) rowProducts += r.values.paddedChannels / 2 + 16;
  if (s.issuer == MmaIssuer::Warpgroup) return registers + rowProducts + kWarpgroupStepRegisters;
  return registers + std::max<int64_t>(0, rowProducts - 32 * static_cast<int64_t>(s.scores.size()));
}

// The most a thread keeps with the values along the stream in registers
// (stageAlongStream): where warps issue, attention's dK/dV stream at 2
// blocks an SM, its statistics in registers, ran without spilling (224 by
// their count); where the warpgroup does, the same stream (212 by its
// count) ran 394 us in registers against 351 staged at the same 2 blocks an
// SM (H200, 2026-12-06, B=32 H=12 T=1024 D=64), and the same with dV
// alone (132) lost nothing in registers.
int64_t maxRegistersAlongStream(const TensorCoreStream& s) { return s.issuer == MmaIssuer::Warpgroup ? 192 : 224; }

int residentBlocks(const TensorCoreStream& s, const Target& target) {
  const int64_t byRegisters = target.registersPerSM / (int64_t{kStreamThreads} * std::max<int64_t>(fragmentRegisters(s), 128));
  const int64_t bySmem = target.level("SMEM").capacity / std::max<int64_t>(s.smemBytes, 1);
  return static_cast<int>(std::clamp<int64_t>(std::min({byRegisters, bySmem, int64_t{target.maxBlocksPerSM}}), 1,
                                              target.maxWarpsPerSM * target.warpSize / kStreamThreads));
}



int64_t ceilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

bool hasAxis(const Node& n, const std::string& axis) { return n.type.has(axis); }

// The target runs warp-level bf16 mma.sync fed by cp.async.
bool hasWarpMma(const Target& target) {
  if (!target.hasCpAsync) return false;
  for (const TensorCoreShape& s : target.shapesFor("bf16"))
    if (s.executedBy == MmaIssuer::Warp && s.m == 16) return true;
  return false;
}

// The target's warpgroups issue bf16 wgmma with A from registers at N = 64
// (the scores) and at every product's padded channels.
bool hasWarpgroupMma(const Target& target, const std::vector<int>& widths) {
  for (const TensorCoreShape& s : target.shapesFor("bf16")) {
    if (s.executedBy != MmaIssuer::Warpgroup || s.m != kStreamRowsPerBlock || s.k != 16) continue;
    if (std::find(s.aFrom.begin(), s.aFrom.end(), OperandSource::Registers) == s.aFrom.end()) continue;
    if (std::all_of(widths.begin(), widths.end(), [&](int n) { return s.acceptsN(n); })) return true;
  }
  return false;
}

class Planner {
 public:
  Planner(const Graph& g, const LaunchPlan& plan, const std::set<NodeId>& stored,
          const std::map<NodeId, StoredArray>& arrays, const std::vector<std::string>& names)
      : g_(g), plan_(plan), stored_(stored), arrays_(arrays), names_(names) {}

  TensorCoreStreamPlan run(const Target& target) {
    TensorCoreStreamPlan out;
    hasTMA_ = target.hasTMA;
    maxChannels_ = streamMaxChannels(target);
    if (plan_.kind != LaunchPlan::Kind::Tile || plan_.streamAxis.empty()) return out;
    TensorCoreStream s;
    if (!hasWarpMma(target)) return fail(out, fmt::format("{} has no warp-level bf16 mma.sync", target.arch));
    const StreamAnalysis analysis = analyzeStream(g_, plan_.computed, plan_.streamAxis);
    if (!analysis.streamable || analysis.slots.empty()) return fail(out, "the stream has no accumulator slots");
    for (const Axis& a : plan_.groupAxes) group_.insert(a.name);

    // The contractions evaluated at each position of the stream: over one
    // channel axis, one operand along the stream, the other not.
    auto computed = [&](NodeId id) { return plan_.computed.count(id) > 0; };
    std::vector<NodeId> rowProducts;  // planning/row_products.h: planned once the rows are known
    for (NodeId id : plan_.computed) {
      const Node& n = g_.node(id);
      if (n.op != Op::Contract || !hasAxis(n, plan_.streamAxis)) continue;
      if (isRowProduct(g_, n, plan_.streamAxis, computed)) {
        rowProducts.push_back(id);
        continue;
      }
      if (n.axes.size() != 1 || group_.count(n.axes[0]) || n.axes[0] == plan_.streamAxis)
        return fail(out, fmt::format("{} contracts {} axes inside the stream", name(id), n.axes.size()));
      const Node& x = g_.node(n.operands[0]);
      const Node& y = g_.node(n.operands[1]);
      if (hasAxis(x, plan_.streamAxis) == hasAxis(y, plan_.streamAxis))
        return fail(out, fmt::format("{}: not one operand along the stream and one across it", name(id)));
      const Node& rowOperand = hasAxis(x, plan_.streamAxis) ? y : x;
      const Node& columnOperand = hasAxis(x, plan_.streamAxis) ? x : y;
      const std::string rowAxis = streamRowAxis(rowOperand.type, columnOperand.type, plan_.groupAxes);
      if (rowAxis.empty()) return fail(out, fmt::format("{}: no row axis", name(id)));
      if (!s.rows.name.empty() && s.rows.name != rowAxis)
        return fail(out, "the stream's contractions disagree on the row axis");
      s.rows = *g_.node(id).type.find(rowAxis);
      StreamScore score;
      score.contraction = id;
      if (!tile(rowOperand.id, rowAxis, n.axes[0], score.rows, out.reason) ||
          !tile(columnOperand.id, plan_.streamAxis, n.axes[0], score.columns, out.reason))
        return out;
      s.scores.push_back(score);
    }
    if (s.scores.empty()) return fail(out, "no contraction over channels feeds the stream");
    for (const Axis& a : plan_.groupAxes)
      if (a.name != s.rows.name) s.batch.push_back(a);
    for (NodeId id : rowProducts)
      if (!rowProduct(id, s, out.reason)) return out;

    // Every slot sums or maximises over the stream axis alone; its factors are
    // elementwise in (batch, row, position), but for at most one stored
    // operand along the stream with an axis of channels (a product).
    for (size_t k = 0; k < analysis.slots.size(); ++k) {
      const AccumulatorSlot& slot = analysis.slots[k];
      if (slot.axes != std::vector<std::string>{plan_.streamAxis})
        return fail(out, fmt::format("slot {} reduces more than the stream axis", k));
      if (std::any_of(slot.core.begin(), slot.core.end(), [](const StreamFactor& f) { return f.pivoted(); }))
        return fail(out, fmt::format("slot {} takes a value about a pivot (read ahead of the tiles)", k));
      std::optional<StreamProduct> product;
      for (const StreamFactor& f : slot.core) {
        const Node& n = g_.node(f.node);
        std::vector<Axis> channels;
        for (const Axis& a : n.type.axes)
          if (!group_.count(a.name) && a.name != plan_.streamAxis) channels.push_back(a);
        if (channels.empty()) continue;
        if (product || channels.size() != 1 || f.kind != StreamFactor::Kind::Value || f.power != 1 ||
            slot.kind != AccumulatorSlot::Kind::Sum || hasAxis(n, s.rows.name) || !hasAxis(n, plan_.streamAxis))
          return fail(out, fmt::format("slot {}: {} is not a stored operand along the stream", k, name(f.node)));
        product = StreamProduct{static_cast<int>(k), f.node, {}};
        if (!tile(f.node, plan_.streamAxis, channels[0].name, product->values, out.reason)) return out;
      }
      if (product) s.products.push_back(*product);
    }
    if (!stepOutputs(analysis, s, out.reason)) return out;
    // A skipped step must leave the row products unchanged too, and its
    // outputs 0.
    std::vector<NodeId> zeroWhenSkipped = s.stepOutputs;
    for (const StreamRowProduct& r : s.rowProducts) zeroWhenSkipped.push_back(r.weights);
    s.skip = skipKeepingZeros(g_, findStepSkip(g_, analysis, s.rows.name, plan_.streamAxis), zeroWhenSkipped);
    for (NodeId id : plan_.computed)
      if (const Axis* a = g_.node(id).type.find(plan_.streamAxis)) s.stream = *a;
    for (const StreamScore& sc : s.scores)
      if (const Axis* a = g_.node(sc.columns.value).type.find(plan_.streamAxis)) s.stream = *a;

    // Shared memory: the row tiles once, the column tiles in two stages;
    // after the stream the same space stages the slots for the tail.
    int64_t at = 0;
    for (StreamScore& sc : s.scores) {
      sc.rows.smemOffset = at;
      at += sc.rows.stageBytes();
    }
    // A row product's values: a score's rows tile where the same elements
    // (attention's K, the scores' operand and dQ's values), else one more.
    for (StreamRowProduct& r : s.rowProducts) {
      auto same = std::find_if(s.scores.begin(), s.scores.end(),
                               [&](const StreamScore& sc) { return sameElements(sc.rows, r.values); });
      r.values.sharesEarlierTile = same != s.scores.end();
      r.values.smemOffset = r.values.sharesEarlierTile ? same->rows.smemOffset : at;
      if (!r.values.sharesEarlierTile) at += r.values.stageBytes();
    }
    // A step's tiles of the same elements (attention's dO as the scores'
    // operand and as the weights of dV's product) share their stages.
    std::vector<const StreamTile*> placed;
    auto place = [&](StreamTile& tile) {
      for (const StreamTile* earlier : placed)
        if (sameElements(*earlier, tile)) {
          tile.smemOffset = earlier->smemOffset;
          tile.sharesEarlierTile = true;
          return;
        }
      tile.smemOffset = at;
      at += 2 * tile.stageBytes();
      placed.push_back(&tile);
    };
    for (StreamScore& sc : s.scores) place(sc.columns);
    for (StreamProduct& p : s.products) place(p.values);
    // The step's weights of each row product, staged for the tensor cores
    // (every tile is a whole number of 1024-byte swizzle atoms).
    for (StreamRowProduct& r : s.rowProducts) {
      r.weightsOffset = at;
      at += int64_t{kStreamRowsPerBlock} * kStreamPositionsPerStep * 2;
    }
    // The outputs along the stream stored through shared memory, each its
    // four warps' tiles (dropped below where the block has no room for them).
    const int64_t tilesEnd = at;
    for (NodeId o : s.stepOutputs)
      if (std::optional<StagedStepOutput> staging = stagedOutput(o, s)) {
        staging->smemOffset = at;
        at += 4 * StagedStepOutput::kWarpBytes;
        s.stagedOutputs.push_back(*staging);
      }
    int64_t staged = 0;
    for (size_t k = 0; k < analysis.slots.size(); ++k) {
      s.slotSmemOffset[static_cast<int>(k)] = staged;
      int stride = 1;
      for (const StreamProduct& p : s.products)
        if (p.slot == static_cast<int>(k)) stride = p.stagedStride();
      staged += (int64_t{kStreamRowsPerBlock} * stride * 4 + 15) / 16 * 16;
    }
    std::vector<int> widths = {kStreamPositionsPerStep};
    for (const StreamProduct& p : s.products) widths.push_back(p.values.paddedChannels);
    for (const StreamRowProduct& r : s.rowProducts) widths.push_back(r.values.paddedChannels);
    if (hasWarpgroupMma(target, widths) && target.hasTMA && tensorMaps(s)) s.issuer = MmaIssuer::Warpgroup;
    if (!s.rowProducts.empty() && s.issuer != MmaIssuer::Warpgroup)
      return fail(out, "its row products need warpgroup wgmma and the TMA (sm_90a)");
    for (const StreamTile* tile : s.loadedTiles())
      if (s.issuer != MmaIssuer::Warpgroup && tile->channel.size > kStreamMaxChannels)
        return fail(out, fmt::format("{} has {} channels, more than warps issuing mma.sync hold ({})",
                                     name(tile->value), tile->channel.size, kStreamMaxChannels));
    const int64_t limit = target.level("SMEM").maxPerBlock;
    auto placeBarriers = [&] {
      s.barrierOffset = (std::max(at, staged) + 7) / 8 * 8;
      s.smemBytes = s.issuer == MmaIssuer::Warpgroup ? s.barrierOffset + 16 + kSwizzleAlignment : std::max(at, staged);
    };
    placeBarriers();
    if (s.smemBytes > limit && !s.stagedOutputs.empty()) {
      s.stagedOutputs.clear();
      at = tilesEnd;
      placeBarriers();
    }
    if (s.smemBytes > limit)
      return fail(out, fmt::format("its tiles need {} bytes of shared memory, more than a block's {}", s.smemBytes, limit));
    s.grid = ceilDiv(s.rows.size, kStreamRowsPerBlock);
    for (const Axis& a : s.batch) s.grid *= a.size;
    s.prefetched = prefetchable(s);
    s.residentBlocks = residentBlocks(s, target);
    stageAlongStream(s, target, limit);
    // Past this, ptxas spills the fragments the step lives on (wide products:
    // two of 256 channels take 256 registers a thread; kStreamMaxRegisters).
    if (const int64_t registers = fragmentRegisters(s); s.issuer == MmaIssuer::Warpgroup && registers > kStreamMaxRegisters)
      return fail(out, fmt::format("its fragments need {} registers a thread, more than {}", registers, kStreamMaxRegisters));
    if (auto split = plan_.splitTiles.find(s.stream.name); split != plan_.splitTiles.end() && split->second < s.stream.size) {
      if (split->second % kStreamPositionsPerStep != 0)
        return fail(out, fmt::format("its stream is shared out {} positions a block, not whole steps of {}", split->second,
                                     kStreamPositionsPerStep));
      s.share = split->second;
      s.grid *= ceilDiv(s.stream.size, s.share);
    }
    out.stream = s;
    return out;
  }

 private:
  static TensorCoreStreamPlan& fail(TensorCoreStreamPlan& out, std::string why) {
    out.stream.reset();
    out.reason = std::move(why);
    return out;
  }

  std::string name(NodeId id) const { return names_[static_cast<size_t>(id)]; }

  // The values along the stream: in registers unless their 16 a thread
  // would pass the fragments' measured limit or cost a resident block the
  // grid would use; then staged in shared memory (StreamPrefetch), or, where
  // the block has no room for that either, read in the step where used.
  // Measured on the H200 (2026-12-06, attention's dK/dV stream, which reads
  // three: the softmax's maxima and sums and the rows' dO.O): B=32 H=12
  // T=1024 D=64 (those values [b h t]) 425 us read in the step, 394 in
  // registers at 2 blocks an SM, 351 staged; B=4 H=8 T=1000 64 -> 53 us;
  // GPT-2 d12's twelve ([b t h]) 8.40 -> 8.15 ms with the other streams.
  void stageAlongStream(TensorCoreStream& s, const Target& target, int64_t limit) const {
    std::vector<StreamPrefetch> byRows;
    for (const StreamPrefetch& p : s.prefetched)
      if (!p.alongStream) byRows.push_back(p);
    if (byRows.size() == s.prefetched.size()) return;
    TensorCoreStream fewer = s;
    fewer.prefetched = byRows;
    const int more = residentBlocks(fewer, target);
    if (fragmentRegisters(s) <= maxRegistersAlongStream(s) &&
        !(more > s.residentBlocks && s.grid > int64_t{target.smCount} * s.residentBlocks))
      return;
    // After the mbarriers (with wgmma the kernel's alignment of its tiles
    // stays the last term), else after everything.
    TensorCoreStream staged = s;
    const bool warpgroup = s.issuer == MmaIssuer::Warpgroup;
    int64_t at = warpgroup ? s.barrierOffset + 16 : (s.smemBytes + 15) / 16 * 16;
    for (StreamPrefetch& p : staged.prefetched)
      if (p.alongStream) {
        p.smemOffset = at;
        p.divisor = dividesBy(p.value);
        at += p.stagedBytes();
      }
    staged.smemBytes = at + (warpgroup ? kSwizzleAlignment : 0);
    if (staged.smemBytes <= limit) {
      staged.residentBlocks = residentBlocks(staged, target);
      s = std::move(staged);
      return;
    }
    s = std::move(fewer);
    s.residentBlocks = more;
  }

  // The stored float values the step's work reads (through broadcasts,
  // transposes and renames) by the rows alone or by the stream alone, and
  // otherwise only by the block's batch positions; each read one way.
  std::vector<StreamPrefetch> prefetchable(const TensorCoreStream& s) const {
    std::map<NodeId, StreamPrefetch> found;
    std::set<NodeId> refused;
    auto launchAxis = [&](const std::string& a) {
      return a == s.rows.name || a == s.stream.name ||
             std::any_of(s.batch.begin(), s.batch.end(), [&](const Axis& b) { return b.name == a; });
    };
    for (NodeId id : plan_.computed)
      for (NodeId op : g_.node(id).operands) {
        std::map<std::string, std::string> axes;  // the reached node's axes -> the launch's
        for (const Axis& a : g_.node(op).type.axes) axes[a.name] = a.name;
        for (const Node* v = &g_.node(op); !plan_.computed.count(op) && isPlainView(*v); v = &g_.node(op)) {
          std::map<std::string, std::string> inner;
          for (const Axis& a : g_.node(v->operands[0]).type.axes) {
            const std::string& outer = v->op == Op::Rename && a.name == v->axes[0] ? v->newAxes[0] : a.name;
            inner[a.name] = axes.count(outer) ? axes.at(outer) : outer;
          }
          axes = std::move(inner);
          op = v->operands[0];
        }
        const Node& n = g_.node(op);
        if (!stored_.count(op) || plan_.computed.count(op) || refused.count(op) || !isFloat(n.type.dtype)) continue;
        bool rows = false, along = false, fixed = true;
        for (const auto& [own, launch] : axes) {
          rows |= launch == s.rows.name;
          along |= launch == s.stream.name;
          fixed &= launchAxis(launch);
        }
        if (auto seen = found.find(op); seen != found.end()) {
          if (seen->second.axes != axes) found.erase(seen), refused.insert(op);  // read two ways: loaded in place
          continue;
        }
        if (rows != along && fixed) found[op] = {op, along, axes};
      }
    std::vector<StreamPrefetch> out;
    for (auto& [id, p] : found) out.push_back(std::move(p));
    return out;
  }

  // Whether some value of the launch is a quotient by `value` (reached
  // through views).
  bool dividesBy(NodeId value) const {
    for (NodeId id : plan_.computed) {
      const Node& n = g_.node(id);
      if (n.op != Op::Binary || n.binary != BinaryOp::Div) continue;
      NodeId op = n.operands[1];
      while (!plan_.computed.count(op) && isPlainView(g_.node(op))) op = g_.node(op).operands[0];
      if (op == value) return true;
    }
    return false;
  }

  static bool isPlainView(const Node& v) {
    return v.op == Op::Broadcast || v.op == Op::Transpose || v.op == Op::StopGradient || v.op == Op::Rename;
  }

  // Names each loaded tile's tensor map and finds its batch dimensions;
  // false where a tile's array has more than two strided group axes that
  // do not nest into two.
  bool tensorMaps(TensorCoreStream& s) const {
    std::set<std::string> taken;
    auto map = [&](StreamTile& tile) {
      if (tile.sharesEarlierTile) return true;
      std::vector<Axis> strided;
      for (const Axis& a : s.batch)
        if (tile.layout.strides.count(a.name) && tile.layout.strides.at(a.name) != 0) strided.push_back(a);
      std::stable_sort(strided.begin(), strided.end(), [&](const Axis& x, const Axis& y) {
        return tile.layout.strides.at(x.name) > tile.layout.strides.at(y.name);
      });
      tile.batchDims.clear();
      // Nested axes share a dimension only where the map has too few (it
      // keeps two): GPT-2's b and h stay two.
      const bool nest = strided.size() > 2;
      for (const Axis& a : strided) {
        const int64_t stride = tile.layout.strides.at(a.name);
        if (nest && !tile.batchDims.empty() && tile.batchDims.back().stride == stride * a.size) {
          TmaBatchDim& d = tile.batchDims.back();
          d.axes.push_back(a), d.extent *= a.size, d.stride = stride;
        } else {
          tile.batchDims.push_back({{a}, a.size, stride});
        }
      }
      const std::string& value = names_[static_cast<size_t>(tile.value)];
      tile.tensorMap = "tm_" + value;
      for (int k = 2; taken.count(tile.tensorMap); ++k) tile.tensorMap = fmt::format("tm_{}_{}", value, k);
      taken.insert(tile.tensorMap);
      return tile.batchDims.size() <= 2;
    };
    bool all = true;
    for (StreamScore& sc : s.scores) all = map(sc.rows) && map(sc.columns) && all;
    for (StreamProduct& p : s.products) all = map(p.values) && all;
    for (StreamRowProduct& r : s.rowProducts) all = map(r.values) && all;
    return all;
  }

  // Whether two tiles hold the same elements of one array: same origin, and
  // the same stride along their rows, their channels and every batch axis.
  static bool sameElements(const StreamTile& a, const StreamTile& b) {
    if (a.layout.array != b.layout.array || a.layout.offset != b.layout.offset || a.outer != b.outer ||
        a.channel.size != b.channel.size || a.layout.strides.size() != b.layout.strides.size() ||
        a.staging.has_value() != b.staging.has_value())
      return false;
    if (a.staging) {
      const GemmStagedSource &x = *a.staging->placement.staged, &y = *b.staging->placement.staged;
      if (x.offset != y.offset || x.rows != y.rows || x.columns != y.columns) return false;
    }
    for (const auto& [axis, stride] : a.layout.strides) {
      const std::string& other = axis == a.channel.name ? b.channel.name : axis;
      auto it = b.layout.strides.find(other);
      if (it == b.layout.strides.end() || it->second != stride) return false;
    }
    return true;
  }

  // `value` as tiles of [outer][channel]: an array in GMEM (through views)
  // whose other axes are the block's batch axes, read where it lies if it is
  // bf16 with the channels contiguous and every row 16-byte aligned, else
  // from a staged copy (StreamTileStaging).
  bool tile(NodeId value, const std::string& outer, const std::string& channel, StreamTile& t, std::string& why) {
    const Node& n = g_.node(value);
    std::optional<AffineLayout> layout = layoutThroughViews(g_, value, plan_.computed, stored_, names_, why);
    if (!layout) return false;
    auto stored = arrays_.find(layout->array);
    const bool sourceF32 = stored != arrays_.end() && stored->second.ctype == "float";
    if (stored == arrays_.end() || (stored->second.ctype != "llmc_bf16" && !sourceF32)) {
      why = fmt::format("{} is not stored as bf16 or f32", name(value));
      return false;
    }
    const Axis* c = n.type.find(channel);
    if (!c) {
      why = fmt::format("{} has no axis {}", name(value), channel);
      return false;
    }
    if (c->size > maxChannels_) {
      why = fmt::format("{} has {} channels along {}, more than {}", name(value), c->size, channel, maxChannels_);
      return false;
    }
    bool aligned = layout->offset % 8 == 0 && layout->strides.at(channel) == 1;
    for (const Axis& a : n.type.axes) {
      if (a.name != channel && a.name != outer && !group_.count(a.name)) {
        why = fmt::format("{} has the axis {}, neither a tile's nor the block's", name(value), a.name);
        return false;
      }
      aligned &= layout->strides.at(a.name) % 8 == 0 || a.name == channel;
    }
    t.value = value;
    t.layout = *layout;
    t.outer = outer;
    t.channel = *c;
    t.paddedChannels = static_cast<int>(ceilDiv(c->size, 64) * 64);
    if (!aligned || sourceF32) stage(n, t, sourceF32);
    return true;
  }

  // Reads `t` from a copy of its elements (StreamTileStaging): rows padded to
  // a multiple of 64 channels where the TMA loads them (its 128-byte lines),
  // of 8 for cp.async (16 bytes), as a GEMM's staged operand.
  void stage(const Node& n, StreamTile& t, bool sourceF32) const {
    StreamTileStaging staging;
    GemmOperandPlacement& p = staging.placement;
    const AffineLayout source = t.layout;
    std::vector<Axis> rows;
    for (const Axis& a : n.type.axes)
      if (a.name != t.channel.name && source.strides.at(a.name) != 0) rows.push_back(a);
    std::stable_sort(rows.begin(), rows.end(), [&](const Axis& x, const Axis& y) {
      return std::abs(source.strides.at(x.name)) > std::abs(source.strides.at(y.name));
    });
    p.array = source.array;
    p.contiguous = t.channel.size;
    p.ld = ceilDiv(t.channel.size, hasTMA_ ? 64 : 8) * (hasTMA_ ? 64 : 8);
    p.rows = 1;
    GemmStagedSource from;
    from.offset = source.offset;
    for (const Axis& a : rows) {
      p.rows *= a.size;
      from.rows.push_back({a.size, source.strides.at(a.name)});
    }
    from.columns = {{t.channel.size, source.strides.at(t.channel.name)}};
    p.staged = from;
    AffineLayout copy{source.array, 0, {}};
    int64_t stride = p.ld;
    for (auto a = rows.rbegin(); a != rows.rend(); ++a) {
      copy.strides[a->name] = stride;
      stride *= a->size;
    }
    for (const auto& [axis, s] : source.strides)
      if (!copy.strides.count(axis)) copy.strides[axis] = axis == t.channel.name ? 1 : 0;
    staging.sourceF32 = sourceF32;
    staging.param = "staged_" + name(t.value);  // no array's ("g_" + its name)
    t.layout = copy;
    t.staging = staging;
  }

  const Graph& g_;
  const LaunchPlan& plan_;
  const std::set<NodeId>& stored_;
  const std::map<NodeId, StoredArray>& arrays_;
  // A row product of the stream (planning/row_products.h): its weights made
  // by the step, its values a tile of the rows, its output along the stream
  // and the values' channels (and the block's batch axes), in f32.
  bool rowProduct(NodeId id, TensorCoreStream& s, std::string& why) {
    const Node& c = g_.node(id);
    if (c.axes[0] != s.rows.name) {
      why = fmt::format("{} sums over {}, not the stream's rows {}", name(id), c.axes[0], s.rows.name);
      return false;
    }
    const bool firstMade = plan_.computed.count(c.operands[0]) > 0;
    StreamRowProduct r;
    r.contraction = id;
    r.weights = c.operands[firstMade ? 0 : 1];
    const NodeId values = c.operands[firstMade ? 1 : 0];
    // The weights vary along the rows, the stream and the block's batch axes
    // alone (a fragment element each); the values have one axis more, the
    // output's channels.
    const std::vector<Axis>& weightAxes = g_.node(r.weights).type.axes;
    const bool elementwise = std::all_of(weightAxes.begin(), weightAxes.end(), [&](const Axis& a) {
      return a.name == s.rows.name || a.name == plan_.streamAxis || group_.count(a.name);
    });
    std::vector<Axis> channels;
    for (const Axis& a : g_.node(values).type.axes)
      if (a.name != s.rows.name && !group_.count(a.name)) channels.push_back(a);
    if (!elementwise || channels.size() != 1) {
      why = fmt::format("{}: not weights by row and position against values of one axis of channels", name(id));
      return false;
    }
    auto array = arrays_.find(id);
    if (array == arrays_.end() || array->second.ctype != "float") {
      why = fmt::format("{} is not stored in f32 for the blocks' atomic adds", name(id));
      return false;
    }
    if (!tile(values, s.rows.name, channels[0].name, r.values, why)) return false;
    s.rowProducts.push_back(r);
    return true;
  }

  // The outputs along the stream other than the row products: values the
  // step makes at each fragment element, so along the rows, the stream and
  // the block's batch axes alone, and from no result of the stream (a slot's
  // sum or maximum is whole only after it: such an output would be made
  // again after the stream, every element on its own).
  bool stepOutputs(const StreamAnalysis& analysis, TensorCoreStream& s, std::string& why) const {
    const std::vector<NodeId> computed(plan_.computed.begin(), plan_.computed.end());
    for (NodeId o : outputsAlongStream(g_, plan_.outputs, computed, plan_.streamAxis)) {
      for (const Axis& a : g_.node(o).type.axes)
        if (a.name != plan_.streamAxis && !group_.count(a.name)) {
          why = fmt::format("{} lies along the stream with the axis {}, neither a group axis nor the stream's", name(o), a.name);
          return false;
        }
      if (readsStreamResults(g_, analysis, plan_.computed, o)) {
        why = fmt::format("{} lies along the stream and reads the stream's results: it would be made again after it", name(o));
        return false;
      }
      s.stepOutputs.push_back(o);
    }
    return true;
  }

  // An output stored each step through shared memory (StagedStepOutput):
  // a plain bf16 array along the rows whose innermost axis, the stream's,
  // holds whole 16-byte vectors. Otherwise the lanes store their fragment
  // elements themselves.
  std::optional<StagedStepOutput> stagedOutput(NodeId o, const TensorCoreStream& s) const {
    const auto array = arrays_.find(o);
    const Type& type = g_.node(o).type;
    if (array == arrays_.end() || array->second.ctype != "llmc_bf16" || !array->second.strides.empty() ||
        !type.has(s.rows.name) || type.axes.back().name != s.stream.name || s.stream.size % StagedStepOutput::kVector != 0)
      return std::nullopt;
    return StagedStepOutput{o};
  }

  const std::vector<std::string>& names_;  // printedNames(g_)
  std::set<std::string> group_;
  bool hasTMA_ = false;
  int maxChannels_ = kStreamMaxChannels;
};

}  // namespace

int streamMaxChannels(const Target& target) {
  const bool warpgroups = target.hasTMA && hasWarpgroupMma(target, {kStreamPositionsPerStep, kWarpgroupStreamMaxChannels});
  return warpgroups ? kWarpgroupStreamMaxChannels : kStreamMaxChannels;
}

std::string streamRowAxis(const Type& rows, const Type& columns, const std::vector<Axis>& groupAxes) {
  const Axis* best = nullptr;
  for (const Axis& a : rows.axes) {
    const bool group = std::any_of(groupAxes.begin(), groupAxes.end(), [&](const Axis& g) { return g.name == a.name; });
    if (group && !columns.has(a.name) && (!best || a.size >= best->size)) best = &a;
  }
  return best ? best->name : "";
}

std::vector<const StreamTile*> TensorCoreStream::loadedTiles() const {
  std::vector<const StreamTile*> tiles;
  for (const StreamScore& sc : scores) tiles.push_back(&sc.rows);
  for (const StreamRowProduct& r : rowProducts)
    if (!r.values.sharesEarlierTile) tiles.push_back(&r.values);
  for (const StreamScore& sc : scores)
    if (!sc.columns.sharesEarlierTile) tiles.push_back(&sc.columns);
  for (const StreamProduct& p : products)
    if (!p.values.sharesEarlierTile) tiles.push_back(&p.values);
  return tiles;
}

std::string TensorCoreStream::describe() const {
  std::string channels;
  for (const StreamScore& s : scores) channels += fmt::format("{}{}", channels.empty() ? "" : ", ", s.rows.channel.size);
  int staged = 0;
  for (const StreamTile* tile : loadedTiles()) staged += tile->staging.has_value();
  return fmt::format(
      "tensor cores: llmc::stream ({} + {}), {} rows of {} per block, {} positions of {} per step; "
      "{} score contraction(s) over {} channels, {} product(s) along the stream{}{}{}{}{}; {} block(s) an SM",
      issuer == MmaIssuer::Warpgroup ? "TMA" : "cp.async", issuer == MmaIssuer::Warpgroup ? "wgmma" : "mma.sync", kStreamRowsPerBlock, rows.name, kStreamPositionsPerStep,
      stream.name, scores.size(), channels, products.size(),
      rowProducts.empty() ? "" : fmt::format(", {} over the rows (each block's share added atomically)", rowProducts.size()),
      stepOutputs.empty() ? ""
                          : fmt::format("; {} output(s) along the stream stored each step, {} through shared memory",
                                        stepOutputs.size(), stagedOutputs.size()),
      skip ? "; steps a comparison of positions leaves unchanged are skipped" : "",
      share > 0 ? fmt::format("; the stream shared out, {} positions a block, the blocks' sums added atomically", share) : "",
      staged > 0 ? fmt::format("; {} tile(s) read from staged copies", staged) : "", residentBlocks);
}

TensorCoreStreamPlan planTensorCoreStream(const Graph& graph, const LaunchPlan& plan, const std::set<NodeId>& stored,
                                          const std::map<NodeId, StoredArray>& arrays,
                                          const std::vector<std::string>& names, const Target& target) {
  return Planner(graph, plan, stored, arrays, names).run(target);
}

}  // namespace llmc
