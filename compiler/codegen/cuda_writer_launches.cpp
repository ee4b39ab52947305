// The launches that are not tiles of a kernel's loop nest: a GEMM's
// epilogue functor, a sum over the whole grid, scatter-adds and clears.
#include "codegen/cuda_writer.h"

namespace llmc::cuda_writer {

// The channel axis of a product slot when it is the innermost axis of
// output `o` and the only one outside the launch's group; else null.
const Axis* CudaWriter::channelsInnermost(NodeId o) const {
  const std::vector<Axis>& axes = g_.node(o).type.axes;
  if (axes.empty()) return nullptr;
  const Axis* channel = nullptr;
  for (const StreamProduct& p : tcs_->products)
    if (slots_[static_cast<size_t>(p.slot)].local.size() == 1 && slots_[static_cast<size_t>(p.slot)].local[0].name == axes.back().name)
      channel = &axes.back();
  if (!channel) return nullptr;
  for (size_t i = 0; i + 1 < axes.size(); ++i) {
    const bool grouped = axes[i].name == tcs_->rows.name ||
                         std::any_of(tcs_->batch.begin(), tcs_->batch.end(), [&](const Axis& b) { return b.name == axes[i].name; });
    if (!grouped) return nullptr;
  }
  return channel;
}

// Binds `axes` (outermost first) to the digits of the flat index `flat`.
void CudaWriter::bindDigits(const std::vector<Axis>& axes, const std::string& flat, int scope, Env& env) {
  int64_t inner = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    std::string pos = inner == 1 ? flat : fmt::format("({}) / {}", flat, inner);
    if (i > 0) pos = fmt::format("({}) % {}", pos, axes[i].size);
    env[axes[i].name] = {fmt::format("({})", pos), scope};
    inner *= axes[i].size;
  }
}

// operator()(batch, row, col, v, count) of a GEMM's epilogue functor: a
// loop over the 8 columns (unrolled, so v stays in registers); values that
// depend on the row alone are computed once, before it.
void CudaWriter::gemmEpilogue() {
  const GemmEpilogueAxes& ax = *epilogue_;
  Env env;
  if (ax.batch.size() == 2) env[ax.batch[0].name] = {"batch.outer", 0};
  if (!ax.batch.empty()) env[ax.batch.back().name] = {"batch.inner", 0};
  bindDigits(ax.rows, "row", 0, env);
  // Axes of extent 1 are no GEMM dimension (tensor_core_gemm.cpp leaves
  // them out): their position is always 0.
  for (const Axis& a : g_.node(ax.contraction).type.axes)
    if (a.size == 1 && !env.count(a.name)) env[a.name] = {"0", 0};
  firstColumn_ = env;
  bindDigits(ax.columns, "col", 0, firstColumn_);
  const Env& firstColumn = firstColumn_;
  int64_t columns = 1;
  for (const Axis& a : ax.columns) columns *= a.size;
  columnsVectorised_ = columns % 8 == 0;  // count is then always 8, and rows are 16-byte aligned
  const int column = open(0, "for (int e = 0; e < 8; ++e)");
  // Past count only where the columns end inside a group: an exit at each
  // column makes the unrolled loop 8 blocks, each column's work waiting for
  // the one before it (GELU's epilogue ran at one instruction every 5.5
  // cycles a warp: ncu on the H200, 2026-11-30).
  if (!columnsVectorised_) emit(column, "if (e >= count) break;");
  bindDigits(ax.columns, "(col + e)", column, env);
  contractionAt_ = env;
  std::vector<std::string> after;
  const bool atomic = !plan_.splitTiles.empty();  // split sums: added into zeroed f32 arrays
  for (NodeId o : plan_.outputs) {
    const StoredArray& arr = stored_.at(o);
    const std::vector<Axis>& axes = g_.node(o).type.axes;
    // Rows of a multiple of 8 columns: all 8 at once (aligned: col % 8 == 0), one 16-byte store of
    // bf16, or two 16-byte atomic adds of f32 split sums. Rows of bf16 of another length: the 8
    // in the widest stores their address allows (4-byte pairs), not one by one.
    bool along = axes.size() >= ax.columns.size();
    for (size_t i = 0; along && i < ax.columns.size(); ++i)
      along = axes[axes.size() - ax.columns.size() + i].name == ax.columns[i].name;
    along = along && contiguousAlong(o, ax.columns.size());
    const bool vector = along && (atomic ? arr.ctype == "float" : arr.ctype == "llmc_bf16") && columnsVectorised_;
    const bool pairs = along && !atomic && arr.ctype == "llmc_bf16" && !columnsVectorised_;
    if (!vector && !pairs) {
      store(column, o, env);
      continue;
    }
    std::string staged = fresh("out_" + names_[static_cast<size_t>(o)]);
    emit(0, fmt::format("float {}[8];", staged));
    emit(column, fmt::format("{}[e] = {};", staged, value(o, env)));
    after.push_back(atomic  ? fmt::format("llmc_add_f32x8({} + {}, {});", arr.param, offset(o, firstColumn), staged)
                    : pairs ? fmt::format("llmc::store_bf16x8_unaligned(reinterpret_cast<llmc::bf16*>({}) + {}, {}, count);",
                                          arr.param, offset(o, firstColumn), staged)
                            : fmt::format("llmc::store_bf16x8(reinterpret_cast<llmc::bf16*>({}) + {}, {}, count);",
                                          arr.param, offset(o, firstColumn), staged));
  }
  emit(0, "#pragma unroll");
  close(column);
  for (std::string& line : after) emit(0, std::move(line));
}

// Thread index over every element of `t`, with the axes bound in env.
// A grid-stride loop over the points of `t`, binding its axes; at most
// `maxBlocks` blocks.
int CudaWriter::flatPoints(const Type& t, Env& env, WrittenKernel& out, int64_t maxBlocks) {
  const int64_t n = t.elementCount();
  out.grid = std::clamp<int64_t>(ceilDiv(n, 256), 1, maxBlocks);
  out.block = 256;
  const char* itype = n > INT_MAX ? "long long" : "int";
  const int point = open(0, fmt::format("for ({0} p = ({0})blockIdx.x * blockDim.x + threadIdx.x; p < {1}; p += ({0})gridDim.x * blockDim.x)",
                                        itype, n));
  floor_ = point;
  int64_t inner = 1;
  for (size_t i = t.axes.size(); i-- > 0;) {
    const Axis& a = t.axes[i];
    std::string pos = inner == 1 ? "p" : fmt::format("p / {}", inner);
    if (i > 0) pos = fmt::format("({}) % {}", pos, a.size);
    std::string var = "i_" + a.name;
    emit(point, fmt::format("const int {} = (int)({});", var, pos));
    env[a.name] = {var, point};
    inner *= a.size;
  }
  return point;
}

// isGridSum: each thread sums its share of the array in a grid-stride
// loop, 8 consecutive elements of the flattened index at a time (an array
// laid out as the summed one is read 16 bytes at once, cuda_writer_flat.cpp:
// with one element a step GPT-2's loss-weighted products ran at 1.8 TB/s,
// H200, 2026-12-04), the lanes of a warp combine theirs with shuffles, the
// warps theirs in shared memory, and one atomic add per block lands in the
// zeroed output. A few blocks per SM keep the atomics few while every SM
// streams.
void CudaWriter::gridSum(WrittenKernel& out) {
  const Node& r = g_.node(wholeArraySumOf(g_, plan_.outputs, plan_.computed));
  const Node& x = g_.node(r.operands.at(0));
  emit(0, "float partial = 0.0f;");
  Env env;
  if (x.type.axes.empty()) {
    const int point = flatPoints(x.type, env, out, kWholeArraySumBlocks);
    emit(point, fmt::format("partial += {};", value(x.id, env)));
    close(point);
  } else {
    const int64_t n = x.type.elementCount();
    const int64_t runs = ceilDiv(n, 8);
    out.grid = wholeArraySumBlocks(x.type);
    out.block = 256;
    const bool wide = n > INT_MAX - 8;
    const std::string index = wide ? "long long" : "int";
    const int point = open(0, fmt::format("for ({0} r = ({0})blockIdx.x * blockDim.x + threadIdx.x; r < {1}; r += ({0})gridDim.x * blockDim.x)",
                                          index, runs));
    floor_ = point;
    const std::string first = define(point, index, "f8", std::string("r * 8"));
    const FlatRun run = flatRun(point, x.type.axes, first, n, wide, env);
    // The elements past the end (the last run's) repeat the last one: counted once.
    emit(run.elements, fmt::format("partial += e < {} ? {} : 0.0f;", run.inside, value(x.id, env)));
    for (NodeId o : plan_.outputs)  // laid out as x: stored at the run's elements
      if (o != r.id) store(run.elements, o, env);
    close(run.elements);
    close(point);
  }
  // The block's warps joined through shared memory before the one atomic
  // add: adds to one address serialise in L2 (with one a warp, GPT-2's loss
  // took 2.8 us against the 1 us the model gives a kernel of its size:
  // H200, 2026-11-30).
  const char* butterfly = "for (int offset = 16; offset > 0; offset /= 2) partial += __shfl_xor_sync(0xffffffffu, partial, offset);";
  emit(0, butterfly);
  emit(0, "__shared__ float warp_partials[32];");
  emit(0, "if ((threadIdx.x & 31) == 0) warp_partials[threadIdx.x / 32] = partial;");
  emit(0, "__syncthreads();");
  const int first = open(0, "if (threadIdx.x < 32)");
  emit(first, "partial = threadIdx.x < (blockDim.x + 31) / 32 ? warp_partials[threadIdx.x] : 0.0f;");
  emit(first, butterfly);
  emit(first, fmt::format("if (threadIdx.x == 0) atomicAdd(&{}[0], partial);", stored_.at(r.id).param));
  close(first);
  out.streamNote = fmt::format("a sum over the whole grid: {} blocks, 8 consecutive elements a thread at a time, warp "
                               "shuffles, one atomic add per block", out.grid);
}

void CudaWriter::scatter(WrittenKernel& out) {
  const Node& s = g_.node(plan_.outputs.at(0));
  const Node& values = g_.node(s.operands[0]);
  Env env;
  const int point = flatPoints(values.type, env, out);
  std::string v = value(values.id, env);
  std::string row = define(point, "int", "row", value(s.operands[1], env));
  Env at = env;
  at[s.newAxes[0]] = {row, point};
  const StoredArray& arr = stored_.at(s.id);
  emit(point, fmt::format("if ({0} >= 0 && {0} < {1}) atomicAdd(&{2}[{3}], {4});", row, s.type.find(s.newAxes[0])->size,
                          arr.param, offset(s.id, at), v));
  close(point);
}

// Zeroes a whole f32 array: 16-byte stores where it is 4 floats a multiple
// and 16-byte aligned (a caller may place it anywhere), else 4-byte ones
// (they cleared the token embedding's 154 MB gradient at 1.6 TB/s on the
// H200, 2026-11-30).
void CudaWriter::clear(WrittenKernel& out) {
  const Node& s = g_.node(plan_.outputs.at(0));
  const std::string& param = stored_.at(s.id).param;
  const int64_t n = s.type.elementCount();
  if (n % 4 != 0) {
    Env env;
    const int point = flatPoints(s.type, env, out);
    emit(point, fmt::format("{}[p] = 0.0f;", param));
    close(point);
    return;
  }
  out.grid = std::max<int64_t>(1, ceilDiv(n / 4, 256));
  out.block = 256;
  const char* itype = n > INT_MAX ? "long long" : "int";
  const std::string stride = fmt::format("({})gridDim.x * blockDim.x", itype);
  emit(0, fmt::format("const {0} first = ({0})blockIdx.x * blockDim.x + threadIdx.x;", itype));
  const int vector = open(0, fmt::format("if ((reinterpret_cast<unsigned long long>({}) & 15) == 0)", param));
  emit(vector, fmt::format("for ({} p = first; p < {}; p += {}) reinterpret_cast<float4*>({})[p] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);",
                           itype, n / 4, stride, param));
  close(vector);
  const int scalar = open(0, "else");
  emit(scalar, fmt::format("for ({} p = first; p < {}; p += {}) {}[p] = 0.0f;", itype, n, stride, param));
  close(scalar);
}

}  // namespace llmc::cuda_writer
