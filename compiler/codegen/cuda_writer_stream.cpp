// Streams on the CUDA cores: the accumulator slots of the stream analysis,
// the loop over chunks, lanes sharing a point, aggregates and stores.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

std::string CudaWriter::slotRef(int k, const Env& env) const {
  const SlotLayout& s = slots_[static_cast<size_t>(k)];
  if (tcs_) {  // in the stream: the slot's registers for the row half; after it: the staged slot
    if (!inTail_) return fmt::format("{}[{}]", s.name, fragment_.half);
    if (s.local.empty()) return fmt::format("{}_staged[p]", s.name);
    return fmt::format("{}_staged[p * {} + {}]", s.name, productOf(k)->stagedStride(), env.at(s.local[0].name).expr);
  }
  if (s.local.empty()) return eightBase_.empty() ? s.name : s.name + "[e]";
  std::string off;
  for (const Axis& a : s.local) off = off.empty() ? env.at(a.name).expr : fmt::format("({}) * {} + {}", off, a.size, env.at(a.name).expr);
  return fmt::format("{}[{}]", s.name, off);
}

std::string CudaWriter::previousRef(int k, const Env& env) const {
  std::string ref = slotRef(k, env);
  const std::string& name = slots_[static_cast<size_t>(k)].name;
  return name + "_prev" + ref.substr(name.size());
}

bool CudaWriter::setUpStream() {
  if (plan_.streamAxis.empty() || plan_.streamChunk <= 0) return false;
  stream_ = analyzeStream(g_, plan_.computed, plan_.streamAxis);
  if (!stream_.streamable || stream_.slots.empty()) {
    stream_ = StreamAnalysis{};
    return false;
  }
  std::set<std::string> group;
  for (const Axis& a : plan_.groupAxes) group.insert(a.name);
  for (size_t k = 0; k < stream_.slots.size(); ++k) {
    const AccumulatorSlot& slot = stream_.slots[k];
    SlotLayout layout;
    layout.name = fmt::format("S{}", k);
    std::set<std::string> seen(group.begin(), group.end());
    seen.insert(slot.axes.begin(), slot.axes.end());
    for (const StreamFactor& f : slot.core)
      for (const Axis& a : g_.node(f.node).type.axes)
        if (seen.insert(a.name).second) layout.local.push_back(a);
    for (const std::string& a : slot.axes)
      if (a != plan_.streamAxis) layout.innerAxes.push_back(a);
    slots_.push_back(layout);
  }
  for (size_t k = 0; k < stream_.slots.size(); ++k) {
    NodeId m = stream_.slots[k].rescaledBy;
    if (m < 0) continue;
    for (size_t j = 0; j < stream_.slots.size(); ++j) {
      const auto& agg = stream_.slots[j].aggregates;
      if (stream_.slots[j].kind == AccumulatorSlot::Kind::Max && std::find(agg.begin(), agg.end(), m) != agg.end()) {
        slots_[k].maxSlotOfRescale = static_cast<int>(j);
        slots_[j].keepsPrevious = true;
      }
    }
    if (slots_[k].maxSlotOfRescale < 0) throw std::logic_error("emit cuda: a rescaled slot without its running max");
  }
  return true;
}

// The chunk-local product of a slot's factors at a position of the stream.
// `leftOut`: a factor not multiplied in (a tensor-core product's operand).
std::string CudaWriter::core(int k, const Env& env, NodeId leftOut) {
  const AccumulatorSlot& slot = stream_.slots[static_cast<size_t>(k)];
  const SlotLayout& layout = slots_[static_cast<size_t>(k)];
  const std::string& position = env.at(plan_.streamAxis).expr;
  std::string product, conditions;
  for (const StreamFactor& f : slot.core) {
    if (f.node == leftOut) continue;
    const Node& node = g_.node(f.node);
    std::string v = value(f.node, env);
    std::string base;
    switch (f.kind) {
      case StreamFactor::Kind::Value:
        base = isFloat(node.type.dtype) ? v : fmt::format("(float)({})", v);
        if (f.pivoted()) base = fmt::format("({} - {})", base, pivot(f, env));
        break;
      case StreamFactor::Kind::Exp:
        if (layout.maxSlotOfRescale >= 0 && sameValue(g_, f.node, g_.node(slot.rescaledBy).operands[0]))
          base = streamValue(f.node, layout.maxSlotOfRescale, env, "exp_shifted",
                             fmt::format("{}({}, {})", approximate_ ? "llmc_fast_exp_shifted" : "llmc_exp_shifted", v,
                                         slotRef(layout.maxSlotOfRescale, env)));
        else base = exp(v);
        break;
      // A bool's mask (from a where); an integer's is the one-hot of a
      // gather index along the stream axis. Masks select rather than
      // multiply: a masked-out -inf must give 0, not NaN.
      case StreamFactor::Kind::Mask:
      case StreamFactor::Kind::NotMask: {
        std::string on = node.type.dtype == DType::Bool ? v : fmt::format("{} == {}", v, position);
        if (f.kind == StreamFactor::Kind::NotMask) on = fmt::format("!({})", on);
        conditions = conditions.empty() ? on : conditions + " && " + on;
        continue;
      }
    }
    for (int p = 0; p < std::abs(f.power); ++p) {
      std::string term = f.power > 0 ? base : fmt::format("(1.0f / {})", base);
      product = product.empty() ? term : product + " * " + term;
    }
  }
  if (product.empty()) product = "1.0f";
  return conditions.empty() ? product : fmt::format("({}) ? {} : 0.0f", conditions, product);
}

void CudaWriter::streamLoop(int point, const Env& env, WrittenKernel& out) {
  const std::string& x = plan_.streamAxis;
  int64_t extent = 0;
  for (NodeId id : plan_.computed)
    for (NodeId o : g_.node(id).operands)
      if (const Axis* a = g_.node(o).type.find(x)) extent = a->size;
  // Head.
  for (size_t k = 0; k < slots_.size(); ++k) {
    const SlotLayout& s = slots_[k];
    const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
    std::string init = isMax ? "-LLMC_INF" : "0.0f";
    int64_t n = 1;
    for (const Axis& a : s.local) n *= a.size;
    std::string note = fmt::format("  // accumulator head: {} over {}", isMax ? "max" : "sum", joinAxes(stream_.slots[k].axes));
    if (s.local.empty() && !eightBase_.empty()) {  // one per point of the thread's 8
      emit(point, fmt::format("float {}[8] = {{{}, {}, {}, {}, {}, {}, {}, {}}};{}", s.name, init, init, init, init, init,
                              init, init, init, note));
    } else if (s.local.empty()) {
      emit(point, fmt::format("float {} = {};{}", s.name, init, note));
      if (s.keepsPrevious) emit(point, fmt::format("float {}_prev;", s.name));
    } else {
      emit(point, fmt::format("float {}[{}];{}", s.name, n, note));
      if (s.keepsPrevious) emit(point, fmt::format("float {}_prev[{}];", s.name, n));
      emit(point, fmt::format("for (int j = 0; j < {}; ++j) {}[j] = {};", n, s.name, init));
    }
  }
  // Body. The stream shared out across blocks (its slots plain sums, added
  // atomically after it): the block's share of the positions.
  std::string start = "0", end = std::to_string(extent);
  int64_t share = extent;
  if (auto split = plan_.splitTiles.find(x); split != plan_.splitTiles.end() && !tcs_) {
    start = "split_" + x;
    end = fmt::format("min(split_{} + {}, {})", x, split->second, extent);
    share = std::min(extent, split->second);
  }
  const bool lanes = laneAxis_ == x;
  if (lanes && !streamStored_.empty() && (vectorisableLanes(extent) || scalarSlots()))
    streamStored_.clear();  // (the vectorised lanes' paths: made after the stream)
  if (lanes && vectorisableLanes(extent) && share % 8 == 0 && share >= 8 * lanes_) {
    vectorLanes(point, env, start, end, false);
    mergeLaneSlots(point);
    out.streamNote = fmt::format("stream over {} with {} accumulator slots, {}, its lanes along the "
                                 "stream, 8 positions a lane (16-byte loads)",
                                 x, slots_.size(), lanesNote());
    return;
  }
  if (lanes && scalarSlots()) {
    vectorLanes(point, env, start, end, true);
    mergeLaneSlots(point);
    out.streamNote = fmt::format("stream over {} with {} accumulator slots, {}, its lanes along the "
                                 "stream, 8 positions a lane {} apart (8 loads in flight)",
                                 x, slots_.size(), lanesNote(), lanes_);
    return;
  }
  const std::string chunk = "chunk_" + x, var = "i_" + x;
  int chunks = open(point, fmt::format("for (int {0} = {3}; {0} < {1}; {0} += {2})", chunk, end, plan_.streamChunk, start));
  int positions = open(chunks, lanes        ? fmt::format("for (int {0} = {1} + lane; {0} < min({1} + {2}, {3}); {0} += {4})",
                                                              var, chunk, plan_.streamChunk, end, lanes_)
                               // Unrolled: a thread's next positions' loads issue before this one's are back
                               // (a column sum over 333 rows, 13 blocks: 22 us one position at a time).
                               : slices_ > 1 ? fmt::format("_Pragma(\"unroll {5}\") for (int {0} = {1} + slice; {0} < min({1} + {2}, {3}); {0} += {4})",
                                                              var, chunk, plan_.streamChunk, end, slices_, kPointsInFlight)
                                             : fmt::format("_Pragma(\"unroll {4}\") for (int {0} = {1}; {0} < min({1} + {2}, {3}); ++{0})", var,
                                                           chunk, plan_.streamChunk, end, kPointsInFlight));
  if (lanes) laneScopes_.insert(positions);
  Env e = env;
  e[x] = {var, positions};
  positions_ = positions;
  // The outputs along the stream that need none of its results, at each
  // position (the point's own, or each of its lanes' positions).
  if (!streamStored_.empty()) {
    const int stored = pointOutside_.empty() ? positions : open(positions, fmt::format("if (!({}))", pointOutside_));
    Env se = e;
    const int at = eightBase_.empty() ? stored : openEightPoints(stored, stored, se);
    for (NodeId o : streamStored_) store(at, o, se);
    if (at != stored) close(at);
    if (stored != positions) close(stored);
  }
  // With 8 points a thread: the slots' common inner axes, then the 8 points, around every update.
  std::vector<int> around;
  int body = positions;
  if (!eightBase_.empty()) {
    for (const std::string& a : slots_[0].innerAxes) around.push_back(body = loop(body, Axis{a, innerSize(a)}, e));
    around.push_back(body = openEightPoints(body, body, e));
  }
  for (int pass = 0; pass < 2; ++pass) {  // the running maxima first, then the sums they rescale
    for (size_t k = 0; k < slots_.size(); ++k) {
      const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
      if (isMax != (pass == 0)) continue;
      const SlotLayout& s = slots_[k];
      Env se = e;
      std::vector<int> opened;
      int scope = body;
      for (const Axis& a : s.local) opened.push_back(scope = loop(scope, a, se));
      std::string ref = slotRef(static_cast<int>(k), se);
      if (isMax && s.keepsPrevious) emit(scope, fmt::format("{} = {};", previousRef(static_cast<int>(k), se), ref));
      if (s.maxSlotOfRescale >= 0) {
        std::string c = rescalePower(rescaleFactor(s.maxSlotOfRescale, se), static_cast<int>(k));
        emit(scope, fmt::format("{} *= {};  // rescaled as the max moves: exp(m_old - m_new)", ref, c));
      }
      if (eightBase_.empty())
        for (const std::string& a : s.innerAxes) opened.push_back(scope = loop(scope, Axis{a, innerSize(a)}, se));
      std::string c = core(static_cast<int>(k), se);
      emit(scope, isMax ? fmt::format("{0} = fmaxf({0}, {1});", ref, c) : fmt::format("{} += {};", ref, c));
      closeAll(opened);
    }
  }
  closeAll(around);
  close(positions);
  close(chunks);
  if (lanes) mergeLaneSlots(point);
  out.streamNote = fmt::format("stream over {} in chunks of {} with {} accumulator slots{}{}{}", x, plan_.streamChunk,
                               slots_.size(), lanes ? ", " + lanesNote() + ", its lanes along the stream" : "",
                               eightBase_.empty() ? "" : ", 8 points a thread",
                               slices_ > 1 ? fmt::format(", its positions dealt to {} slices of the block's threads", slices_) : "");
}

// Outputs a CUDA-core stream can store at each of its positions: along the
// stream, along every group axis (a point's own) and no other, reading none
// of the stream's results (a slot's sum or maximum is whole only after it);
// where no axis is spread over the lanes after the reduction and no axis but
// the stream is shared out over blocks (each block stores its share's
// positions). A thread's 8 points store theirs 16 bytes at once. The others
// are made after the stream, each element again.
std::vector<NodeId> CudaWriter::streamStepOutputs() const {
  std::vector<NodeId> out;
  if (!spread_.empty() || !stagedRows_.empty()) return out;
  for (const auto& split : plan_.splitTiles)
    if (split.first != plan_.streamAxis) return out;
  const std::string& x = plan_.streamAxis;
  for (NodeId o : plan_.outputs) {
    const Type& type = g_.node(o).type;
    if (!type.has(x) || readsStreamResults(g_, stream_, plan_.computed, o)) continue;
    const bool pointsOwn = std::all_of(plan_.groupAxes.begin(), plan_.groupAxes.end(), [&](const Axis& a) { return type.has(a.name); }) &&
                           std::all_of(type.axes.begin(), type.axes.end(), [&](const Axis& a) {
                             return a.name == x || std::any_of(plan_.groupAxes.begin(), plan_.groupAxes.end(),
                                                               [&](const Axis& g) { return g.name == a.name; });
                           });
    if (pointsOwn) out.push_back(o);
  }
  return out;
}

std::vector<NodeId> CudaWriter::outputsAfterStream() const {
  std::vector<NodeId> out;
  for (NodeId o : plan_.outputs)
    if (std::find(streamStored_.begin(), streamStored_.end(), o) == streamStored_.end()) out.push_back(o);
  return out;
}

// The lanes a point takes: a warp's 32, or, where the lane axis is shorter
// than a warp's span of 8 positions a lane and a bf16 array lies along it
// (16-byte loads), as many as hold it, several points a warp (attention's
// 64 channels: 8 lanes, 4 points; at 2 positions a lane of 32 the loads are
// 4 bytes: measured 2.4x the model's time on the H200, 2026-11-30). The
// points must fill whole warps, and no tile may end past its axis (a point
// there is skipped): the shuffles take all 32 lanes of a warp.
int CudaWriter::lanesPerPoint(int64_t points) const {
  if (laneAxis_.empty() || !approximate_) return 32;
  const int64_t extent = innerSize(laneAxis_);
  if (extent % 8 != 0 || extent >= 256 || !bf16ArrayAlong(laneAxis_)) return 32;
  for (const Axis& a : plan_.groupAxes)
    if (a.size % plan_.tiles.at(a.name) != 0) return 32;
  int lanes = 1;
  while (16 * lanes <= extent) lanes *= 2;
  return points % (32 / lanes) == 0 ? lanes : 32;
}

std::string CudaWriter::lanesNote() const {
  return lanes_ == 32  ? "a warp per point"
         : lanes_ > 32 ? fmt::format("{} warps per point", lanes_ / 32)
                       : fmt::format("{} lanes per point, {} points a warp", lanes_, 32 / lanes_);
}

// A warp-per-point stream whose lanes can take 8 adjacent positions each:
// a multiple of 8 positions, at least 256 (every lane busy), scalar slots,
// and a bf16 array read along the
// stream with the stream axis innermost (the loss's logits). (Its chunks
// only split the loop: a CUDA-core launch reads its inputs from GMEM.)
bool CudaWriter::vectorisableLanes(int64_t extent) const {
  const std::string& x = plan_.streamAxis;
  if (!lanesTake8(extent)) return false;
  return scalarSlots() && bf16ArrayAlong(x);
}

int64_t CudaWriter::streamShare() const {
  const int64_t extent = innerSize(plan_.streamAxis);
  auto split = plan_.splitTiles.find(plan_.streamAxis);
  return split == plan_.splitTiles.end() ? extent : std::min(extent, split->second);
}

bool CudaWriter::scalarSlots() const {
  for (const SlotLayout& s : slots_)
    if (!s.local.empty() || s.innerAxes != slots_[0].innerAxes) return false;
  return true;
}

// The stream's positions 8 to a lane: per span of 8 x lanes, each bf16 array read
// along the stream (innermost) by one 16-byte load per lane; the running
// maxima over the lane's 8 positions first, then each sum rescaled once to
// them and its 8 terms added (the online softmax's update per group of
// positions, as the tensor-core streams do it per step).
//
// `strided`: 8 positions a lane the lanes' count apart, each its own load,
// past the end skipped (8 loads in flight); `start`, `end`: the block's
// share of a split stream.
void CudaWriter::vectorLanes(int point, const Env& env, const std::string& start, const std::string& end, bool strided) {
  const std::string& x = plan_.streamAxis;
  const std::string base = fresh("i_" + x + "_8");
  const int group = openLanes(point, fmt::format("for (int {0} = {4}lane{3}; {0} < {1}; {0} += {2})", base, end, 8 * lanes_,
                                                 strided ? "" : " * 8", start == "0" ? "" : start + " + "));
  const bool anyMax = std::any_of(stream_.slots.begin(), stream_.slots.end(),
                                  [](const AccumulatorSlot& slot) { return slot.kind == AccumulatorSlot::Kind::Max; });
  for (int pass = anyMax ? 0 : 1; pass < 2; ++pass) {  // the running maxima first, then the sums they rescale
    positions_ = group;
    for (size_t k = 0; k < slots_.size(); ++k) {
      const SlotLayout& s = slots_[k];
      const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
      if (pass == 0 && isMax && s.keepsPrevious)
        emit(group, fmt::format("{} = {};", previousRef(static_cast<int>(k), env), slotRef(static_cast<int>(k), env)));
      if (pass == 1 && !isMax && s.maxSlotOfRescale >= 0)
        emit(group, fmt::format("{} *= {};  // rescaled as the max moves: exp(m_old - m_new)", slotRef(static_cast<int>(k), env),
                                rescalePower(rescaleFactor(s.maxSlotOfRescale, env), static_cast<int>(k))));
    }
    // The other axes the slots reduce, looped whole at each span (a group
    // norm's batch): the 8 positions' loads inside, at every one of them.
    Env e = env;
    std::vector<int> inner;
    int around = group;
    for (const std::string& a : slots_[0].innerAxes) inner.push_back(around = loop(around, Axis{a, innerSize(a)}, e));
    const int elements = open(around, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
    const std::string element =
        define(elements, "int", "i_" + x, strided ? fmt::format("{} + e * {}", base, lanes_) : base + " + e");
    const int inside = strided ? open(elements, fmt::format("if ({} < {})", element, end)) : elements;
    if (!strided) vectorElements_[element] = {base, around, elements};
    e[x] = {element, inside};
    positions_ = inside;
    for (size_t k = 0; k < slots_.size(); ++k) {
      const bool isMax = stream_.slots[k].kind == AccumulatorSlot::Kind::Max;
      if (isMax != (pass == 0)) continue;
      const std::string ref = slotRef(static_cast<int>(k), e), c = core(static_cast<int>(k), e);
      emit(inside, isMax ? fmt::format("{0} = fmaxf({0}, {1});", ref, c) : fmt::format("{} += {};", ref, c));
    }
    if (inside != elements) close(inside);
    close(elements);
    closeAll(inner);
  }
  close(group);
}

// The lanes' scalar slots combined after a lane-strided stream: each
// running max over the warp, the sums rescaled to it (exp(m_lane - m_warp))
// first, then every sum over the warp.
void CudaWriter::mergeLaneSlots(int point) {
  const std::string butterfly = fmt::format("for (int offset = {}; offset > 0; offset /= 2) ", std::min(lanes_, 32) / 2);
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (stream_.slots[k].kind != AccumulatorSlot::Kind::Max) continue;
    const std::string& m = slots_[k].name;
    const std::string warpMax = fresh(m + "_warp");
    emit(point, fmt::format("float {} = {};", warpMax, m));
    emit(point, fmt::format("{}{} = fmaxf({}, __shfl_xor_sync(0xffffffffu, {}, offset));", butterfly, warpMax, warpMax, warpMax));
    for (size_t j = 0; j < slots_.size(); ++j)
      if (slots_[j].maxSlotOfRescale == static_cast<int>(k))
        emit(point, fmt::format("{} *= {};", slots_[j].name,
                                rescalePower(fmt::format("{}({}, {})", rescale(), m, warpMax), static_cast<int>(j))));
    emit(point, fmt::format("{} = {};", m, warpMax));
  }
  for (size_t k = 0; k < slots_.size(); ++k)
    if (stream_.slots[k].kind == AccumulatorSlot::Kind::Sum)
      emit(point, fmt::format("{}{} += __shfl_xor_sync(0xffffffffu, {}, offset);", butterfly, slots_[k].name, slots_[k].name));
  if (lanes_ > 32) mergeWarpSlots(point);
}

void CudaWriter::mergeWarpSlots(int point) {
  const int warps = lanes_ / 32;
  const int64_t blockWarps = static_cast<int64_t>(blockThreads_) / 32;
  for (const SlotLayout& s : slots_) emit(point, fmt::format("__shared__ float {}_warps[{}];", s.name, blockWarps));
  const int writer = open(point, "if (threadIdx.x % 32 == 0)");
  for (const SlotLayout& s : slots_) emit(writer, fmt::format("{0}_warps[threadIdx.x / 32] = {0};", s.name));
  close(writer);
  emit(point, "__syncthreads();");
  const std::string first = fresh("first_warp");
  emit(point, fmt::format("const int {} = threadIdx.x / {} * {};  // the point's first warp", first, lanes_, warps));
  std::vector<std::string> joined(slots_.size());
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (stream_.slots[k].kind != AccumulatorSlot::Kind::Max) continue;
    joined[k] = fresh(slots_[k].name + "_block");
    emit(point, fmt::format("float {} = {}_warps[{}];", joined[k], slots_[k].name, first));
    emit(point, fmt::format("for (int w = 1; w < {0}; ++w) {1} = fmaxf({1}, {2}_warps[{3} + w]);", warps, joined[k],
                            slots_[k].name, first));
  }
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (stream_.slots[k].kind != AccumulatorSlot::Kind::Sum) continue;
    joined[k] = fresh(slots_[k].name + "_block");
    const int m = slots_[k].maxSlotOfRescale;
    emit(point, fmt::format("float {} = 0.0f;", joined[k]));
    emit(point, m < 0 ? fmt::format("for (int w = 0; w < {0}; ++w) {1} += {2}_warps[{3} + w];", warps, joined[k],
                                    slots_[k].name, first)
                      : fmt::format("for (int w = 0; w < {0}; ++w) {1} += {2}_warps[{3} + w] * {4};", warps, joined[k],
                                    slots_[k].name, first,
                                    rescalePower(fmt::format("{}({}_warps[{} + w], {})", rescale(),
                                                             slots_[static_cast<size_t>(m)].name, first,
                                                             joined[static_cast<size_t>(m)]),
                                                 static_cast<int>(k))));
  }
  for (size_t k = 0; k < slots_.size(); ++k) emit(point, fmt::format("{} = {};", slots_[k].name, joined[k]));
}

int CudaWriter::streamLanes(int64_t grid, int64_t points) const {
  if (laneAxis_.empty() || laneAxis_ != plan_.streamAxis || lanes_ != 32 || resident_.threads == 0 || !scalarSlots())
    return lanes_;
  for (const Axis& a : plan_.groupAxes)
    if (a.size % plan_.tiles.at(a.name) != 0) return lanes_;  // a remainder tile's idle points would miss the barrier
  int64_t inner = 1;  // the values a position adds: one, or the other reduced axes' positions
  for (const std::string& a : slots_[0].innerAxes) inner *= innerSize(a);
  const int64_t extent = streamShare();
  const int64_t residentBlocks = std::min(grid, resident_.blocks);
  int lanes = 32;
  while (points * lanes * 2 <= 256 && residentBlocks * points * lanes * 2 <= resident_.threads &&
         extent * inner / (lanes * 2) >= 32 && lanes * 2 <= extent)
    lanes *= 2;
  return lanes;
}

int64_t CudaWriter::innerSize(const std::string& axis) const {
  for (NodeId id : plan_.computed)
    for (NodeId o : g_.node(id).operands)
      if (const Axis* a = g_.node(o).type.find(axis)) return a->size;
  throw std::logic_error("emit cuda: no size for axis " + axis);
}

// A slot rescaled by exp(-k m) takes the factor k times.
std::string CudaWriter::rescalePower(const std::string& factor, int slot) const {
  const int k = stream_.slots[static_cast<size_t>(slot)].rescalePower;
  std::string product = factor;
  for (int i = 1; i < k; ++i) product += " * " + factor;
  return k == 1 ? factor : "(" + product + ")";
}

// exp(m_old - m_new) of a running max, once per position of the max.
std::string CudaWriter::rescaleFactor(int maxSlot, const Env& env) {
  return streamValue(-1, maxSlot, env, "rescale",
                     fmt::format("{}({}, {})", rescale(), previousRef(maxSlot, env), slotRef(maxSlot, env)));
}

// A value of the stream body that reads the running max of a slot: computed
// once per position of the stream and of the axes of `node` (-1: none) and
// of the max, after the max's update.
std::string CudaWriter::streamValue(NodeId node, int maxSlot, const Env& env, const std::string& base, const std::string& expr) {
  int target = positions_;
  std::string key = fmt::format("{}{}:{}", base, maxSlot, node);
  std::vector<Axis> axes = slots_[static_cast<size_t>(maxSlot)].local;
  if (node >= 0) axes.insert(axes.end(), g_.node(node).type.axes.begin(), g_.node(node).type.axes.end());
  for (const Axis& a : axes) {
    target = deeper(target, env.at(a.name).scope);
    key += "|" + env.at(a.name).expr;
  }
  key += fmt::format("@{}", target);
  if (auto it = cache_.find(key); it != cache_.end()) return it->second;
  std::string c = define(target, "float", base, expr);
  cache_[key] = c;
  return c;
}

// A factor's pivot (analysis/streamability.h): its pivotOf's value at
// position 0 of the axes pivotKeeps lacks. Where it depends on the stream's
// point alone it is read once, ahead of the stream, and the body and the tail
// share it.
std::string CudaWriter::pivot(const StreamFactor& f, const Env& env) {
  const Type& keeps = g_.node(f.pivotKeeps).type;
  Env at = env;
  for (const Axis& a : g_.node(f.pivotOf).type.axes)
    if (!keeps.has(a.name)) at[a.name] = {"0", floor_};
  return fmt::format("llmc_pivot({})", value(f.pivotOf, at));
}

// An aggregate after the stream: the sum of its terms over the slots.
std::string CudaWriter::aggregate(const Node& n, const Env& own, int target) {
  std::string sum;
  for (const AggregateTerm& t : aggregateTerms().at(n.id)) {
    const AccumulatorSlot& slot = stream_.slots[static_cast<size_t>(t.slot)];
    std::string term = slotRef(t.slot, own);
    // A slot per point of the thread's 8 read by an aggregate without the
    // points' axis (a row's mean beside a matmul's 8 columns): its 8 copies
    // hold the same sum, and no loop over e is open here: the first.
    if (!tcs_ && !eightBase_.empty() && !own.count(plan_.groupAxes.back().name) && term.ends_with("[e]"))
      term.replace(term.size() - 3, 3, "[0]");
    if (t.coefficient != 1) term = fmt::format("{} * {}", floatLiteral(t.coefficient), term);
    bool dropped = false;  // a rescaled slot already holds the sum times exp(-m)
    for (const StreamFactor& f : t.scale) {
      if (!dropped && slot.rescaledBy == f.node && f.kind == StreamFactor::Kind::Exp && f.power == -slot.rescalePower) {
        dropped = true;
        continue;
      }
      std::string v = value(f.node, own);
      if (f.pivoted()) v = fmt::format("({} - {})", v, pivot(f, own));
      if (f.kind == StreamFactor::Kind::Exp) {  // exp(power * v)
        const std::string exponent = f.power == 1    ? v
                                     : f.power == -1 ? "-" + v
                                                     : fmt::format("{} * {}", floatLiteral(f.power), v);
        term = term + " * " + exp(exponent);
        continue;
      }
      for (int p = 0; p < std::abs(f.power); ++p) term = f.power > 0 ? term + " * " + v : divide(term, v);
    }
    sum = sum.empty() ? term : sum + " + " + term;
  }
  return define(target, "float", names_[static_cast<size_t>(n.id)], sum.empty() ? "0.0f" : sum);
}

// ---- launches
void CudaWriter::store(int scope, NodeId id, const Env& env) {
  const StoredArray& arr = stored_.at(id);
  std::string v = value(id, env);
  if (!plan_.splitTiles.empty() && (!tcs_ || tcs_->share > 0) &&
      addsPartialSums(g_.node(id).type, plan_.splitTiles)) {  // a partial sum: f32, zeroed first
    emit(scope, fmt::format("atomicAdd(&{}[{}], {});", arr.param, offset(id, env), v));
    return;
  }
  // Not where the store is guarded (an output without one of the tile's axes is stored by one
  // point of it): the 16-byte store after the span would be made by every point.
  if (const VectorSpan* span = vectorSpanOf(g_.node(id), env);
      span && (arr.ctype == "llmc_bf16" || arr.ctype == "float") && scope == span->elements) {
    // A lane's 8 positions of a bf16 (f32) array along its innermost axis: gathered, then one (two) 16-byte
    // store(s) after them.
    const std::string buffer = fresh(names_[static_cast<size_t>(id)] + "_8");
    const Env at = spanStart(g_.node(id), *span, env);
    emit(span->scope, fmt::format("float {}[8];", buffer));
    emit(scope, fmt::format("{}[e] = {};", buffer, v));
    const std::string kind = arr.ctype == "float" ? "f32" : "bf16";
    afterClose_[span->elements].push_back(
        span->remaining.empty()
            ? fmt::format("llmc_store_{}x8({} + {}, {});", kind, arr.param, offset(id, at), buffer)
            : fmt::format("llmc_store_{}x8_upto({} + {}, {}, {});", kind, arr.param, offset(id, at), span->remaining, buffer));
    return;
  }
  emit(scope, fmt::format("{}[{}] = {};", arr.param, offset(id, env), storeConversion(arr, v)));
}

// The layouts of the stored arrays the launch reads along `along`, through
// the views it reads them through (a renamed axis is the array's own).
std::vector<AffineLayout> CudaWriter::readLayoutsAlong(const std::string& along) const {
  const std::set<NodeId>& stored = storedIds();
  std::vector<AffineLayout> layouts;
  for (NodeId id : plan_.computed)
    for (NodeId o : g_.node(id).operands) {
      if (isFree(g_, g_.node(o)) || !g_.node(o).type.has(along)) continue;
      std::string why;
      if (std::optional<AffineLayout> l = layoutThroughViews(g_, o, plan_.computed, stored, names_, why))
        layouts.push_back(std::move(*l));
    }
  return layouts;
}

// Whether a stored array the launch reads along `along` is contiguous
// along `walked`.
bool CudaWriter::contiguousAcrossPoints(const std::string& along, const std::string& walked) const {
  for (const AffineLayout& l : readLayoutsAlong(along))
    if (l.strides.count(walked) && l.strides.at(walked) == 1) return true;
  return false;
}

bool CudaWriter::contiguousAlongStream() const {
  const std::vector<AffineLayout> layouts = readLayoutsAlong(plan_.streamAxis);
  return !layouts.empty() && std::all_of(layouts.begin(), layouts.end(), [&](const AffineLayout& l) {
    return l.strides.count(plan_.streamAxis) && l.strides.at(plan_.streamAxis) == 1;
  });
}

// A stream whose slots are all scalars per point (a softmax's max and
// sum over a vocabulary; a group norm's weight gradient, summed over the
// batch inside each position) strides its positions by the lanes instead:
// each lane keeps its own slots, merged after the stream (online-softmax
// style). Not where the points are contiguous in memory (column sums): their
// threads walk the points, slices of them the stream.
std::string CudaWriter::laneAxis() const {
  std::set<std::string> group;
  for (const Axis& a : plan_.groupAxes) group.insert(a.name);
  if (!plan_.streamAxis.empty()) {
    if (plan_.streamChunk < kLaneAxisMin || streamShare() < kLaneAxisMin) return "";
    if (!plan_.groupAxes.empty() && contiguousAcrossPoints(plan_.streamAxis, plan_.groupAxes.back().name)) return "";
    const StreamAnalysis a = analyzeStream(g_, plan_.computed, plan_.streamAxis);
    if (!a.streamable || a.slots.empty() || !slotsOnePerPoint(g_, a, group)) return "";
    // (A split of the stream itself leaves the lanes its share; one of an
    // axis the slots loop at each position, its share of that loop.)
    for (const auto& [axis, perBlock] : plan_.splitTiles)
      if (axis != plan_.streamAxis && std::find(a.slots[0].axes.begin(), a.slots[0].axes.end(), axis) == a.slots[0].axes.end())
        return "";
    // Slots that loop other axes at each position take lanes along the stream
    // only where it is what every array read along it lies contiguous along
    // (else the lanes' reads would stride by the looped axes').
    const bool looped = std::any_of(a.slots.begin(), a.slots.end(), [](const AccumulatorSlot& s) { return s.axes.size() > 1; });
    if (looped && !contiguousAlongStream()) return "";
    return plan_.streamAxis;
  }
  // Without a stream: the axis held whole (a split axis is the blocks' to share).
  std::set<std::string> split;
  for (const auto& [axis, perBlock] : plan_.splitTiles) split.insert(axis);
  return heldRowAxis(g_, plan_.computed, plan_.groupAxes, split);
}

}  // namespace llmc::cuda_writer
