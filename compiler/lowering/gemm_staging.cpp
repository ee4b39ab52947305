#include "lowering/gemm_staging.h"

#include <fmt/format.h>

#include <algorithm>

namespace llmc {

StagingCopy writeStagingCopy(const std::string& name, const GemmOperandPlacement& p, int batchOuter, int batchInner,
                             const Target& target, bool sourceF32) {
  const GemmStagedSource& from = *p.staged;
  StagingCopy copy;
  copy.name = name;
  copy.elements = p.stagedElements(int64_t{batchOuter} * batchInner);
  // A thread writes 8 padded elements, one 16-byte store, reading them one by
  // one (the source's rows are not 16-byte aligned): consecutive threads read
  // consecutive elements, so a warp's reads still coalesce. The grid strides
  // over the chunks with a few blocks an SM in flight.
  const int64_t chunks = copy.elements / 8;
  copy.grid = std::clamp<int64_t>((chunks + copy.block - 1) / copy.block, 1, int64_t{target.smCount} * 8);
  copy.function = fmt::format(
      "\n// {0}: {1} blocks x {2} threads. Stages a GEMM operand: rows of {3} elements, {4} apart in the stored array,\n"
      "// into rows padded with zeros to {5} (16-byte aligned), {6} rows x {7} x {8} batches{14}.\n"
      "extern \"C\" __global__ void __launch_bounds__({2}) {0}(llmc_bf16* __restrict__ dst, const {15}* __restrict__ src) {{\n"
      "  const long long chunks = {9}LL, per_row = {10}LL, rows = {6}LL;\n"
      "  for (long long i = (long long)blockIdx.x * {2} + threadIdx.x; i < chunks; i += (long long)gridDim.x * {2}) {{\n"
      "    const long long c = (i % per_row) * 8, r = (i / per_row) % rows, z = i / (per_row * rows);\n"
      "    const {15}* s = src + {11}LL + (z / {8}) * {12}LL + (z % {8}) * {13}LL + r * {4}LL + c;\n"
      "    unsigned w[4];\n"
      "#pragma unroll\n"
      "    for (int e = 0; e < 8; e += 2) {{\n"
      "      const unsigned lo = c + e < {3} ? {16}(s[e]) : 0u, hi = c + e + 1 < {3} ? {16}(s[e + 1]) : 0u;\n"
      "      w[e / 2] = lo | (hi << 16);\n"
      "    }}\n"
      "    *reinterpret_cast<uint4*>(dst + i * 8) = make_uint4(w[0], w[1], w[2], w[3]);\n"
      "  }}\n"
      "}}\n",
      name, copy.grid, copy.block, p.contiguous, from.ld, p.ld, p.rows, batchOuter, batchInner, chunks, p.ld / 8,
      from.offset, from.batchOuterStride, from.batchInnerStride,
      sourceF32 ? ", rounded from the f32 it is stored in" : "", sourceF32 ? "float" : "llmc_bf16",
      sourceF32 ? "(unsigned)llmc_f32_to_bf16" : "");
  return copy;
}

double stagingSeconds(const GemmOperandPlacement& p, int64_t batches, const Target& target) {
  const double read = 2.0 * static_cast<double>(batches * p.rows * p.contiguous);  // bf16 (f32 sources: rare)
  const double written = 2.0 * static_cast<double>(p.stagedElements(batches));
  return (read + written) / target.level("GMEM").attainableBandwidth + target.graphLaunchOverhead;
}

int StagingCopies::stage(CudaModule& module, std::string& source, const KernelLaunch& gemmLaunch,
                         const GemmOperandPlacement& operand, int sourceBuffer, const char* role,
                         const TensorCoreGemm& gemm, const Target& target, const std::string& prelude) {
  const GemmStagedSource& from = *operand.staged;
  const Key key{operand.array, from.offset,  from.ld, from.batchOuterStride, from.batchInnerStride,
                operand.contiguous, operand.rows, int64_t{gemm.batchOuter}, int64_t{gemm.batchInner}};
  if (auto known = buffers_.find(key); known != buffers_.end()) return known->second;
  const StagingCopy copy = writeStagingCopy(fmt::format("{}_stage_{}", gemmLaunch.name, role), operand, gemm.batchOuter,
                                            gemm.batchInner, target, module.buffers[static_cast<size_t>(sourceBuffer)].dtype == "f32");
  BufferDesc b;
  b.name = copy.name;
  b.dtype = "bf16";
  b.ctype = "llmc_bf16";
  b.axes = {Axis{"rows", operand.rows * gemm.batches()}, Axis{"padded", operand.ld}};
  b.elements = copy.elements;
  b.bytes = copy.elements * 2;
  const int buffer = static_cast<int>(module.buffers.size());
  module.buffers.push_back(b);
  KernelLaunch stage;
  stage.name = copy.name;
  stage.kernel = gemmLaunch.kernel;
  stage.role = "stage";
  stage.grid = {copy.grid, 1, 1};
  stage.block = copy.block;
  stage.params = {{buffer, true}, {sourceBuffer, false}};
  stage.instructions.scalarReason = "a staging copy";
  stage.predictedSeconds = stagingSeconds(operand, gemm.batches(), target);
  stage.source = prelude + copy.function;
  source += copy.function;
  module.launches.push_back(std::move(stage));
  buffers_[key] = buffer;
  return buffer;
}

}  // namespace llmc
