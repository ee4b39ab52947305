#include "codegen/emit_cuda.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>
#include <tuple>

#include "codegen/cuda_kernel_writer.h"
#include "lowering/gemm_staging.h"
#include "ir/print.h"
#include "lowering/tensor_core_gemm.h"
#include "analysis/streamability.h"
#include "lowering/tensor_core_stream.h"

namespace llmc {

namespace {

// Needs no include path; modules with tile-library launches include llmc's
// device headers before it.
const char* kPrelude = R"(// Values are computed in fp32; bf16 arrays are stored as their upper 16 bits.
#define LLMC_INF __int_as_float(0x7f800000)
#define LLMC_NAN __int_as_float(0x7fffffff)
#define LLMC_INT_MIN (-2147483647 - 1)
typedef unsigned short llmc_bf16;

__device__ __forceinline__ float llmc_bf16_to_f32(llmc_bf16 v) { return __uint_as_float(((unsigned)v) << 16); }

// Round to nearest, ties to even; NaN stays NaN.
__device__ __forceinline__ llmc_bf16 llmc_f32_to_bf16(float f) {
  unsigned u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (llmc_bf16)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (llmc_bf16)(u >> 16);
}

// 16 bytes at a 16-byte aligned address, unconverted; and 8 bf16 values so loaded, as floats.
__device__ __forceinline__ uint4 llmc_load_raw16(const llmc_bf16* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ void llmc_unpack_bf16x8(const uint4& u, float (&v)[8]) {
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  for (int i = 0; i < 4; ++i) v[2 * i] = __uint_as_float(w[i] << 16), v[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
}

// 8 consecutive bf16 values at a 16-byte aligned address, as floats: one 16-byte load.
__device__ __forceinline__ void llmc_load_bf16x8(const llmc_bf16* p, float (&v)[8]) { llmc_unpack_bf16x8(llmc_load_raw16(p), v); }

// 8 floats to consecutive bf16 values at a 16-byte aligned address (rounded as llmc_f32_to_bf16): one 16-byte store.
__device__ __forceinline__ void llmc_store_bf16x8(llmc_bf16* p, const float (&v)[8]) {
  unsigned w[4];
  for (int i = 0; i < 4; ++i) w[i] = (unsigned)llmc_f32_to_bf16(v[2 * i]) | ((unsigned)llmc_f32_to_bf16(v[2 * i + 1]) << 16);
  *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

// 8 floats added atomically to consecutive fp32 values at a 16-byte aligned address: two vector
// reductions (red.global.add.v4.f32) from sm_90 on, eight scalar ones before.
__device__ __forceinline__ void llmc_add_f32x8(float* p, const float (&v)[8]) {
#if __CUDA_ARCH__ >= 900
  for (int i = 0; i < 8; i += 4)
    asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p + i), "f"(v[i]), "f"(v[i + 1]), "f"(v[i + 2]),
                 "f"(v[i + 3])
                 : "memory");
#else
  for (int i = 0; i < 8; ++i) atomicAdd(p + i, v[i]);
#endif
}

// The hardware's tanh (cuda_kernel_writer.cpp, approximate_: bf16 storage): one MUFU instruction, relative
// error under 2^-10.9 (PTX ISA, tanh.approx.f32), below bf16's 2^-8. It replaced 1 - 2 / (exp(2x) + 1), six
// instructions on the critical path of a GELU epilogue.
__device__ __forceinline__ float llmc_fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// exp(s - m) against a running max m: 0 for s = -inf, also while m is still -inf.
__device__ __forceinline__ float llmc_exp_shifted(float s, float m) { return s == -LLMC_INF ? 0.0f : expf(s - m); }

// exp(m_old - m_new), the online-softmax rescaling: 1 while the max has not moved.
__device__ __forceinline__ float llmc_rescale(float m_old, float m_new) { return m_old == m_new ? 1.0f : expf(m_old - m_new); }

// exp by the hardware's 2^x with results under 2^-126 flushed to zero (cuda_kernel_writer.cpp, approximate_:
// bf16 storage, whose smallest normal is the same): x log2(e), then one MUFU instruction (ex2.approx.ftz.f32,
// relative error 2^-22 plus the rounding of x log2(e)). __expf's ex2.approx.f32 keeps denormal results, for a
// compare and two more multiplies an exp (ptxas, sm_90a): per score element of attention's streams.
__device__ __forceinline__ float llmc_ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
#define LLMC_LOG2E 1.4426950408889634f
__device__ __forceinline__ float llmc_fast_exp(float x) { return llmc_ex2(x * LLMC_LOG2E); }

// exp(a - b) as one fused multiply-add and ex2: b log2(e) is the same for all the a it is taken from (a row's
// statistic, computed once).
__device__ __forceinline__ float llmc_fast_exp_difference(float a, float b) { return llmc_ex2(fmaf(a, LLMC_LOG2E, -b * LLMC_LOG2E)); }

// exp(s - m) against a running max m >= s, for streams: 0 for s = -inf (2^-inf); while m is still -inf (and
// so is s), the offset is 0 instead of +inf. The test is on m, once a row, not on each element.
__device__ __forceinline__ float llmc_fast_exp_shifted(float s, float m) {
  return llmc_ex2(fmaf(s, LLMC_LOG2E, m == -LLMC_INF ? 0.0f : -m * LLMC_LOG2E));
}
__device__ __forceinline__ float llmc_fast_rescale(float m_old, float m_new) {
  return m_old == m_new ? 1.0f : llmc_ex2(fmaf(m_old, LLMC_LOG2E, -m_new * LLMC_LOG2E));
}
)";

struct Storage {
  std::string dtype, ctype;
  int bytes;
};

// Whether a CUDA-core tile launch can write `output` over `input` (KernelLaunch::inPlace):
// both stored alike with the same axes, and every value the launch makes from the input by
// elementwise operations alone (no view, reduction or gather that reads it elsewhere), the
// output among them, without a stream or split. Other outputs may be made from the input too
// where every output made from it is stored at the tile's points themselves: the writer reads
// the input once per point, before any of them is stored (an output with an axis of its own is
// stored by a loop of its own, which would read the input again over what was written). (The
// kernel's pointers stay __restrict__: per element the one read feeds the writes, in the same
// thread.)
bool elementwiseInPlace(const Graph& g, const LaunchPlan& plan, NodeId output, NodeId input,
                        const std::map<NodeId, StoredArray>& arrays) {
  if (plan.kind != LaunchPlan::Kind::Tile || !plan.streamAxis.empty() || !plan.splitTiles.empty()) return false;
  const Type& to = g.node(output).type;
  const Type& ti = g.node(input).type;
  if (to.axes.size() != ti.axes.size() || arrays.at(output).ctype != arrays.at(input).ctype) return false;
  for (size_t k = 0; k < to.axes.size(); ++k)
    if (to.axes[k].name != ti.axes[k].name || to.axes[k].size != ti.axes[k].size) return false;
  // The launch's values that depend on the input: each an elementwise op over the output's axes.
  std::set<NodeId> dependent = {input};
  for (bool grew = true; grew;) {
    grew = false;
    for (NodeId id : plan.computed) {
      const Node& n = g.node(id);
      if (dependent.count(id) ||
          std::none_of(n.operands.begin(), n.operands.end(), [&](NodeId x) { return dependent.count(x) > 0; }))
        continue;
      const bool elementwise = n.op == Op::Unary || n.op == Op::Binary || n.op == Op::Select || n.op == Op::Compare ||
                               n.op == Op::Cast;
      if (!elementwise || n.type.axes.size() != to.axes.size()) return false;
      dependent.insert(id);
      grew = true;
    }
  }
  auto atTilePoints = [&](NodeId o) {
    const std::vector<Axis>& axes = g.node(o).type.axes;
    return axes.size() == plan.groupAxes.size() &&
           std::all_of(axes.begin(), axes.end(), [&](const Axis& a) {
             return std::any_of(plan.groupAxes.begin(), plan.groupAxes.end(), [&](const Axis& x) { return x.name == a.name; });
           });
  };
  for (NodeId other : plan.outputs)
    if (other != output && dependent.count(other) && !(atTilePoints(other) && atTilePoints(output))) return false;
  return dependent.count(output) > 0;
}

// One function as a translation unit: the tile library's header where the
// function instantiates it, the prelude, the function.
std::string translationUnit(const char* tileLibrary, const std::string& function) {
  return fmt::format("{}{}{}", tileLibrary ? fmt::format("#include <{}>\n\n", tileLibrary) : "", kPrelude, function);
}

Storage storageOf(DType d, StorageType storage, bool accumulatedByAtomics) {
  switch (d) {
    case DType::Bool: return {"bool", "unsigned char", 1};
    case DType::I32: return {"i32", "int", 4};
    case DType::U16: return {"u16", "unsigned short", 2};
    case DType::F64: return {"f64", "double", 8};
    case DType::F16:
    case DType::BF16:
    case DType::F32: break;
  }
  // Atomic adds (a scatter-add) accumulate in f32 whatever the storage.
  if (storage == StorageType::BF16 && !accumulatedByAtomics) return {"bf16", "llmc_bf16", 2};
  return {"f32", "float", 4};
}

// A statistic: a sum or maximum over an axis (not a contraction), or
// elementwise arithmetic on statistics and constants — a layernorm's mean and
// variance, a softmax's running maximum and sum, a loss per row. Stored in
// bf16 they would lose what the backward needs: exp(s - m) with m rounded to
// bf16 is off by up to 2^-8 * |m| in the exponent, and the mean's rounding
// shifts every normalised value of its row. They are few values (one per
// row), so they are kept in f32 whatever the storage, as PyTorch's autocast
// and llm.c keep them.
bool isStatistic(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  switch (n.op) {
    case Op::Reduce: return true;
    case Op::Unary:
    case Op::Binary: {
      bool statistic = false;
      for (NodeId o : n.operands) {
        if (g.node(o).op == Op::Constant) continue;
        if (!isStatistic(g, o)) return false;
        statistic = true;
      }
      return statistic;
    }
    default: return false;
  }
}

std::set<NodeId> ancestorsWithin(const Graph& g, NodeId id, const std::set<NodeId>& within) {
  std::set<NodeId> out;
  std::vector<NodeId> work = g.node(id).operands;
  while (!work.empty()) {
    NodeId n = work.back();
    work.pop_back();
    if (!within.count(n) || !out.insert(n).second) continue;
    for (NodeId o : g.node(n).operands) work.push_back(o);
  }
  return out;
}

struct Planned {
  LaunchPlan plan;
  int kernel = -1;
  std::string role;
  WrittenKernel written;
};


// The stored values a launch reads: operands of what it computes, looked
// through the views and constants it computes inline.
std::set<NodeId> readsOf(const Graph& g, const LaunchPlan& plan, const std::set<NodeId>& stored) {
  std::set<NodeId> reads;
  if (plan.kind == LaunchPlan::Kind::Clear) return reads;
  std::set<NodeId> seen;
  std::vector<NodeId> work;
  for (NodeId n : plan.computed) work.insert(work.end(), g.node(n).operands.begin(), g.node(n).operands.end());
  for (NodeId n : plan.outputs) work.insert(work.end(), g.node(n).operands.begin(), g.node(n).operands.end());
  while (!work.empty()) {
    NodeId n = work.back();
    work.pop_back();
    if (plan.computed.count(n) || !seen.insert(n).second) continue;
    if (stored.count(n)) reads.insert(n);
    else work.insert(work.end(), g.node(n).operands.begin(), g.node(n).operands.end());
  }
  return reads;
}

// The nodes of plan p that depend on p's own values through other launches:
// they cannot run in the same launch as the rest of p.
std::set<NodeId> reachedThroughOthers(const Graph& g, const LaunchPlan& p, const std::vector<std::vector<NodeId>>& consumers,
                                      const std::set<NodeId>& elsewhere) {
  std::set<NodeId> late;
  std::set<std::pair<NodeId, bool>> seen;
  std::vector<std::pair<NodeId, bool>> work;  // (node, whether the path has left p)
  for (NodeId n : p.computed) work.push_back({n, false});
  while (!work.empty()) {
    auto [n, left] = work.back();
    work.pop_back();
    for (NodeId c : consumers[static_cast<size_t>(n)]) {
      bool inP = p.computed.count(c) > 0;
      if (inP && !left) continue;  // p's own dataflow
      if (inP) late.insert(c);
      bool nowLeft = left || (!inP && elsewhere.count(c));
      if (seen.insert({c, nowLeft}).second) work.push_back({c, nowLeft});
    }
  }
  (void)g;
  return late;
}

// Launch order: a launch after those that write what it reads, and after
// earlier writers of what it writes (a clear before its scatter). Where the
// fusion made kernels that need each other's results, the part of a kernel
// that depends on another launch moves to a launch of its own, after it.
std::vector<size_t> orderLaunches(const Graph& g, std::vector<Planned>& plans, std::set<NodeId>& stored) {
  std::vector<std::vector<NodeId>> consumers(g.nodes.size());
  for (const Node& n : g.nodes)
    for (NodeId o : n.operands) consumers[static_cast<size_t>(o)].push_back(n.id);
  for (;;) {
    std::map<NodeId, std::vector<size_t>> writers;
    for (size_t i = 0; i < plans.size(); ++i)
      for (NodeId o : plans[i].plan.outputs) writers[o].push_back(i);
    std::vector<std::set<size_t>> after(plans.size());
    for (size_t i = 0; i < plans.size(); ++i) {
      for (NodeId r : readsOf(g, plans[i].plan, stored))
        for (size_t w : writers[r]) after[i].insert(w);
      for (NodeId o : plans[i].plan.outputs)
        for (size_t w : writers[o])
          if (w < i) after[i].insert(w);
    }
    std::vector<size_t> order;
    std::vector<bool> done(plans.size(), false);
    while (order.size() < plans.size()) {
      size_t next = plans.size();
      for (size_t i = 0; i < plans.size() && next == plans.size(); ++i)
        if (!done[i] && std::all_of(after[i].begin(), after[i].end(), [&](size_t d) { return done[d]; })) next = i;
      if (next == plans.size()) break;
      done[next] = true;
      order.push_back(next);
    }
    if (order.size() == plans.size()) return order;

    // Split the first tile launch left that has a part depending on itself.
    bool split = false;
    for (size_t i = 0; i < plans.size() && !split; ++i) {
      if (done[i] || plans[i].plan.kind != LaunchPlan::Kind::Tile) continue;
      std::set<NodeId> elsewhere;
      for (size_t j = 0; j < plans.size(); ++j)
        if (j != i) elsewhere.insert(plans[j].plan.computed.begin(), plans[j].plan.computed.end());
      std::set<NodeId> late = reachedThroughOthers(g, plans[i].plan, consumers, elsewhere);
      if (late.empty() || late.size() == plans[i].plan.computed.size()) continue;
      Planned early = plans[i], rest = plans[i];
      early.plan.computed.clear();
      early.plan.outputs.clear();
      rest.plan.computed = late;
      rest.plan.outputs.clear();
      rest.plan.name += "_late";
      for (NodeId n : plans[i].plan.computed)
        if (!late.count(n)) early.plan.computed.insert(n);
      // What the late part reads of the early part is stored.
      for (NodeId r : readsOf(g, rest.plan, early.plan.computed)) stored.insert(r), early.plan.outputs.push_back(r);
      for (NodeId o : plans[i].plan.outputs) {
        if (late.count(o)) rest.plan.outputs.push_back(o);
        else if (std::find(early.plan.outputs.begin(), early.plan.outputs.end(), o) == early.plan.outputs.end())
          early.plan.outputs.push_back(o);
      }
      for (Planned* part : {&early, &rest}) {
        std::vector<Axis> group;
        for (const Axis& a : part->plan.groupAxes)
          if (std::any_of(part->plan.outputs.begin(), part->plan.outputs.end(),
                          [&](NodeId o) { return g.node(o).type.has(a.name); }))
            group.push_back(a);
        part->plan.groupAxes = group;
      }
      plans[i] = early;
      plans.insert(plans.begin() + static_cast<std::ptrdiff_t>(i) + 1, rest);
      split = true;
    }
    if (!split) {
      std::string cycle;
      for (size_t i = 0; i < plans.size(); ++i)
        if (!done[i]) cycle += " " + plans[i].plan.name;
      throw std::logic_error("emit cuda: these launches depend on each other in a cycle:" + cycle);
    }
  }
}

// The tensor map of one operand of a sm90 GEMM, as gemm_sm90.cuh reads it:
// rank 4 (contiguous, rows, batch inner, batch outer), boxes of 64 contiguous
// elements by the tile's rows (K-major) or by 64 k rows (MN-major).
TensorMapParam tensorMapOf(const std::string& operand, int buffer, const GemmOperandPlacement& p,
                           const TensorCoreGemm& gemm, int tileRows) {
  TensorMapParam map;
  map.operand = operand;
  map.buffer = buffer;
  map.offsetBytes = p.offset * 2;
  const uint64_t rowBytes = static_cast<uint64_t>(p.ld) * 2;
  map.dims = {static_cast<uint64_t>(p.contiguous), static_cast<uint64_t>(p.rows), static_cast<uint64_t>(gemm.batchInner),
              static_cast<uint64_t>(gemm.batchOuter)};
  // The strides of batch dimensions of extent 1 are never used but must be valid.
  map.stridesBytes = {rowBytes, gemm.batchInner > 1 ? static_cast<uint64_t>(p.batchInnerStride) * 2 : rowBytes,
                      gemm.batchOuter > 1 ? static_cast<uint64_t>(p.batchOuterStride) * 2 : rowBytes};
  map.box = {64, static_cast<uint32_t>(p.kMajor ? tileRows : gemm.BK), 1, 1};
  return map;
}

// A stream tile's tensor map (tensor_core_stream.h): dims (channels, outer
// positions, its batch axes), boxes of 64 channels x 64 positions, 128B
// swizzle as the tile is laid out.
TensorMapParam streamTensorMap(const StreamTile& tile, const TensorCoreStream& stream, int buffer) {
  TensorMapParam map;
  map.operand = tile.tensorMap;
  map.buffer = buffer;
  map.offsetBytes = tile.layout.offset * 2;
  const int64_t outer = tile.outer == stream.rows.name ? stream.rows.size : stream.stream.size;
  const uint64_t rowBytes = static_cast<uint64_t>(tile.layout.strides.at(tile.outer)) * 2;
  map.dims = {static_cast<uint64_t>(tile.channel.size), static_cast<uint64_t>(outer), 1, 1};
  map.stridesBytes = {rowBytes, rowBytes, rowBytes};  // a batch dimension of extent 1: never used, but valid
  for (size_t k = 0; k < tile.batchAxes.size(); ++k) {
    map.dims[k + 2] = static_cast<uint64_t>(tile.batchAxes[k].size);
    map.stridesBytes[k + 1] = static_cast<uint64_t>(tile.layout.strides.at(tile.batchAxes[k].name)) * 2;
  }
  map.box = {64, static_cast<uint32_t>(kStreamPositionsPerStep), 1, 1};
  return map;
}

std::string axisList(const std::vector<Axis>& axes) {
  std::string s;
  for (const Axis& a : axes) s += fmt::format("{}{}:{}", s.empty() ? "" : " ", a.name, a.size);
  return s.empty() ? "-" : s;
}

}  // namespace

CudaModule emitCuda(const Graph& graph, const std::vector<PlannedKernel>& kernels, const Target& target,
                    const EmitOptions& options) {
  const std::vector<std::string> names = printedNames(graph);
  auto name = [&](NodeId id) { return names[static_cast<size_t>(id)]; };

  // What is stored in GMEM: the graph's inputs, what crosses kernels, the
  // scatter-adds (accumulated by atomics), and graph outputs no kernel makes.
  std::set<NodeId> stored(graph.inputs.begin(), graph.inputs.end());
  std::set<NodeId> atomics;
  for (const PlannedKernel& pk : kernels) {
    stored.insert(pk.kernel.outputs.begin(), pk.kernel.outputs.end());
    for (NodeId id : pk.kernel.nodes)
      if (graph.node(id).op == Op::ScatterAdd) stored.insert(id), atomics.insert(id);
  }

  std::vector<Planned> plans;
  std::set<NodeId> gridSums;  // isGridSum's outputs: accumulated by atomics too
  std::set<NodeId> splitSums; // outputs of split-K launches: likewise
  // Zeroes the f32 array that kernel k's atomic adds accumulate into.
  auto clearBefore = [&](const Kernel& k, NodeId id) {
    Planned clear;
    clear.plan.kind = LaunchPlan::Kind::Clear;
    clear.plan.name = fmt::format("{}_clear_{}", k.name, name(id));
    clear.plan.outputs = {id};
    clear.kernel = k.id;
    clear.role = "clear";
    plans.push_back(clear);
  };
  for (const PlannedKernel& pk : kernels) {
    const Kernel& k = pk.kernel;
    std::set<NodeId> nodes(k.nodes.begin(), k.nodes.end());
    // A scatter-add is a launch of its own over its values, into an array
    // zeroed first; the kernel's other work reads its result from GMEM.
    for (NodeId id : k.nodes) {
      if (!atomics.count(id)) continue;
      clearBefore(k, id);
      Planned scatter;
      scatter.plan.kind = LaunchPlan::Kind::Scatter;
      scatter.plan.name = fmt::format("{}_scatter_{}", k.name, name(id));
      scatter.plan.outputs = {id};
      scatter.plan.computed = ancestorsWithin(graph, id, nodes);
      scatter.kernel = k.id;
      scatter.role = "scatter";
      plans.push_back(scatter);
    }
    Planned tile;
    tile.plan.name = k.name;
    tile.kernel = k.id;
    tile.role = "tile";
    for (NodeId id : k.nodes)
      if (!atomics.count(id)) tile.plan.computed.insert(id);
    for (NodeId id : k.outputs)
      if (!atomics.count(id)) tile.plan.outputs.push_back(id);
    if (tile.plan.outputs.empty()) continue;
    for (const Axis& a : pk.shape.groupAxes) {
      bool used = std::any_of(tile.plan.outputs.begin(), tile.plan.outputs.end(),
                              [&](NodeId o) { return graph.node(o).type.has(a.name); });
      if (!used) continue;
      tile.plan.groupAxes.push_back(a);
      auto t = pk.partition.groupTiles.find(a.name);
      tile.plan.tiles[a.name] = t == pk.partition.groupTiles.end() ? a.size : std::min(t->second, a.size);
    }
    tile.plan.streamAxis = k.streamAxis;
    tile.plan.streamChunk = pk.partition.streamChunk;
    // Split-K where the partition shares a reduced axis out across blocks and
    // every output is a plain sum over it: partial sums added atomically into
    // f32 arrays zeroed first.
    for (const auto& [axis, perBlock] : pk.partition.splitTiles) {
      const StreamAnalysis sums = analyzeStream(graph, tile.plan.computed, axis);
      const bool plainSums = sums.streamable && sums.tail.empty() &&
                             std::all_of(tile.plan.outputs.begin(), tile.plan.outputs.end(), [&](NodeId o) {
                               return std::count(sums.aggregates.begin(), sums.aggregates.end(), o) > 0;
                             });
      int64_t extent = 0;
      for (NodeId id : tile.plan.computed)
        for (NodeId o : graph.node(id).operands)
          if (const Axis* a = graph.node(o).type.find(axis)) extent = a->size;
      if (plainSums && perBlock < extent) tile.plan.splitTiles[axis] = perBlock;
    }
    if (!tile.plan.splitTiles.empty())
      for (NodeId o : tile.plan.outputs) {
        splitSums.insert(o);
        clearBefore(k, o);
      }
    // A sum of a whole array to a scalar adds up across the grid by atomics,
    // into an f32 array zeroed first.
    if (isGridSum(graph, tile.plan)) {
      gridSums.insert(tile.plan.outputs[0]);
      clearBefore(k, tile.plan.outputs[0]);
    }
    plans.push_back(tile);
  }
  // Graph outputs that are views or constants: copied into an array of their own.
  for (const GraphOutput& o : graph.outputs) {
    if (stored.count(o.node)) continue;
    stored.insert(o.node);
    Planned copy;
    copy.plan.name = fmt::format("copy_{}", name(o.node));
    copy.plan.outputs = {o.node};
    copy.plan.computed = {o.node};
    copy.role = "copy";
    const Type& t = graph.node(o.node).type;
    copy.plan.groupAxes = t.axes;
    for (size_t i = 0; i < t.axes.size(); ++i)
      copy.plan.tiles[t.axes[i].name] = i + 1 == t.axes.size() ? std::min<int64_t>(t.axes[i].size, 256) : 1;
    plans.push_back(copy);
  }

  std::vector<size_t> order = orderLaunches(graph, plans, stored);
  std::set<NodeId> keptWhole;  // stored as f32 whatever the storage
  for (NodeId id : graph.inputs)
    if (options.f32Values.count(graph.node(id).name)) keptWhole.insert(id);
  for (const GraphOutput& o : graph.outputs)
    if (options.f32Values.count(o.name)) keptWhole.insert(o.node);
  for (NodeId id : stored)
    if (graph.node(id).type.axes.empty() || isStatistic(graph, id)) keptWhole.insert(id);
  auto storageOfValue = [&](NodeId id) {
    return storageOf(graph.node(id).type.dtype, keptWhole.count(id) ? StorageType::F32 : options.storage,
                     atomics.count(id) > 0 || gridSums.count(id) > 0 || splitSums.count(id) > 0);
  };
  std::map<NodeId, StoredArray> arrays;
  for (NodeId id : stored) arrays[id] = {"g_" + name(id), storageOfValue(id).ctype};
  const DeviceResidency resident{int64_t{target.smCount} * target.maxWarpsPerSM * target.warpSize,
                                 int64_t{target.smCount} * target.maxBlocksPerSM};
  for (Planned& p : plans) p.written = writeKernel(graph, p.plan, arrays, names, resident);

  CudaModule module;
  module.arch = target.arch;
  std::map<NodeId, int> bufferOf;
  auto addBuffer = [&](NodeId id) {
    if (bufferOf.count(id)) return;
    const Node& n = graph.node(id);
    Storage s = storageOfValue(id);
    BufferDesc b;
    b.node = id;
    b.name = name(id);
    b.dtype = s.dtype;
    b.ctype = s.ctype;
    b.axes = n.type.axes;
    b.elements = n.type.elementCount();
    b.bytes = b.elements * s.bytes;
    b.graphInput = n.op == Op::Input;
    for (const GraphOutput& o : graph.outputs)
      if (o.node == id) b.graphOutputs.push_back(o.name);
    bufferOf[id] = static_cast<int>(module.buffers.size());
    module.buffers.push_back(b);
  };
  for (NodeId id : graph.inputs) addBuffer(id);
  for (size_t i : order)
    for (NodeId o : plans[i].plan.outputs) addBuffer(o);

  // A launch on the tile library: the epilogue functor (the launch's work
  // after the contraction), the config, and the kernel that runs the GEMM.
  // `stagedA`, `stagedB`: the scratch buffers of staged operands (-1: read in place).
  auto gemmKernelSource = [&](const Planned& planned, const TensorCoreGemm& gemm, const WrittenKernel& epilogue,
                              int stagedA, int stagedB, KernelLaunch& launch) {
    const bool sm90 = gemm.library == TensorCoreGemm::Library::Sm90;
    const NodeId aArray = gemm.a.array, bArray = gemm.b.array;
    std::string members, init, params;
    auto pointer = [&](NodeId id, bool written) {
      launch.params.push_back({bufferOf.at(id), written});
      const StoredArray& arr = arrays.at(id);
      params += fmt::format("{}{}{}* __restrict__ {}", params.empty() ? "" : ", ", written ? "" : "const ", arr.ctype, arr.param);
    };
    for (NodeId o : planned.plan.outputs) {
      pointer(o, true);
      members += fmt::format("  {}* {};\n", arrays.at(o).ctype, arrays.at(o).param);
      init += (init.empty() ? "" : ", ") + arrays.at(o).param;
    }
    for (NodeId r : epilogue.reads) {
      pointer(r, false);
      members += fmt::format("  const {}* {};\n", arrays.at(r).ctype, arrays.at(r).param);
      init += (init.empty() ? "" : ", ") + arrays.at(r).param;
    }
    if (sm90) {
      launch.tensorMaps = {tensorMapOf("A", stagedA >= 0 ? stagedA : bufferOf.at(aArray), gemm.a, gemm, gemm.BM),
                           tensorMapOf("B", stagedB >= 0 ? stagedB : bufferOf.at(bArray), gemm.b, gemm, gemm.BN)};
    } else {
      std::set<NodeId> passed = epilogue.reads;
      for (auto [operand, staged, param] : {std::tuple{aArray, stagedA, "g_staged_a"}, std::tuple{bArray, stagedB, "g_staged_b"}})
        if (staged >= 0) {
          launch.params.push_back({staged, false});
          params += fmt::format("{}const llmc_bf16* __restrict__ {}", params.empty() ? "" : ", ", param);
        } else if (passed.insert(operand).second) {
          pointer(operand, false);
        }
    }
    launch.grid = {gemm.grid[0], gemm.grid[1], gemm.grid[2]};
    launch.block = gemm.threads;
    launch.dynamicSmemBytes = gemm.smemBytes;
    launch.instructions.tensorCores = gemm.describe();
    launch.gemm = gemm;
    const std::string& n = launch.name;
    auto operandNote = [&](const char* role, const GemmOperandPlacement& o) {
      return fmt::format("{} = {}{} ({}-major, {} x {}, leading dimension {})", role, name(o.array),
                         o.offset ? fmt::format(" from element {}", o.offset) : "", o.kMajor ? "K" : "MN", o.rows,
                         o.contiguous, o.ld);
    };
    std::string text = fmt::format(
        "\n// {}: {} x {} x {} blocks x {} threads, {} bytes of dynamic shared memory{}. Instruction selection: {}.\n"
        "// Rows [{}], columns [{}], k [{}], batches [{}]; {}; {}.\n"
        "// Tile {}x{}: {}. The work after the contraction is the epilogue functor, at 8 columns per call.\n",
        n, launch.grid[0], launch.grid[1], launch.grid[2], launch.block, launch.dynamicSmemBytes,
        sm90 ? " (persistent: one block per SM at most)" : "", launch.instructions.describe(), axisList(gemm.m),
        axisList(gemm.n), axisList(gemm.k), axisList(gemm.batch), operandNote("A", gemm.a), operandNote("B", gemm.b),
        gemm.BM, gemm.BN, gemm.tileChoice);
    std::string inputs, loads;
    for (const std::string& input : epilogue.epilogueInputs) inputs += fmt::format(" uint4 {};", input);
    for (size_t at = 0; at < epilogue.epilogueLoads.size();) {
      size_t end = epilogue.epilogueLoads.find('\n', at);
      loads += "    " + epilogue.epilogueLoads.substr(at, end - at + 1);
      at = end + 1;
    }
    text += fmt::format("struct {}_epilogue {{\n{}  struct Inputs {{{}{}}};\n"
                        "  __device__ void load(llmc::BatchIndex batch, int row, int col, Inputs& in) const {{\n{}  }}\n"
                        "  __device__ void operator()(llmc::BatchIndex batch, int row, int col, const float (&v)[8], "
                        "int count, const Inputs& in) const {{\n",
                        n, members, inputs, inputs.empty() ? "" : " ", loads);
    std::string body;
    for (size_t at = 0; at < epilogue.body.size();) {
      size_t end = epilogue.body.find('\n', at);
      body += "  " + epilogue.body.substr(at, end - at + 1);
      at = end + 1;
    }
    text += body + "  }\n};\n";
    text += fmt::format("using {}_config = {};\nstatic_assert({}_config::kSmemBytes == {}, \"the launch description's "
                        "dynamic shared memory\");\n",
                        n, gemm.configType(), n, gemm.smemBytes);
    const std::string shape =
        fmt::format("llmc::GemmShape{{{}, {}, {}, {}, {}}}", gemm.M, gemm.N, gemm.K, gemm.batchOuter, gemm.batchInner);
    if (sm90) {
      text += fmt::format("extern \"C\" __global__ void __launch_bounds__({0}_config::kThreads, 1) {0}("
                          "const __grid_constant__ llmc::sm90::TmaDescriptor tma_a, const __grid_constant__ "
                          "llmc::sm90::TmaDescriptor tma_b, {1}) {{\n"
                          "  llmc::sm90::gemm<{0}_config>(tma_a, tma_b, {2}, {0}_epilogue{{{3}}}{4});\n}}\n",
                          n, params, shape, init,
                          gemm.splits > 1 ? fmt::format(", llmc::sm90::SplitK{{{}}}", gemm.splits) : "");
    } else {
      auto operand = [&](const GemmOperandPlacement& o, const char* stagedParam) {
        return fmt::format("llmc::GemmOperand{{reinterpret_cast<const llmc::bf16*>({}) + {}, {}, {{{}, {}}}}}",
                           o.staged ? stagedParam : arrays.at(o.array).param, o.offset, o.ld, o.batchOuterStride,
                           o.batchInnerStride);
      };
      text += fmt::format("extern \"C\" __global__ void __launch_bounds__({0}_config::kThreads) {0}({1}) {{\n"
                          "  llmc::sm80::gemm<{0}_config>({2}, {3}, {4}, {0}_epilogue{{{5}}});\n}}\n",
                          n, params, shape, operand(gemm.a, "g_staged_a"), operand(gemm.b, "g_staged_b"), init);
    }
    return text;
  };

  const bool bf16 = options.storage == StorageType::BF16;
  std::string kernelsSource;
  // A staged GEMM operand (gemm_staging.h): a scratch buffer and the launch
  // that fills it, before the GEMM's; the buffer's index (-1: not staged).
  StagingCopies staging;  // gemm_staging.h: the staging launches and their scratch buffers
  auto stageOperand = [&](const KernelLaunch& gemmLaunch, const GemmOperandPlacement& operand, const char* role,
                          const TensorCoreGemm& gemm) {
    if (!operand.staged) return -1;
    return staging.stage(module, kernelsSource, gemmLaunch, operand, bufferOf.at(operand.array), role, gemm, target,
                         kPrelude);
  };
  std::set<std::string> tileLibraries;  // the device headers the module includes
  for (size_t i : order) {
    const Planned& p = plans[i];
    KernelLaunch launch;
    launch.name = p.plan.name;
    launch.kernel = p.kernel;
    launch.role = p.role;
    launch.grid = {p.written.grid, 1, 1};
    launch.block = p.written.block;
    launch.instructions = selectInstructions(graph, p.plan.computed, stored, bf16);
    if (p.plan.kind == LaunchPlan::Kind::Tile) {
      TensorCorePlan tc = planTensorCoreGemm(graph, p.plan, launch.instructions, stored, names, target);
      if (tc.gemm) {
        const TensorCoreGemm& gemm = *tc.gemm;
        try {
          WrittenKernel epilogue = writeGemmEpilogue(graph, p.plan, arrays, names, {gemm.contraction, gemm.batch, gemm.m, gemm.n});
          const int stagedA = stageOperand(launch, gemm.a, "a", gemm), stagedB = stageOperand(launch, gemm.b, "b", gemm);
          const std::string function = gemmKernelSource(p, gemm, epilogue, stagedA, stagedB, launch);
          kernelsSource += function;
          const char* tileLibrary = gemm.library == TensorCoreGemm::Library::Sm90 ? "llmc/gemm_sm90.cuh" : "llmc/gemm_sm80.cuh";
          tileLibraries.insert(tileLibrary);
          launch.source = translationUnit(tileLibrary, function);
          module.launches.push_back(std::move(launch));
          continue;
        } catch (const EpilogueUnsupported& e) {
          tc.scalarReason = e.what();
        }
      }
      launch.instructions.scalarReason = tc.scalarReason;
    }
    const TensorCoreStreamPlan tcStream =
        bf16 && p.plan.kind == LaunchPlan::Kind::Tile ? planTensorCoreStream(graph, p.plan, stored, arrays, names, target)
                                                      : TensorCoreStreamPlan{};
    const WrittenKernel written =
        tcStream.stream ? writeTensorCoreStream(graph, p.plan, arrays, names, *tcStream.stream) : p.written;
    if (tcStream.stream) {
      launch.grid = {written.grid, 1, 1};
      launch.block = written.block;
      launch.dynamicSmemBytes = tcStream.stream->smemBytes;
      launch.instructions.tensorCores = tcStream.stream->describe();
    } else if (!tcStream.reason.empty() && launch.instructions.scalarReason.empty()) {
      launch.instructions.scalarReason = tcStream.reason;
    }
    if (!tcStream.stream)
      for (NodeId o : p.plan.outputs)
        for (NodeId r : written.reads)
          if (elementwiseInPlace(graph, p.plan, o, r, arrays)) launch.inPlace.push_back({bufferOf.at(o), bufferOf.at(r)});
    std::string params;
    if (tcStream.stream && tcStream.stream->issuer == MmaIssuer::Warpgroup)
      for (const StreamTile* tile : tcStream.stream->loadedTiles()) {
        launch.tensorMaps.push_back(streamTensorMap(*tile, *tcStream.stream, bufferOf.at(tile->layout.array)));
        params += fmt::format("{}const __grid_constant__ llmc::sm90::TmaDescriptor {}", params.empty() ? "" : ", ",
                              tile->tensorMap);
      }
    for (NodeId o : p.plan.outputs) {
      launch.params.push_back({bufferOf.at(o), true});
      params += fmt::format("{}{}* __restrict__ {}", params.empty() ? "" : ", ", arrays.at(o).ctype, arrays.at(o).param);
    }
    for (NodeId r : written.reads) {
      launch.params.push_back({bufferOf.at(r), false});
      params += fmt::format("{}const {}* __restrict__ {}", params.empty() ? "" : ", ", arrays.at(r).ctype,
                            arrays.at(r).param);
    }
    std::string about;
    if (p.plan.kind == LaunchPlan::Kind::Tile && isGridSum(graph, p.plan)) {
      about = "// GRID: " + p.written.streamNote + ".\n";
    } else if (tcStream.stream) {
      about = fmt::format("// GRID: one block per 64 rows of {} and position of the other group axes; 4 warps of 16 rows.\n// {}.\n",
                          tcStream.stream->rows.name, written.streamNote);
    } else if (p.plan.kind == LaunchPlan::Kind::Tile) {
      std::string axes;
      for (const Axis& a : p.plan.groupAxes)
        axes += fmt::format("{}{}:{}/{}", axes.empty() ? "" : " ", a.name, a.size, p.plan.tiles.at(a.name));
      about = fmt::format("// GRID: one block per tile of [{}] (size/tile); threads over the tile's points.\n",
                          axes.empty() ? "one point" : axes);
      if (!p.written.streamNote.empty()) about += "// " + p.written.streamNote + ".\n";
    } else if (p.plan.kind == LaunchPlan::Kind::Scatter) {
      about = "// A scatter-add: one thread per value, atomic adds into the zeroed f32 array.\n";
    } else {
      about = "// Zeroes an array that atomic adds accumulate into.\n";
    }
    const std::string bounds = tcStream.stream ? fmt::format("{}, {}", launch.block, tcStream.stream->residentBlocks)
                                               : fmt::format("{}", launch.block);
    const std::string function =
        fmt::format("\n// {}: {} blocks x {} threads. Instruction selection: {}.\n{}"
                    "extern \"C\" __global__ void __launch_bounds__({}) {}({}) {{\n{}}}\n",
                    launch.name, launch.grid[0], launch.block, launch.instructions.describe(), about, bounds,
                    launch.name, params, written.body);
    kernelsSource += function;
    const char* streamLibrary = !tcStream.stream                                   ? nullptr
                                : tcStream.stream->issuer == MmaIssuer::Warpgroup ? "llmc/stream_wgmma.cuh"
                                                                                  : "llmc/stream_mma.cuh";
    if (streamLibrary) tileLibraries.insert(streamLibrary);
    launch.source = translationUnit(streamLibrary, function);
    module.launches.push_back(std::move(launch));
  }
  std::string includes;
  for (const std::string& header : tileLibraries) includes += fmt::format("#include <{}>\n", header);
  if (!includes.empty()) includes = "// the tensor-core tiles\n" + includes + "\n";
  module.source = fmt::format("// Generated by llmc-compile --emit cuda from diagram '{}' for {} ({}); floats stored as {}.\n"
                              "// One launch per function, in this order; the launch description (--emit launches)\n"
                              "// gives each one's grid, block and parameters.\n\n{}{}{}",
                              graph.name, target.arch, target.device,
                              options.storage == StorageType::BF16 ? "bf16" : "f32",
                              includes,
                              kPrelude, kernelsSource);
  return module;
}

nlohmann::json launchesToJson(const CudaModule& module) {
  using nlohmann::json;
  auto axesJson = [](const std::vector<Axis>& axes) {
    json out = json::array();
    for (const Axis& a : axes) out.push_back({{"name", a.name}, {"size", a.size}});
    return out;
  };
  json buffers = json::array();
  for (const BufferDesc& b : module.buffers)
    buffers.push_back({{"name", b.name},
                       {"node", b.node},
                       {"dtype", b.dtype},
                       {"axes", axesJson(b.axes)},
                       {"elements", b.elements},
                       {"bytes", b.bytes},
                       {"graph_input", b.graphInput},
                       {"graph_outputs", b.graphOutputs}});
  json launches = json::array();
  for (const KernelLaunch& l : module.launches) {
    json params = json::array();
    for (const LaunchParam& p : l.params) {
      const BufferDesc& b = module.buffers.at(static_cast<size_t>(p.buffer));
      params.push_back({{"buffer", p.buffer},
                        {"name", b.name},
                        {"access", p.written ? "write" : "read"},
                        {"dtype", b.dtype},
                        {"axes", axesJson(b.axes)}});
    }
    json gemm = nullptr;
    if (l.gemm)
      gemm = {{"config", l.gemm->configType()},
              {"M", l.gemm->M},
              {"N", l.gemm->N},
              {"K", l.gemm->K},
              {"batch_outer", l.gemm->batchOuter},
              {"batch_inner", l.gemm->batchInner},
              {"a_major", l.gemm->a.kMajor ? "K" : "M"},
              {"b_major", l.gemm->b.kMajor ? "K" : "N"},
              {"a_leading_dimension", l.gemm->a.ld},
              {"b_leading_dimension", l.gemm->b.ld}};
    json maps = json::array();
    for (const TensorMapParam& m : l.tensorMaps)
      maps.push_back({{"operand", m.operand},
                      {"buffer", m.buffer},
                      {"name", module.buffers.at(static_cast<size_t>(m.buffer)).name},
                      {"offset_bytes", m.offsetBytes},
                      {"dtype", "bf16"},
                      {"dims", m.dims},
                      {"strides_bytes", m.stridesBytes},
                      {"box", m.box},
                      {"element_strides", {1, 1, 1, 1}},
                      {"interleave", "none"},
                      {"swizzle", m.swizzle},
                      {"l2_promotion", "256B"},
                      {"oob_fill", "zero"}});
    launches.push_back({{"name", l.name},
                        {"kernel", l.kernel},
                        {"role", l.role},
                        {"grid", l.grid},
                        {"block", {l.block, 1, 1}},
                        {"dynamic_smem_bytes", l.dynamicSmemBytes},
                        {"tensor_maps", maps},
                        {"gemm", gemm},
                        {"params", params},
                        {"in_place", l.inPlace},
                        {"instructions", l.instructions.describe()}});
  }
  return {{"arch", module.arch}, {"buffers", buffers}, {"launches", launches}};
}

}  // namespace llmc
