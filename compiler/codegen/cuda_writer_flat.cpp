// Flat points (planning/flat_points.h): a plain launch whose threads take 8
// consecutive elements of the flattened index of arrays of one layout, read
// and written 16 bytes at a time at any row length.
#include "codegen/cuda_writer.h"
#include "planning/flat_points.h"

namespace llmc::cuda_writer {

bool CudaWriter::flatPoints() const {
  if (!approximate_ || !laneAxis_.empty() || !plan_.streamAxis.empty() || !plan_.splitTiles.empty()) return false;
  // An output interleaved in a concatenation: the flattened index is not its
  // offset (launch_list.cpp leaves such parts to launches of other kinds).
  for (NodeId o : plan_.outputs)
    if (!contiguousAlong(o, g_.node(o).type.axes.size())) return false;
  const std::set<NodeId>& stored = storedIds();
  return takesFlatPoints(g_, plan_.computed, stored, plan_.outputs, plan_.groupAxes, [&](NodeId id) -> int64_t {
    auto it = stored_.find(id);
    return it == stored_.end() ? 0 : it->second.ctype == "llmc_bf16" ? 2 : it->second.ctype == "float" ? 4 : 0;
  });
}

// The 8 consecutive elements of the flattened [axes] from `first` (a
// multiple of 8, below `total`) inside scope `point`: each axis' position at
// the run's first element and at each of the 8 (those past the end at the
// last element) bound in env, the span registered so that an array laid out
// over exactly these axes is read and written 16 bytes at a time.
CudaWriter::FlatRun CudaWriter::flatRun(int point, const std::vector<Axis>& axes, const std::string& first,
                                        int64_t total, bool wide, Env& env) {
  const std::string index = wide ? "long long" : "int";
  const std::string remaining = define(point, "int", "inside", fmt::format("(int)min(({}){} - {}, ({})8)", index, total, first, index));
  auto positions = [&](int scope, const std::string& f, const std::string& prefix) {
    std::vector<std::string> vars(axes.size());
    int64_t inner = 1;
    for (size_t i = axes.size(); i-- > 0;) {
      const Axis& a = axes[i];
      std::string pos = inner == 1 ? f : fmt::format("{} / {}", f, inner);
      if (i > 0) pos = fmt::format("({}) % {}", pos, a.size);
      vars[i] = define(scope, "int", prefix + a.name, wide ? fmt::format("(int)({})", pos) : pos);
      inner *= a.size;
    }
    return vars;
  };
  const std::vector<std::string> startVars = positions(point, first, "s_");
  const int at = open(point, "_Pragma(\"unroll\") for (int e = 0; e < 8; ++e)");
  const std::string f = define(at, index, "f", fmt::format("{} + min(e, {} - 1)", first, remaining));
  const std::vector<std::string> elementVars = positions(at, f, "i_");
  VectorSpan span{"", point, at, {}, elementVars, startVars, remaining};
  for (size_t i = 0; i < axes.size(); ++i) {
    span.axes.push_back(axes[i].name);
    env[axes[i].name] = {elementVars[i], at};
    pointVars_[axes[i].name] = elementVars[i];
  }
  vectorElements_[elementVars.back()] = span;
  return {at, remaining};
}

void CudaWriter::flatTile(WrittenKernel& out) {
  int64_t total = 1;
  for (const Axis& a : plan_.groupAxes) total *= a.size;
  // The partition's blocks (out.grid, as the cost model counts them), each
  // an equal run of whole 8s; a block past the end, if any, has none.
  const int64_t runs = ceilDiv(total, 8);
  const int64_t perBlock = ceilDiv(runs, out.grid);
  out.block = static_cast<int>(std::min<int64_t>(256, ceilDiv(perBlock, 32) * 32));
  blockThreads_ = out.block;
  const bool wide = total > INT_MAX - 8;
  const std::string index = wide ? "long long" : "int";
  emit(0, fmt::format("const {} f_block = ({})blockIdx.x * {};", index, index, perBlock * 8));
  const int point = open(0, perBlock > blockThreads_
                                ? fmt::format("_Pragma(\"unroll {}\") for (int p = threadIdx.x; p < {}; p += {})",
                                              kPointsInFlight, perBlock, blockThreads_)
                                : fmt::format("for (int p = threadIdx.x; p < {}; p += blockDim.x)", perBlock));
  floor_ = point;
  const std::string first = define(point, index, "f8", std::string("f_block + p * 8"));
  emit(point, fmt::format("if ({} >= {}) break;  // past the end: the last block's run is shorter", first, total));
  Env env;
  const FlatRun run = flatRun(point, plan_.groupAxes, first, total, wide, env);
  storeOutputs(run.elements, env);
  close(run.elements);
  close(point);
  out.streamNote += fmt::format("{}8 consecutive elements a thread of the flattened [{}]: 16-byte accesses at any row length",
                                out.streamNote.empty() ? "" : "; ", [&] {
                                  std::vector<std::string> names;
                                  for (const Axis& a : plan_.groupAxes) names.push_back(a.name);
                                  return joinAxes(names);
                                }());
}

}  // namespace llmc::cuda_writer
