// Rows held in registers (planning/held_rows.h): a warp-per-point tile
// launch whose passes over the lanes' axis each read the point's rows loads
// them once, at the start of the point, into registers indexed by the lane's
// chunk; every pass's loop over the axis is unrolled over the chunks and
// reads them there.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

void CudaWriter::setUpHeldRows(int point, const Env& env) {
  if (laneAxis_.empty() || !plan_.streamAxis.empty() || !plan_.splitTiles.empty() || !stagedRows_.empty()) return;
  std::vector<Axis> bound;  // the group axes the point binds (not those its lanes spread over afterwards)
  for (const Axis& a : plan_.groupAxes)
    if (std::none_of(spread_.begin(), spread_.end(), [&](const Axis& s) { return s.name == a.name; })) bound.push_back(a);
  auto rowMajor = [&](NodeId array) { return stored_.at(array).strides.empty(); };
  auto bytesOf = [&](NodeId array) -> int64_t {
    const std::string& ctype = stored_.at(array).ctype;
    return ctype == "llmc_bf16" ? 2 : ctype == "float" ? 4 : 0;
  };
  const int64_t extent = innerSize(laneAxis_);
  const std::vector<NodeId> rows = pointRowArrays(g_, plan_.computed, storedIds(), bound, laneAxis_, rowMajor);
  heldRows_ = heldRows(g_, plan_.computed, plan_.outputs, rows, laneAxis_, lanes_,
                       lanesTake8(extent) && bf16ArrayAlong(laneAxis_), bytesOf);
  if (heldRows_.empty()) return;
  const HeldRows& held = heldRows_;
  emit(point, fmt::format("// {} row(s) of {} held in registers: {} chunk(s) a lane, loaded once for every pass",
                          held.rows.size(), laneAxis_, held.chunks));
  for (const HeldRow& row : held.rows) {
    const std::string name = fresh("held_" + names_[static_cast<size_t>(row.array)]);
    heldBuffers_[row.array] = name;
    const bool packed = held.vectorised && stored_.at(row.array).ctype == "llmc_bf16";
    emit(point, packed           ? fmt::format("uint4 {}[{}];", name, held.chunks)
                : held.vectorised ? fmt::format("float {}[{}][8];", name, held.chunks)
                                  : fmt::format("float {}[{}];", name, held.chunks));
  }
  // Every chunk of every row loaded ahead of the passes, all in flight together.
  Env at = env;
  const std::string k = fresh("k_" + laneAxis_);
  const int fill = openLanes(point, chunkLoopHeader(k));
  const std::string position = define(fill, "int", "i_" + laneAxis_, chunkPosition(k));
  at[laneAxis_] = {position, fill};
  for (const HeldRow& row : held.rows) {
    const Node& n = g_.node(row.array);
    Env e = at;
    e[n.type.axes.back().name] = at.at(laneAxis_);
    for (const Axis& a : n.type.axes)
      if (a.size == 1) e[a.name] = {"0", 0};
    const StoredArray& arr = stored_.at(row.array);
    reads_.insert(row.array);
    const std::string& buffer = heldBuffers_.at(row.array);
    const std::string address = fmt::format("{} + {}", arr.param, offset(row.array, e));
    if (held.vectorised)
      emit(fill, arr.ctype == "llmc_bf16" ? fmt::format("{}[{}] = llmc_load_raw16({});", buffer, k, address)
                                          : fmt::format("llmc_load_f32x8({}, {}[{}]);", address, buffer, k));
    else
      emit(fill, fmt::format("{}[{}] = {};", buffer, k,
                             arr.ctype == "llmc_bf16" ? fmt::format("llmc_bf16_to_f32({}[{}])", arr.param, offset(row.array, e))
                                                      : fmt::format("{}[{}]", arr.param, offset(row.array, e))));
  }
  close(fill);
}

std::string CudaWriter::chunkLoopHeader(const std::string& k) const {
  const HeldRows& held = heldRows_;
  const int64_t perChunk = held.vectorised ? 8 * lanes_ : lanes_;
  std::string header = fmt::format("_Pragma(\"unroll\") for (int {0} = 0; {0} < {1}; ++{0})", k, held.chunks);
  // The last chunk reaches past the axis' end for some lanes.
  if (held.extent % perChunk != 0) header += fmt::format(" if ({} < {})", chunkPosition(k), held.extent);
  return header;
}

std::string CudaWriter::chunkPosition(const std::string& k) const {
  return heldRows_.vectorised ? fmt::format("lane * 8 + {} * {}", k, 8 * lanes_) : fmt::format("lane + {} * {}", k, lanes_);
}

int CudaWriter::heldRowsLoop(int parent, const Axis& axis, Env& env) {
  const std::string k = fresh("k_" + axis.name);
  const int chunk = openLanes(parent, chunkLoopHeader(k));
  heldChunk_[chunk] = k;
  if (!heldRows_.vectorised) {
    const std::string var = define(chunk, "int", "i_" + axis.name, chunkPosition(k));
    heldPositions_[var] = k;
    env[axis.name] = {var, chunk};
    return chunk;
  }
  const std::string base = define(chunk, "int", "i_" + axis.name + "_8", chunkPosition(k));
  return openSpanElements(chunk, axis.name, base, env);
}

std::optional<std::string> CudaWriter::heldRowValue(const Node& n, const Env& own, int target) {
  auto buffer = heldBuffers_.find(n.id);
  if (buffer == heldBuffers_.end()) return std::nullopt;
  // At the point's own row only (a gather's or a shifted read elsewhere reads GMEM).
  const std::string& along = n.type.axes.back().name;  // the lane axis, or the array's name for it (pointRowArrays)
  for (const Axis& a : n.type.axes) {
    if (a.name == along || a.size == 1) continue;
    auto var = pointVars_.find(a.name);
    if (var == pointVars_.end() || own.at(a.name).expr != var->second) return std::nullopt;
  }
  const Binding& at = own.at(along);
  const std::string name = names_[static_cast<size_t>(n.id)];
  if (!heldRows_.vectorised) {
    // At the chunk's own position only (a shifted read, x[c + 1], reads GMEM).
    auto chunk = heldPositions_.find(at.expr);
    if (chunk == heldPositions_.end()) return std::nullopt;
    return define(target, "float", name, fmt::format("{}[{}]", buffer->second, chunk->second));
  }
  auto element = vectorElements_.find(at.expr);
  if (element == vectorElements_.end()) return std::nullopt;
  auto chunk = heldChunk_.find(element->second.scope);
  if (chunk == heldChunk_.end()) return std::nullopt;
  if (stored_.at(n.id).ctype != "llmc_bf16")
    return define(target, "float", name, fmt::format("{}[{}][e]", buffer->second, chunk->second));
  // The span's 8 values unpacked once, where the span begins.
  const std::string key = fmt::format("{}@held@{}", n.id, element->second.scope);
  auto [it, isNew] = vectorLoads_.emplace(key, "");
  if (isNew) {
    it->second = fresh(name + "_8");
    emit(element->second.scope, fmt::format("float {}[8];", it->second));
    emit(element->second.scope, fmt::format("llmc_unpack_bf16x8({}[{}], {});", buffer->second, chunk->second, it->second));
  }
  return define(target, "float", name, it->second + "[e]");
}

}  // namespace llmc::cuda_writer
