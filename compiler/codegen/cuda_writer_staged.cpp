// A plain tile's transposed reads staged through shared memory
// (planning/transposed_reads.h): the array's tile copied by threads walking
// its contiguous axis, then read by the points where they lie.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

void CudaWriter::stageTransposedReads(const std::vector<std::string>& origins) {
  const std::set<NodeId>& stored = storedIds();
  auto elementBytes = [&](NodeId array) -> int64_t {
    const std::string& ctype = stored_.at(array).ctype;
    return ctype == "llmc_bf16" ? 2 : ctype == "float" ? 4 : 0;
  };
  std::vector<TransposedRead> reads =
      transposedReads(g_, plan_.computed, stored, plan_.outputs, plan_.groupAxes, plan_.tiles, elementBytes);
  if (reads.empty()) return;
  if (transposedTileBytes(reads) > kTransposedTileBytesMax)
    throw std::logic_error(fmt::format("emit cuda: {}'s transposed tiles take {} bytes of shared memory", plan_.name,
                                       transposedTileBytes(reads)));
  auto origin = [&](const std::string& axis) {
    for (size_t i = 0; i < plan_.groupAxes.size(); ++i)
      if (plan_.groupAxes[i].name == axis) return origins[i];
    throw std::logic_error("emit cuda: a staged read's axis is not a group axis");
  };
  for (TransposedRead& read : reads) {
    const StoredArray& arr = stored_.at(read.layout.array);
    reads_.insert(read.layout.array);
    const std::string buffer = fresh("s_" + names_[static_cast<size_t>(read.value)]);
    emit(0, fmt::format("__shared__ {} {}[{}];  // {} transposed: its tile, rows along {}", arr.ctype, buffer,
                        read.tileElements, names_[static_cast<size_t>(read.value)], read.axes.back().name));
    // Adjacent threads along the contiguous axis, then the others, the threads' axis next.
    std::vector<Axis> digits;
    for (const Axis& a : read.axes)
      if (a.name == read.contiguous) digits.push_back(a);
    for (size_t i = read.axes.size(); i-- > 0;)
      if (read.axes[i].name != read.contiguous) digits.push_back(read.axes[i]);
    int64_t points = 1;
    for (const Axis& a : digits) points *= plan_.tiles.at(a.name);
    // Unrolled over the block's known threads, so that a thread has several loads in flight (one at a time
    // covers little of the memory's latency: Little's law, as the cost model's latency term counts).
    const int fill = open(0, fmt::format("_Pragma(\"unroll 8\") for (int q = threadIdx.x; q < {}; q += {})", points,
                                         blockThreads_));
    std::map<std::string, std::string> position;  // axis -> its position in the tile
    std::string inBounds;
    int64_t inner = 1;
    for (size_t d = 0; d < digits.size(); ++d) {
      const Axis& a = digits[d];
      const int64_t tile = plan_.tiles.at(a.name);
      // A digit the loop's step is a multiple of is the thread's own,
      // fixed over its iterations: written from threadIdx.x, the compiler
      // keeps it (and what it indexes) out of the loop.
      const std::string q = d + 1 < digits.size() && blockThreads_ % (inner * tile) == 0 ? "threadIdx.x" : "q";
      std::string digit = inner == 1 ? q : fmt::format("{} / {}", q, inner);
      if (d + 1 < digits.size()) digit = fmt::format("({}) % {}", digit, tile);
      position[a.name] = define(fill, "int", "j_" + a.name, digit);
      if (a.size % tile != 0)
        inBounds += fmt::format("{}{} + {} < {}", inBounds.empty() ? "" : " && ", origin(a.name), position[a.name], a.size);
      inner *= tile;
    }
    const bool wide = g_.node(read.layout.array).type.elementCount() > INT_MAX;
    std::string offset = wide ? fmt::format("{}LL", read.layout.offset) : fmt::format("{}", read.layout.offset);
    for (const Axis& a : read.axes)
      if (const int64_t stride = read.layout.strides.at(a.name); stride != 0)
        offset += fmt::format(" + ({} + {}) * {}{}", origin(a.name), position[a.name], stride, wide ? "LL" : "");
    // Rows along the threads' axis, each `pitch` long.
    std::string at = position[read.axes.back().name];
    int64_t stride = read.pitch;
    for (size_t i = read.axes.size() - 1; i-- > 0;) {
      at += fmt::format(" + {} * {}", position[read.axes[i].name], stride);
      stride *= plan_.tiles.at(read.axes[i].name);
    }
    emit(fill, fmt::format("{}{}[{}] = {}[{}];", inBounds.empty() ? "" : fmt::format("if ({}) ", inBounds), buffer, at,
                           arr.param, offset));
    close(fill);
    staged_[read.value] = {std::move(read), buffer};
  }
  emit(0, "__syncthreads();");
}

std::optional<std::string> CudaWriter::stagedValue(NodeId id, const Env& own, int target) {
  auto it = staged_.find(id);
  if (it == staged_.end()) return std::nullopt;
  const TransposedRead& read = it->second.read;
  // Only at the point's own positions (a read elsewhere goes to GMEM).
  for (const Axis& a : read.axes) {
    auto var = pointVars_.find(a.name);
    if (var == pointVars_.end() || own.at(a.name).expr != var->second) return std::nullopt;
  }
  std::string at = fmt::format("({} - t_{})", own.at(read.axes.back().name).expr, read.axes.back().name);
  int64_t stride = read.pitch;
  for (size_t i = read.axes.size() - 1; i-- > 0;) {
    at += fmt::format(" + ({} - t_{}) * {}", own.at(read.axes[i].name).expr, read.axes[i].name, stride);
    stride *= plan_.tiles.at(read.axes[i].name);
  }
  const std::string element = fmt::format("{}[{}]", it->second.buffer, at);
  const bool bf16 = stored_.at(read.layout.array).ctype == "llmc_bf16";
  return define(target, "float", names_[static_cast<size_t>(id)], bf16 ? fmt::format("llmc_bf16_to_f32({})", element) : element);
}

}  // namespace llmc::cuda_writer
