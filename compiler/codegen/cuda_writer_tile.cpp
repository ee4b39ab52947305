// Tile launches: one block per tile of the group axes, threads over the
// tile's points (8 adjacent points each where they vectorise), slices of a
// point's stream, the outputs' stores.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

void CudaWriter::tile(WrittenKernel& out) {
  int64_t points = 1;
  out.grid = 1;
  for (const Axis& a : plan_.groupAxes) {
    points *= plan_.tiles.at(a.name);
    out.grid *= ceilDiv(a.size, plan_.tiles.at(a.name));
  }
  if (points > INT_MAX) throw std::logic_error("emit cuda: a tile of more than 2^31 points");
  laneAxis_ = laneAxis();
  spread_ = spreadAxes();
  // With spread axes the warps walk rows: the tile's positions of the other group axes.
  int64_t rows = points;
  for (const Axis& a : spread_) rows /= plan_.tiles.at(a.name);
  lanes_ = lanesPerPoint(rows);
  const bool streamed = setUpStream();
  if (streamed) lanes_ = streamLanes(out.grid, rows);
  else setUpStagedRows(out);
  const std::optional<EightPoints> eightPoints = pointsTake8(streamed);
  const bool eight = eightPoints.has_value();
  if (eight) eight_ = *eightPoints;
  if (!streamed && !eight && unrolledAxis().empty() && flatPoints()) return flatTile(out);
  const std::string unrolled = eight || streamed ? std::string() : unrolledAxis();
  const int64_t threadPoints = eight ? points / 8 : unrolled.empty() ? points : points / plan_.tiles.at(unrolled);
  std::vector<std::pair<std::string, int64_t>> splits;  // axis, blocks sharing it
  for (const auto& [axis, perBlock] : plan_.splitTiles) {
    splits.emplace_back(axis, ceilDiv(innerSize(axis), perBlock));
    out.grid *= splits.back().second;
  }
  slices_ = streamed ? streamSlices(out.grid, threadPoints) : 1;
  out.block = static_cast<int>(std::min<int64_t>(
      256, !laneAxis_.empty() ? rows * lanes_ : slices_ > 1 ? threadPoints * slices_ : ceilDiv(threadPoints, 32) * 32));
  if (!stagedRows_.empty()) out.block = lanes_;  // one point at a time, every thread on it
  blockThreads_ = out.block;
  // Tile origin from the block index, last group axis fastest; the shares
  // of split axes slowest of all. The blocks running at once then add into
  // different outputs: with the shares fastest, the blocks of one tile ran
  // together and their atomic adds queued on its addresses (GPT-2's MLP
  // bias gradient, its stream in 1024 shares of 32 positions: 588 us, 125
  // with the shares slowest; 51 with the stream whole, as the partition
  // search keeps it where the grid fills the device; H200, 2026-12-04).
  if (out.grid > 1) emit(0, "long long block = blockIdx.x;");
  std::vector<std::string> origins(plan_.groupAxes.size());
  for (size_t i = plan_.groupAxes.size(); i-- > 0;) {
    const Axis& a = plan_.groupAxes[i];
    const int64_t tiles = ceilDiv(a.size, plan_.tiles.at(a.name));
    origins[i] = "t_" + a.name;
    if (tiles == 1) {
      emit(0, fmt::format("const int {} = 0;", origins[i]));
      continue;
    }
    emit(0, fmt::format("const int {} = (int)(block % {}) * {};", origins[i], tiles, plan_.tiles.at(a.name)));
    if (i > 0 || !splits.empty()) emit(0, fmt::format("block /= {};", tiles));
  }
  for (size_t i = 0; i < splits.size(); ++i) {
    const auto& [axis, blocks] = splits[i];
    emit(0, fmt::format("const int split_{} = (int)(block % {}) * {};", axis, blocks, plan_.splitTiles.at(axis)));
    if (i + 1 < splits.size()) emit(0, fmt::format("block /= {};", blocks));
  }
  if (!streamed && plan_.splitTiles.empty()) stageTransposedReads(origins);
  if (!laneAxis_.empty()) emit(0, fmt::format("const int lane = threadIdx.x % {};{}", lanes_,
                                              lanes_ < 32 ? "  // within the point's lanes" : ""));
  // Adjacent threads take adjacent points (a column sum's columns), or, where
  // the arrays lie contiguous along the stream instead, adjacent slices (the
  // stream's adjacent positions): either way a warp's loads share sectors.
  const bool slicesAdjacent = slices_ > 1 && !eight && contiguousAlongStream();
  if (slices_ > 1)
    emit(0, slicesAdjacent ? fmt::format("const int slice = threadIdx.x % {};  // the block's threads: {} slices of the stream's "
                                         "positions, adjacent threads adjacent slices", slices_, slices_)
                           : fmt::format("const int slice = threadIdx.x / {};  // the block's threads: {} slices of the stream's "
                                         "positions", threadPoints, slices_));
  const int point = open(0, !laneAxis_.empty() ? fmt::format("for (int p = threadIdx.x / {1}; p < {0}; p += blockDim.x / {1})", rows, lanes_)
                            : slicesAdjacent   ? fmt::format("for (int p = threadIdx.x / {}; p < {}; p += blockDim.x)", slices_, threadPoints)
                            : slices_ > 1      ? fmt::format("for (int p = threadIdx.x % {}; p < {}; p += blockDim.x)", threadPoints, threadPoints)
                            : streamed || threadPoints <= blockThreads_
                                ? fmt::format("for (int p = threadIdx.x; p < {}; p += blockDim.x)", threadPoints)
                                // Unrolled over the block's known threads: a thread's next points' loads issue before
                                // this one's are back (one at a time, a copy of 1.5 MB took 4.4 us for 1.7 of bytes).
                                : fmt::format("_Pragma(\"unroll {}\") for (int p = threadIdx.x; p < {}; p += {})",
                                              kPointsInFlight, threadPoints, blockThreads_));
  floor_ = point;
  // The unrolled loop over a tile's points (no stream, no lanes): its
  // remainder points take the last one's place.
  const bool clamped = !streamed && laneAxis_.empty() && slices_ == 1 && threadPoints > blockThreads_;
  Env env;
  int64_t inner = 1;
  std::string outside;
  // Threads next to each other take points next to each other along the
  // last group axis: the innermost axis of the outputs, for coalescing.
  std::string eightBase;  // with 8 points a thread: the first of its 8 along eight_.axis
  auto insideEight = [&](const Axis& a) {
    return eight && std::any_of(eight_.inner.begin(), eight_.inner.end(), [&](const Axis& x) { return x.name == a.name; });
  };
  for (size_t i = plan_.groupAxes.size(); i-- > 0;) {
    const Axis& a = plan_.groupAxes[i];
    if (std::any_of(spread_.begin(), spread_.end(), [&](const Axis& x) { return x.name == a.name; }))
      continue;  // bound by the row's lanes after the reduction (storeSpread)
    if (insideEight(a)) continue;  // bound by the thread's 8 points (openEightPoints)
    if (a.name == unrolled) continue;  // bound by the thread's loop over the whole axis, below
    const bool stepped = eight && a.name == eight_.axis;
    const int64_t t = stepped ? plan_.tiles.at(a.name) / eight_.step : plan_.tiles.at(a.name);
    // A digit the points' loop steps over whole (its step, the block's
    // threads, a multiple of it) is the thread's own, fixed over its
    // points: written from threadIdx.x, the compiler keeps it and the loads
    // it alone indexes (a row's statistics) out of the loop.
    const bool ownDigit = i > 0 && t > 1 && laneAxis_.empty() && slices_ == 1 && blockThreads_ % (inner * t) == 0;
    const std::string p = ownDigit ? "threadIdx.x" : "p";
    std::string pos = inner == 1 ? p : fmt::format("{} / {}", p, inner);
    if (i > 0 && t > 1) pos = fmt::format("({}) % {}", pos, t);
    if (t == 1) pos = std::string("0");  // not `= "0"`: GCC 12 warns of overlap there (-Wrestrict), wrongly
    if (stepped) pos = fmt::format("({}) * {}", pos, eight_.step);
    std::string var = (stepped ? "i8_" : "i_") + a.name;
    if (a.size % plan_.tiles.at(a.name) != 0 && (slices_ > 1 || clamped)) {
      // A point past the end takes the last one's place (its loads in
      // bounds, its values unused) and skips only the stores: sliced, so
      // that every thread reaches the slices' joins; without a stream, so
      // that the unrolled points' loads are not held behind a branch each.
      const std::string position = fmt::format("{} + {}", origins[i], pos);
      outside += fmt::format("{}{} >= {}", outside.empty() ? "" : " || ", position, a.size);
      emit(point, fmt::format("const int {} = min({}, {});", var, position, a.size - (stepped ? eight_.step : 1)));
    } else {
      emit(point, fmt::format("const int {} = {} + {};", var, origins[i], pos));
      if (a.size % plan_.tiles.at(a.name) != 0)
        outside += fmt::format("{}{} >= {}", outside.empty() ? "" : " || ", var, a.size);
    }
    if (stepped) eightBase = var;
    else env[a.name] = {var, point}, pointVars_[a.name] = var;
    inner *= t;
  }
  if (!outside.empty() && slices_ == 1 && !clamped)
    emit(point, fmt::format("if ({}) continue;  // past the end of a remainder tile", outside));
  eightBase_ = eightBase;
  if (!streamed && !eight && unrolled.empty()) setUpHeldRows(point, env);
  if (streamed) {
    // The thread's 8 points (if so) are a loop inside the stream's positions, then again for the tail.
    pointOutside_ = slices_ > 1 ? outside : "";
    if (unrolled.empty()) streamStored_ = streamStepOutputs();
    streamLoop(point, env, out);
    if (slices_ > 1) mergeSlices(point, threadPoints, !alongStreamAfterIt().empty());
  }
  // Sliced, the outputs along the stream made after it: each slice its positions.
  if (slices_ > 1 && !alongStreamAfterIt().empty()) storeSlicedAlongStream(point, outside, env);
  int tail = slices_ == 1 ? (clamped && !outside.empty() ? open(point, fmt::format("if (!({}))", outside)) : point)
             : outside.empty() ? open(point, "if (slice == 0)")
                               : open(point, fmt::format("if (slice == 0 && !({}))", outside));
  int at = eight ? openEightPoints(tail, tail, env) : tail;
  if (!unrolled.empty()) {
    const std::string var = "i_" + unrolled;
    at = open(tail, fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < {1}; ++{0})", var, plan_.tiles.at(unrolled)));
    env[unrolled] = {var, at};
    pointVars_[unrolled] = var;
  }
  if (spread_.empty()) {
    std::vector<NodeId> outputs = outputsAfterStream();
    if (slices_ > 1)
      std::erase_if(outputs, [&](NodeId o) { return g_.node(o).type.has(plan_.streamAxis); });
    storeOutputs(at, env, outputs);
  } else {
    storeSpread(at, env);
    std::vector<std::string> names;
    for (const Axis& a : spread_) names.push_back(a.name);
    out.streamNote += fmt::format("{}the reduction over {} once per row, the row's lanes then over the tile's [{}]",
                                  out.streamNote.empty() ? "" : "; ", laneAxis_, joinAxes(names));
  }
  if (at != tail) close(at);
  if (tail != point) close(tail);
  close(point);
}

// Outputs along the stream made after it (they read its results, or were
// not stored inside it).
std::vector<NodeId> CudaWriter::alongStreamAfterIt() const {
  std::vector<NodeId> out;
  if (plan_.streamAxis.empty()) return out;
  for (NodeId o : outputsAfterStream())
    if (g_.node(o).type.has(plan_.streamAxis)) out.push_back(o);
  return out;
}

// Each slice walks its positions of the stream again (those it streamed:
// every slices-th of the block's share) and stores the outputs along it
// there, a thread's 8 points inside each position (16-byte stores); the
// points past a remainder tile's end skip them.
void CudaWriter::storeSlicedAlongStream(int point, const std::string& outside, Env env) {
  const std::string& x = plan_.streamAxis;
  const int64_t extent = innerSize(x);
  std::string start = "0", end = std::to_string(extent);
  if (auto split = plan_.splitTiles.find(x); split != plan_.splitTiles.end()) {
    start = "split_" + x;
    end = fmt::format("min(split_{} + {}, {})", x, split->second, extent);
  }
  const int inside = outside.empty() ? point : open(point, fmt::format("if (!({}))", outside));
  const std::string var = fresh("i_" + x);
  emit(inside, "// the outputs along the stream: the slice's positions again");
  const int positions =
      open(inside, fmt::format("for (int {0} = {1} + slice; {0} < {2}; {0} += {3})", var, start, end, slices_));
  env[x] = {var, positions};
  const int at = eightBase_.empty() ? positions : openEightPoints(positions, positions, env);
  storeOutputs(at, env, alongStreamAfterIt());
  if (at != positions) close(at);
  close(positions);
  if (inside != point) close(inside);
}

// A last group axis of a few positions (2 to 8), tiled whole, that a
// concatenation selects its parts along (a convolution's stacked windows
// [b u c k], k of 3): each thread takes all its positions, in a loop the
// compiler unrolls, where the parts' branches are known. Adjacent threads
// along it took different parts: a warp ran every part's branch (the
// windows, 89 instructions a point, 25 us for bytes that take 7).
std::string CudaWriter::unrolledAxis() const {
  if (!laneAxis_.empty() || !plan_.splitTiles.empty() || plan_.groupAxes.empty()) return "";
  const Axis& a = plan_.groupAxes.back();
  if (plan_.tiles.at(a.name) != a.size || a.size < 2 || a.size > 8) return "";
  for (NodeId id : plan_.computed) {
    const Node& n = g_.node(id);
    if (n.op == Op::Concat && !n.newAxes.empty() && n.newAxes[0] == a.name) return a.name;
  }
  return "";
}

// The thread's 8 adjacent points along an axis (the last group axis, from
// eightBase_, unless named), a loop inside `parent`: bf16 arrays along the
// axis load and store 16 bytes at once, at `span` (load, store).
int CudaWriter::openEightPoints(int parent, int span, Env& env) {
  return openEightPoints(parent, span, eight_, eightBase_, env);
}

// Over several axes: e's low digits are the inner axes' positions, constants
// once the loop is unrolled (a stack's part chosen at compile time).
int CudaWriter::openEightPoints(int parent, int span, const EightPoints& eight, const std::string& base, Env& env) {
  if (eight.inner.empty()) return openEightPoints(parent, span, eight.axis, base, env);
  const int at = open(parent, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
  VectorSpan vector{base, span, at, {eight.axis}};
  env[eight.axis] = {define(at, "int", "i_" + eight.axis, fmt::format("{} + e / {}", base, 8 / eight.step)), at};
  pointVars_[eight.axis] = env[eight.axis].expr;
  int64_t below = 8 / eight.step;  // positions of the inner axes inside the current one
  std::string innermost;
  for (const Axis& a : eight.inner) {
    below /= a.size;
    const std::string digit = below == 1 ? "e" : fmt::format("e / {}", below);
    innermost = define(at, "int", "i_" + a.name, fmt::format("({}) % {}", digit, a.size));
    env[a.name] = {innermost, at};
    pointVars_[a.name] = innermost;
    vector.axes.push_back(a.name);
  }
  vectorElements_[innermost] = vector;
  return at;
}

int CudaWriter::openEightPoints(int parent, int span, const std::string& axis, const std::string& base, Env& env) {
  const int at = open(parent, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
  const std::string var = define(at, "int", "i_" + axis, base + " + e");
  vectorElements_[var] = {base, span, at};
  env[axis] = {var, at};
  pointVars_[axis] = var;
  return at;
}

// Slots every thread can keep as scalars per point and combine with
// another thread's by one + or max: no per-point axes, no sum rescaled by a
// running max, the same axes looped inside each position.
bool CudaWriter::plainSlots() const {
  for (const SlotLayout& s : slots_)
    if (!s.local.empty() || s.maxSlotOfRescale >= 0 || s.keepsPrevious || s.innerAxes != slots_[0].innerAxes) return false;
  return true;
}

// Slots slices of a point's stream can each keep and join after it: scalars
// per point (per each of 8 points where plain), the same axes looped inside
// each position; a sum rescaled by a running maximum (a softmax over a
// column) joined with it, as the lanes' are (mergeLaneSlots).
bool CudaWriter::slicedSlots() const {
  for (const SlotLayout& s : slots_)
    if (!s.local.empty() || s.innerAxes != slots_[0].innerAxes) return false;
  return eightBase_.empty() || plainSlots();
}

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
// positions. A remainder tile's points past the end take the last point's
// place and skip only their stores (tile), so all threads reach the joins.
// Outputs along the stream are stored by the slice that takes the position:
// in the stream, or after it, each slice walking its positions again with
// the joined slots (a column's centred values beside its variance). The cost
// model's latency term counts the threads so (planning/thread_loads.h).
int CudaWriter::streamSlices(int64_t grid, int64_t threadPoints) const {
  if (!laneAxis_.empty() || tcs_ || !slicedSlots()) return 1;
  const int64_t extent = streamShare();
  int slices = 1;
  const int64_t residentBlocks = std::min(grid, resident_.blocks);
  while (threadPoints * slices * 2 <= 256 && residentBlocks * threadPoints * slices * 2 <= resident_.threads &&
         extent / (slices * 2) >= 8)
    slices *= 2;
  return slices;
}

// Each slot's value (a thread's 8 where it takes 8 points) into its shared
// array at `at`: a slice handing its slots on.
void CudaWriter::storeSlots(int scope, const std::string& at, int width) {
  for (const SlotLayout& s : slots_)
    emit(scope, width == 1 ? fmt::format("{0}_slices[{1}] = {0};", s.name, at)
                           : fmt::format("for (int w = 0; w < 8; ++w) {0}_slices[{1} + w] = {0}[w];", s.name, at));
}

// The slices' slots joined after the stream: a tree over shared memory,
// each round the upper half of the slices handing theirs to the lower.
// `shared`: then handed back from slice 0 to every slice (for outputs along
// the stream that each slice makes after it).
void CudaWriter::mergeSlices(int point, int64_t threadPoints, bool shared) {
  const int width = eightBase_.empty() ? 1 : 8;
  const std::string at = fmt::format("((slice - half) * {} + p) * {}", threadPoints, width);
  const std::string own = fmt::format("(slice * {} + p) * {}", threadPoints, width);
  for (size_t k = 0; k < slots_.size(); ++k)
    emit(0, fmt::format("__shared__ float {}_slices[{}];", slots_[k].name, slices_ / 2 * threadPoints * width));
  const int round = open(point, fmt::format("for (int half = {}; half > 0; half /= 2)", slices_ / 2));
  const int upper = open(round, "if (slice >= half && slice < 2 * half)");
  storeSlots(upper, at, width);
  close(upper);
  emit(round, "__syncthreads();");
  const int lower = open(round, "if (slice < half)");
  // A running maximum and the sums it rescales: both sides' sums rescaled
  // to the joined maximum (one value a point: no 8 points with such slots).
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (stream_.slots[k].kind != AccumulatorSlot::Kind::Max || !slots_[k].keepsPrevious) continue;
    const std::string& m = slots_[k].name;
    const std::string theirs = fresh(m + "_theirs"), joined = fresh(m + "_joined");
    emit(lower, fmt::format("const float {} = {}_slices[{}];", theirs, m, own));
    emit(lower, fmt::format("const float {} = fmaxf({}, {});", joined, m, theirs));
    for (size_t j = 0; j < slots_.size(); ++j)
      if (slots_[j].maxSlotOfRescale == static_cast<int>(k))
        emit(lower, fmt::format("{0} = {0} * {1} + {0}_slices[{2}] * {3};", slots_[j].name,
                                rescalePower(fmt::format("{}({}, {})", rescale(), m, joined), static_cast<int>(j)), own,
                                rescalePower(fmt::format("{}({}, {})", rescale(), theirs, joined), static_cast<int>(j))));
    emit(lower, fmt::format("{} = {};", m, joined));
  }
  for (size_t k = 0; k < slots_.size(); ++k) {
    if (slots_[k].keepsPrevious || slots_[k].maxSlotOfRescale >= 0) continue;  // joined above
    const std::string& name = slots_[k].name;
    const std::string mine = width == 1 ? name : name + "[w]";
    const std::string theirs = fmt::format("{}_slices[{}{}]", name, own, width == 1 ? "" : " + w");
    const std::string join = stream_.slots[k].kind == AccumulatorSlot::Kind::Max
                                 ? fmt::format("{0} = fmaxf({0}, {1});", mine, theirs)
                                 : fmt::format("{} += {};", mine, theirs);
    emit(lower, width == 1 ? join : "for (int w = 0; w < 8; ++w) " + join);
  }
  close(lower);
  emit(round, "__syncthreads();");
  close(round);
  if (!shared) return;
  const std::string first = fmt::format("p * {}", width);  // slice 0's place, the last round's
  const int zero = open(point, "if (slice == 0)");
  storeSlots(zero, first, width);
  close(zero);
  emit(point, "__syncthreads();");
  for (const SlotLayout& s : slots_)
    emit(point, width == 1 ? fmt::format("{0} = {0}_slices[{1}];", s.name, first)
                           : fmt::format("for (int w = 0; w < 8; ++w) {0}[w] = {0}_slices[{1} + w];", s.name, first));
}

// A launch without lanes whose threads can take 8 adjacent points each
// along the last group axis (its tile and size multiples of 8): under bf16
// storage, where a bf16 array it reads or writes has that axis innermost
// (a gradient of the logits, the concatenation of dq, dk, dv, a bias's
// gradient summed over the rows).
// A stream's slots must then be plain (one per point, joined by + or max):
// each becomes 8 registers, the points' loop inside the stream's positions.
std::optional<CudaWriter::EightPoints> CudaWriter::pointsTake8(bool streamed) const {
  if (!approximate_ || !laneAxis_.empty() || plan_.groupAxes.empty()) return std::nullopt;
  if (streamed ? !plainSlots() : !plan_.streamAxis.empty() || !plan_.splitTiles.empty()) return std::nullopt;
  const Axis& x = plan_.groupAxes.back();
  if (plan_.tiles.at(x.name) % 8 == 0 && x.size % 8 == 0 && bf16ArrayAlong(x.name)) return EightPoints{x.name, 8, {}};
  if (streamed) return std::nullopt;
  EightPoints eight;
  int64_t whole = 1;  // positions of the inner axes
  for (size_t i = plan_.groupAxes.size(); i-- > 0;) {
    const Axis& a = plan_.groupAxes[i];
    const int64_t tile = plan_.tiles.at(a.name), step = 8 / whole;
    if (whole > 1 && tile % step == 0 && a.size % step == 0) {
      eight.axis = a.name;
      eight.step = step;
      std::reverse(eight.inner.begin(), eight.inner.end());
      std::vector<std::string> ending = {a.name};
      for (const Axis& in : eight.inner) ending.push_back(in.name);
      if (!bf16OutputEndsWith(ending)) return std::nullopt;
      return eight;
    }
    if (tile != a.size || step % a.size != 0) return std::nullopt;
    whole *= a.size;
    eight.inner.push_back(a);
  }
  return std::nullopt;
}

bool CudaWriter::bf16OutputEndsWith(const std::vector<std::string>& axes) const {
  for (NodeId o : plan_.outputs) {
    auto it = stored_.find(o);
    const std::vector<Axis>& own = g_.node(o).type.axes;
    if (it == stored_.end() || it->second.ctype != "llmc_bf16" || own.size() < axes.size()) continue;
    if (std::equal(axes.begin(), axes.end(), own.end() - static_cast<std::ptrdiff_t>(axes.size()),
                   [](const std::string& name, const Axis& a) { return name == a.name; }))
      return true;
  }
  return false;
}

// Whether the launch reads or writes a bf16 array whose innermost axis is
// `axis` (read through views: a renamed axis is the array's own): what
// taking 8 adjacent positions at once turns into 16-byte accesses.
bool CudaWriter::bf16ArrayAlong(const std::string& axis) const {
  auto bf16 = [&](NodeId id) {
    auto it = stored_.find(id);
    return it != stored_.end() && it->second.ctype == "llmc_bf16";
  };
  for (NodeId o : plan_.outputs)
    if (bf16(o) && !g_.node(o).type.axes.empty() && g_.node(o).type.axes.back().name == axis) return true;
  for (const AffineLayout& l : readLayoutsAlong(axis))
    if (bf16(l.array) && l.strides.count(axis) && l.strides.at(axis) == 1) return true;
  return false;
}

void CudaWriter::storeOutputs(int point, const Env& env, const std::vector<NodeId>& outputs) {
  std::set<std::string> group;
  for (const Axis& a : plan_.groupAxes) group.insert(a.name);
  for (NodeId o : outputs) {
    Env e = env;
    std::vector<int> opened;
    int s = point;
    std::string once;
    // A spread axis is not bound at a row's point: an output without it is
    // the row's, stored by the row in the axis's first tile (every tile along
    // it makes the same row).
    for (const Axis& a : plan_.groupAxes)
      if (!g_.node(o).type.has(a.name))
        once += fmt::format("{}{} == 0", once.empty() ? "" : " && ", env.count(a.name) ? env.at(a.name).expr : "t_" + a.name);
    // Where the lanes run in step they all hold the value; in the lanes' loop over the spread positions each its own.
    if (!laneAxis_.empty() && !g_.node(o).type.has(laneAxis_) && !underLanes(point))
      once += fmt::format("{}lane == 0", once.empty() ? "" : " && ");
    if (!once.empty())  // stored by one point only (and one of its lanes: the others skip ahead)
      opened.push_back(s = once.find("lane == 0") != std::string::npos ? openLanes(s, fmt::format("if ({})", once))
                                                                        : open(s, fmt::format("if ({})", once)));
    for (const Axis& a : g_.node(o).type.axes)  // (the stream's, bound where each slice walks its positions)
      if (!group.count(a.name) && !(slices_ > 1 && a.name == plan_.streamAxis && e.count(a.name)))
        opened.push_back(s = loop(s, a, e));
    store(s, o, e);
    closeAll(opened);
  }
}

// The group axes the reduction over the lanes keeps are those of what it
// reduces: a stream's slots' factors (their aggregates may hold more, from
// the scale factors read after the stream), else the results of the
// reductions over the lane axis. The others are spread.
std::vector<Axis> CudaWriter::spreadAxes() const {
  if (laneAxis_.empty()) return {};
  std::set<std::string> kept;
  auto keep = [&](const Type& t) {
    for (const Axis& a : t.axes) kept.insert(a.name);
  };
  if (laneAxis_ == plan_.streamAxis) {
    const StreamAnalysis a = analyzeStream(g_, plan_.computed, plan_.streamAxis);
    for (const AccumulatorSlot& slot : a.slots)
      for (const StreamFactor& f : slot.core) {
        keep(g_.node(f.node).type);
        if (f.pivoted())  // the pivot: pivotOf at the axes pivotKeeps has, 0 along the others
          for (const Axis& x : g_.node(f.pivotOf).type.axes)
            if (g_.node(f.pivotKeeps).type.has(x.name)) kept.insert(x.name);
      }
  } else {
    for (NodeId id : plan_.computed) {
      const Node& n = g_.node(id);
      if ((n.op == Op::Reduce || n.op == Op::Contract) && std::find(n.axes.begin(), n.axes.end(), laneAxis_) != n.axes.end())
        keep(n.type);
    }
  }
  std::vector<Axis> spread;
  int64_t positions = 1;
  for (const Axis& a : plan_.groupAxes)
    if (!kept.count(a.name)) {
      spread.push_back(a);
      positions *= plan_.tiles.at(a.name);
    }
  return positions > 1 ? spread : std::vector<Axis>{};
}

void CudaWriter::storeSpread(int point, const Env& env) {
  std::vector<NodeId> perRow, perPosition;
  for (NodeId o : plan_.outputs) {
    const bool spread = std::any_of(spread_.begin(), spread_.end(), [&](const Axis& a) { return g_.node(o).type.has(a.name); });
    (spread ? perPosition : perRow).push_back(o);
  }
  storeOutputs(point, env, perRow);
  if (perPosition.empty()) return;
  int64_t positions = 1;
  for (const Axis& a : spread_) positions *= plan_.tiles.at(a.name);
  // 8 adjacent positions a lane along the last spread axis where whole groups
  // of 8 fill its tiles and the axis: bf16 arrays along it then load and
  // store 16 bytes at once. One position a lane moved 2 bytes an access, too
  // few in flight to cover the memory's latency (an attention's dS = P (dP -
  // delta) over rows of 1000: 10 us against the 4.6 its bytes take).
  const Axis& last = spread_.back();
  const int64_t lastTile = plan_.tiles.at(last.name);
  const bool eight = approximate_ && lastTile % 8 == 0 && last.size % 8 == 0 && bf16ArrayAlong(last.name);
  const int64_t step = eight ? 8 : 1;
  const std::string q = fresh("q");
  const int s = openLanes(point, fmt::format("for (int {0} = lane; {0} < {1}; {0} += {2})", q, positions / step, lanes_));
  Env e = env;
  std::string outside, eightBase;
  int64_t inner = 1;
  for (size_t i = spread_.size(); i-- > 0;) {  // the last spread axis fastest: adjacent lanes, adjacent elements
    const Axis& a = spread_[i];
    const bool stepped = &a == &last && eight;
    const int64_t t = plan_.tiles.at(a.name) / (stepped ? step : 1);
    std::string pos = inner == 1 ? q : fmt::format("{} / {}", q, inner);
    if (i > 0) pos = fmt::format("({}) % {}", pos, t);
    if (t == 1) pos = std::string("0");
    if (stepped) pos = fmt::format("({}) * 8", pos);
    const std::string var = (stepped ? "i8_" : "i_") + a.name;
    emit(s, fmt::format("const int {} = t_{} + {};", var, a.name, pos));
    if (stepped) eightBase = var;
    else e[a.name] = {var, s};
    if (a.size % plan_.tiles.at(a.name) != 0) outside += fmt::format("{}{} >= {}", outside.empty() ? "" : " || ", var, a.size);
    inner *= t;
  }
  if (!outside.empty()) emit(s, fmt::format("if ({}) continue;  // past the end of a remainder tile", outside));
  const int at = eight ? openEightPoints(s, s, last.name, eightBase, e) : s;
  storeOutputs(at, e, perPosition);
  if (at != s) close(at);
  close(s);
}

}  // namespace llmc::cuda_writer
