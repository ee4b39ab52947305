#include "lowering/gemm_staging.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>

namespace llmc {

namespace {

// The offset in the stored array of staged index `index` (a C++ expression)
// along `axes`: each axis' position, index / (the extents inside it) % its
// extent, times its stride.
std::string offsetOf(const std::string& index, const std::vector<StridedExtent>& axes) {
  std::string sum;
  int64_t inner = 1;
  for (size_t i = axes.size(); i-- > 0;) {
    const StridedExtent& a = axes[i];
    if (a.stride != 0 && a.extent > 1) {
      std::string position = inner == 1 ? index : fmt::format("{} / {}LL", index, inner);
      if (i > 0) position = fmt::format("({}) % {}LL", position, a.extent);
      sum += fmt::format("{}({}) * {}LL", sum.empty() ? "" : " + ", position, a.stride);
    }
    inner *= a.extent;
  }
  return sum.empty() ? "0LL" : sum;
}

std::string axesComment(const std::vector<StridedExtent>& axes) {
  std::string s;
  for (const StridedExtent& a : axes) s += fmt::format("{}{} (stride {})", s.empty() ? "" : " x ", a.extent, a.stride);
  return s;
}

}  // namespace

StagingCopy writeStagingCopy(const std::string& name, const GemmOperandPlacement& p, int batchOuter, int batchInner,
                             const Target& target, bool sourceF32) {
  const GemmStagedSource& from = *p.staged;
  StagingCopy copy;
  copy.name = name;
  copy.elements = p.stagedElements(int64_t{batchOuter} * batchInner);
  // A thread writes 8 padded elements, one 16-byte store, reading them one by
  // one (the source's rows need not be 16-byte aligned, nor its elements
  // adjacent): consecutive threads read consecutive elements where the source
  // has them so, and a warp's reads coalesce. The grid strides over the
  // chunks with a few blocks an SM in flight.
  const int64_t chunks = copy.elements / 8;
  copy.grid = std::clamp<int64_t>((chunks + copy.block - 1) / copy.block, 1, int64_t{target.smCount} * 8);
  copy.function = fmt::format(
      "\n// {0}: {1} blocks x {2} threads. Stages a tensor-core operand: {6} rows of {3} elements (rows: {16}; elements: {17}\n"
      "// in the stored array), into rows padded with zeros to {5}, x {7} x {8} batches{13}.\n"
      "extern \"C\" __global__ void __launch_bounds__({2}) {0}(llmc_bf16* __restrict__ dst, const {14}* __restrict__ src) {{\n"
      "  const long long chunks = {9}LL, per_row = {10}LL, rows = {6}LL;\n"
      "  for (long long i = (long long)blockIdx.x * {2} + threadIdx.x; i < chunks; i += (long long)gridDim.x * {2}) {{\n"
      "    const long long c = (i % per_row) * 8, r = (i / per_row) % rows, z = i / (per_row * rows);\n"
      "    const {14}* s = src + {11}LL + (z / {8}) * {12}LL + (z % {8}) * {4}LL + {18};\n"
      "    unsigned w[4];\n"
      "#pragma unroll\n"
      "    for (int e = 0; e < 8; e += 2) {{\n"
      "      const long long e0 = c + e, e1 = c + e + 1;\n"
      "      const unsigned lo = e0 < {3} ? {15}(s[{19}]) : 0u, hi = e1 < {3} ? {15}(s[{20}]) : 0u;\n"
      "      w[e / 2] = lo | (hi << 16);\n"
      "    }}\n"
      "    *reinterpret_cast<uint4*>(dst + i * 8) = make_uint4(w[0], w[1], w[2], w[3]);\n"
      "  }}\n"
      "}}\n",
      name, copy.grid, copy.block, p.contiguous, from.batchInnerStride, p.ld, p.rows, batchOuter, batchInner, chunks,
      p.ld / 8, from.offset, from.batchOuterStride, sourceF32 ? ", rounded from the f32 it is stored in" : "",
      sourceF32 ? "float" : "llmc_bf16", sourceF32 ? "(unsigned)llmc_f32_to_bf16" : "", axesComment(from.rows),
      axesComment(from.columns), offsetOf("r", from.rows), offsetOf("e0", from.columns), offsetOf("e1", from.columns));
  return copy;
}

namespace {

// The elements between where a thread of the copy starts reading and where
// the next one does (8 staged elements on), in the stored array.
int64_t sourceStepOfEight(const std::vector<StridedExtent>& columns) {
  int64_t step = 8;
  for (auto d = columns.rbegin(); d != columns.rend(); ++d) {
    if (step < d->extent || std::next(d) == columns.rend()) return step * d->stride;
    step = std::max<int64_t>(1, step / d->extent);
  }
  return 8;
}

}  // namespace

double stagingSeconds(const GemmOperandPlacement& p, int64_t batches, const Target& target) {
  const double elements = static_cast<double>(batches * p.rows * p.contiguous);
  const double read = 2.0 * elements;  // bf16 (f32 sources: rare)
  const double written = 2.0 * static_cast<double>(p.stagedElements(batches));
  const double bandwidth = (read + written) / target.level("GMEM").attainableBandwidth;
  // A warp's load takes a value for each of its 32 threads, 8 staged
  // elements apart: contiguous rows span 4 lines of 128 bytes, a gathered
  // one (elements far apart in the stored array) up to 32, and the SM's L1
  // takes about a line a clock. A mixture of experts' gradient, pairs 512
  // elements apart, ran 5.5 us where its bytes took 1.9.
  double lines = 4;
  if (p.staged && !p.staged->columns.empty()) {
    const double stepBytes = 2.0 * static_cast<double>(std::abs(sourceStepOfEight(p.staged->columns)));
    lines = std::clamp(std::ceil(32 * stepBytes / 128), 4.0, 32.0);
  }
  const double issue = target.clockHz > 0 ? elements / 32 * lines / (target.smCount * target.clockHz) : 0;
  return std::max(bandwidth, issue) + target.graphLaunchOverhead;
}

int StagingCopies::stage(CudaModule& module, std::string& source, const KernelLaunch& reader,
                         const GemmOperandPlacement& operand, int sourceBuffer, const std::string& role, int batchOuter,
                         int batchInner, const Target& target, const std::string& prelude) {
  const GemmStagedSource& from = *operand.staged;
  const Key key{sourceBuffer, from.offset, from.rows, from.columns, from.batchOuterStride, from.batchInnerStride,
                int64_t{batchOuter}, int64_t{batchInner}, operand.ld};
  if (auto known = buffers_.find(key); known != buffers_.end()) return known->second;
  const StagingCopy copy = writeStagingCopy(fmt::format("{}_stage_{}", reader.name, role), operand, batchOuter,
                                            batchInner, target, module.buffers[static_cast<size_t>(sourceBuffer)].dtype == "f32");
  const int64_t batches = int64_t{batchOuter} * batchInner;
  BufferDesc b;
  b.name = copy.name;
  b.dtype = "bf16";
  b.ctype = "llmc_bf16";
  b.axes = {Axis{"rows", operand.rows * batches}, Axis{"padded", operand.ld}};
  b.elements = copy.elements;
  b.bytes = copy.elements * 2;
  const int buffer = static_cast<int>(module.buffers.size());
  module.buffers.push_back(b);
  KernelLaunch stage;
  stage.name = copy.name;
  stage.kernel = reader.kernel;
  stage.role = "stage";
  stage.grid = {copy.grid, 1, 1};
  stage.block = copy.block;
  stage.params = {{buffer, true}, {sourceBuffer, false}};
  stage.instructions.scalarReason = "a staging copy";
  stage.predictedSeconds = stagingSeconds(operand, batches, target);
  stage.source = prelude + copy.function;
  source += copy.function;
  module.launches.push_back(std::move(stage));
  buffers_[key] = buffer;
  return buffer;
}

}  // namespace llmc
