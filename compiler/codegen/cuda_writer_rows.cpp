// Rows held whole in shared memory (planning/staged_rows.h): a tile launch
// without a stream whose passes over a long lane axis would each read its
// rows from HBM again copies a point's rows into shared memory once, with all
// the block's threads, and reads them there in every pass.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

void CudaWriter::setUpStagedRows(WrittenKernel& out) {
  if (laneAxis_.empty() || !plan_.streamAxis.empty() || !plan_.splitTiles.empty()) return;
  std::set<std::string> split;
  for (const auto& [axis, perBlock] : plan_.splitTiles) split.insert(axis);
  auto bytesOf = [&](NodeId array) -> int64_t {
    const std::string& ctype = stored_.at(array).ctype;
    return ctype == "llmc_bf16" ? 2 : ctype == "float" ? 4 : 0;
  };
  auto rowMajor = [&](NodeId array) { return stored_.at(array).strides.empty(); };
  stagedRows_ = stagedRows(g_, plan_.computed, storedIds(), plan_.groupAxes, laneAxis_, bytesOf, rowMajor,
                           stagedRowsLimit(resident_.smemPerBlock));
  if (stagedRows_.empty()) return;
  // All the block's threads on one point: as many as take 8 positions each
  // of the row where they can (16-byte loads), a multiple of the warp.
  int lanes = 32;
  while (lanes < kStagedRowThreads && 16 * lanes <= stagedRows_.extent) lanes *= 2;
  lanes_ = lanes;
  out.dynamicSmemBytes = stagedRows_.bytes;
  for (const StagedRow& row : stagedRows_.rows) out.stagedRows.insert(row.array);
  emit(0, "extern __shared__ __align__(16) unsigned char smem_rows[];  // the point's rows, held for every pass");
}

std::optional<std::string> CudaWriter::stagedRowValue(const Node& n, const Env& own, int target) {
  auto row = std::find_if(stagedRows_.rows.begin(), stagedRows_.rows.end(),
                          [&](const StagedRow& r) { return r.array == n.id; });
  if (row == stagedRows_.rows.end()) return std::nullopt;
  const std::string& along = n.type.axes.back().name;  // the held axis, or the array's name for it (pointRowArrays)
  // At the point's own positions only (a gather's row elsewhere reads GMEM).
  for (const Axis& a : n.type.axes) {
    if (a.name == along || a.size == 1) continue;
    auto var = pointVars_.find(a.name);
    if (var == pointVars_.end() || own.at(a.name).expr != var->second) return std::nullopt;
  }
  const StoredArray& arr = stored_.at(n.id);
  reads_.insert(n.id);
  auto [buffer, first] = rowBuffers_.try_emplace(n.id, fresh("s_" + names_[static_cast<size_t>(n.id)]));
  if (first) {
    // Copied once a point, ahead of every pass (at the point's scope, before
    // the loop being written): a barrier first, so that the previous point's
    // passes are done with the rows.
    Env start = own;
    start[along] = {"0", floor_};
    for (const Axis& a : n.type.axes)  // an axis of one position may be bound deeper than the point (a loop of one)
      if (a.size == 1) start[a.name] = {"0", floor_};
    const std::string base = fresh("row");
    const int64_t extent = stagedRows_.extent;
    const int64_t perWord = 16 / row->elementBytes;  // elements a 16-byte word
    emit(floor_, fmt::format("const {}* {} = {} + {};", arr.ctype, base, arr.param, offset(n.id, start)));
    // With cp.async every thread issues all of its 16-byte copies before it waits: the row's loads are
    // in flight together, where loads through registers (four at a time) waited a memory latency for
    // every four.
    const std::string copy = resident_.asyncCopies ? "llmc_copy16_async({0} + q, {1} + q);"
                                                   : "*reinterpret_cast<uint4*>({0} + q) = *reinterpret_cast<const uint4*>({1} + q);";
    if (extent % perWord == 0) {
      emit(floor_, fmt::format("{0}* {1} = reinterpret_cast<{0}*>(smem_rows + {2});", arr.ctype, buffer->second,
                               row->offsetBytes));
      emit(floor_, "__syncthreads();");
      emit(floor_, fmt::format("_Pragma(\"unroll 4\") for (int q = threadIdx.x * {}; q < {}; q += blockDim.x * {}) {}",
                               perWord, extent, perWord, fmt::format(fmt::runtime(copy), buffer->second, base)));
    } else {
      // The row lies in shared memory as in GMEM modulo 16 bytes: its
      // whole words copied 16 bytes at once, the ends element by element.
      const std::string shift = fresh("shift"), head = fresh("head"), body = fresh("body");
      emit(floor_, fmt::format("const int {} = (int)(reinterpret_cast<unsigned long long>({}) % 16) / {};", shift, base,
                               row->elementBytes));
      emit(floor_, fmt::format("{0}* {1} = reinterpret_cast<{0}*>(smem_rows + {2}) + {3};", arr.ctype, buffer->second,
                               row->offsetBytes, shift));
      emit(floor_, fmt::format("const int {} = min({}, ({} - {}) % {});", head, extent, perWord, shift, perWord));
      emit(floor_, fmt::format("const int {} = {} + ({} - {}) / {} * {};", body, head, extent, head, perWord, perWord));
      emit(floor_, "__syncthreads();");
      emit(floor_, fmt::format("_Pragma(\"unroll 4\") for (int q = {} + threadIdx.x * {}; q < {}; q += blockDim.x * {}) {}",
                               head, perWord, body, perWord, fmt::format(fmt::runtime(copy), buffer->second, base)));
      emit(floor_, fmt::format("for (int q = threadIdx.x; q < {0}; q += blockDim.x) {1}[q] = {2}[q];", head,
                               buffer->second, base));
      emit(floor_, fmt::format("for (int q = {0} + threadIdx.x; q < {1}; q += blockDim.x) {2}[q] = {3}[q];", body,
                               extent, buffer->second, base));
    }
    if (resident_.asyncCopies) emit(floor_, "llmc_copy_async_wait();");
    emit(floor_, "__syncthreads();");
  }
  const std::string& s = buffer->second;
  const bool bf16 = arr.ctype == "llmc_bf16";
  if (const VectorSpan* span = vectorSpanOf(n, own)) {
    const std::string at = spanStart(n, *span, own).at(along).expr;
    const std::string key = fmt::format("{}@{}@{}", n.id, at, span->scope);
    auto [it, isNew] = vectorLoads_.emplace(key, "");
    if (isNew) {
      it->second = fresh(names_[static_cast<size_t>(n.id)] + "_8");
      emit(span->scope, fmt::format("float {}[8];", it->second));
      emit(span->scope, span->remaining.empty()
                            ? fmt::format("llmc_load_{}x8({} + {}, {});", bf16 ? "bf16" : "f32", s, at, it->second)
                            : fmt::format("llmc_load_{}x8_upto({} + {}, {}, {});", bf16 ? "bf16" : "f32", s, at,
                                          span->remaining, it->second));
    }
    return define(target, "float", names_[static_cast<size_t>(n.id)], it->second + "[e]");
  }
  const std::string element = fmt::format("{}[{}]", s, own.at(along).expr);
  return define(target, "float", names_[static_cast<size_t>(n.id)],
                bf16 ? fmt::format("llmc_bf16_to_f32({})", element) : element);
}

void CudaWriter::combineWarps(const std::string& acc, const char* ctype, const std::string& combine, int target) {
  const int warps = lanes_ / 32;
  const std::string partials = fresh(acc + "_warps");
  emit(target, fmt::format("__shared__ {} {}[{}];", ctype, partials, warps));
  emit(target, fmt::format("if (threadIdx.x % 32 == 0) {}[threadIdx.x / 32] = {};", partials, acc));
  emit(target, "__syncthreads();");
  emit(target, fmt::format("{} = {}[0];", acc, partials));
  emit(target, fmt::format("for (int w = 1; w < {}; ++w) {};", warps,
                           fmt::format(fmt::runtime(combine), acc, fmt::format("{}[w]", partials))));
  emit(target, "__syncthreads();  // the partials read before the next point's");
}

}  // namespace llmc::cuda_writer
