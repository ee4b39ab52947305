// Concatenations made where their parts lie (codegen/concat_parts.h): each
// part of a join that the step reads is written at the join's strides, by
// its own launch, and the join has no launch. Checked here against the
// reference interpreter element by element: at every index, a part's value
// is the join's at the place its offset and strides give, the parts cover
// the join once, and whatever reads the join runs after every part's
// writer. On a fused gated MLP (a diagram GPT-2 does not use, N = 300 rows),
// the same with its axes renamed, and GPT-2's attention (q, k and v's
// gradients joined into the fused projection's).
#include <catch2/catch.hpp>

#include <set>

#include "codegen/emit_cuda.h"
#include "lowering/lowering.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

struct Checked {
  int interleaved = 0;  // joins whose parts interleave (an inner axis)
  int launches = 0;
};

Checked checkPlacements(const std::string& path, const std::string& entry, const SizeBindings& sizes) {
  static const Target target = loadTarget("sm_90a");
  const Graph g = testing::compileFor(path, entry, sizes, true, target);
  const EmitOptions emit;  // bf16 storage
  const std::vector<PlannedKernel> kernels = lowerKernels(g, target, CostOptions{}, emit);
  const CudaModule list = emitCuda(g, kernels, target, emit);

  std::map<int, std::vector<int>> partsOf;  // holder buffer -> its parts' buffers
  for (size_t b = 0; b < list.buffers.size(); ++b)
    if (list.buffers[b].within >= 0) partsOf[list.buffers[b].within].push_back(static_cast<int>(b));
  InterpreterOptions options;
  options.roundLowPrecision = false;
  for (const auto& [holder, parts] : partsOf) {
    options.keep.insert(list.buffers[static_cast<size_t>(holder)].node);
    for (int p : parts) options.keep.insert(list.buffers[static_cast<size_t>(p)].node);
  }
  const std::map<NodeId, HostTensor> values = interpretNodes(g, testing::randomInputs(g, 17, 2), options);

  Checked checked;
  for (const auto& [holder, parts] : partsOf) {
    const BufferDesc& h = list.buffers[static_cast<size_t>(holder)];
    const HostTensor& joined = values.at(h.node);
    std::vector<int> hits(static_cast<size_t>(h.elements), 0);
    bool interleaved = false;
    for (int p : parts) {
      const BufferDesc& part = list.buffers[static_cast<size_t>(p)];
      INFO(part.name << " in " << h.name);
      REQUIRE(part.ctype == h.ctype);
      const HostTensor& value = values.at(part.node);
      REQUIRE(value.type.axes == part.axes);
      std::vector<int64_t> strides = part.withinStrides;
      if (strides.empty()) {  // contiguous: row-major from the offset
        strides.assign(part.axes.size(), 0);
        int64_t s = 1;
        for (size_t i = part.axes.size(); i-- > 0;) strides[i] = s, s *= part.axes[i].size;
      } else {
        interleaved = true;
      }
      REQUIRE(strides.size() == part.axes.size());
      std::vector<int64_t> index(part.axes.size(), 0);
      int mismatches = 0;
      for (int64_t e = 0; e < part.elements; ++e) {
        int64_t at = part.withinOffset;
        for (size_t i = 0; i < index.size(); ++i) at += index[i] * strides[i];
        REQUIRE(at >= 0);
        REQUIRE(at < h.elements);
        ++hits[static_cast<size_t>(at)];
        mismatches += value.data[static_cast<size_t>(e)] != joined.data[static_cast<size_t>(at)];
        for (size_t i = index.size(); i-- > 0;) {  // the next row-major index
          if (++index[i] < part.axes[i].size) break;
          index[i] = 0;
        }
      }
      CHECK(mismatches == 0);
    }
    // A join an output is made of, or one the step reads: every element once.
    CHECK(std::all_of(hits.begin(), hits.end(), [](int n) { return n == 1; }));
    checked.interleaved += interleaved;

    // No launch writes the join itself; each that reads it comes after every part's writer.
    size_t lastPartWrite = 0;
    for (size_t i = 0; i < list.launches.size(); ++i)
      for (const LaunchParam& param : list.launches[i].params) {
        if (param.buffer == holder) CHECK(!param.written);
        if (param.written && std::count(parts.begin(), parts.end(), param.buffer)) lastPartWrite = std::max(lastPartWrite, i + 1);
      }
    for (size_t i = 0; i < list.launches.size(); ++i) {
      const KernelLaunch& l = list.launches[i];
      const bool reads = std::any_of(l.params.begin(), l.params.end(), [&](const LaunchParam& q) { return q.buffer == holder; }) ||
                         std::any_of(l.tensorMaps.begin(), l.tensorMaps.end(), [&](const TensorMapParam& m) { return m.buffer == holder; });
      if (!reads) continue;
      CHECK(i >= lastPartWrite);
      ++checked.launches;
    }
  }
  // A kernel that launches nothing is priced at nothing.
  for (const PlannedKernel& pk : kernels) {
    const bool launched = std::any_of(list.launches.begin(), list.launches.end(),
                                      [&](const KernelLaunch& l) { return l.kernel == pk.kernel.id; });
    if (!launched) CHECK(pk.cost.predicted == 0);
  }
  return checked;
}

}  // namespace

TEST_CASE("a join the step reads is written where its parts lie, element by element as the interpreter joins it",
          "[concat_parts]") {
  const SizeBindings sizes = {{"N", 300}, {"C", 72}, {"F", 104}};
  const Checked fused = checkPlacements("tests/diagrams/fused_gated_mlp.dg", "fused_gated_mlp_loss", sizes);
  CHECK(fused.interleaved == 1);
  CHECK(fused.launches == 2);  // the data gradient's matmul and w13's
  const Checked renamed = checkPlacements("tests/diagrams/fused_gated_mlp.dg", "fused_gated_mlp_renamed", sizes);
  CHECK(renamed.interleaved == fused.interleaved);
  CHECK(renamed.launches == fused.launches);

  // GPT-2's attention: q, k and v's gradients (two stored by the backward's
  // key stream, one by its query GEMM, in their own axis orders) joined along s.
  const SizeBindings gpt2 = {{"B", 2}, {"T", 24}, {"maxT", 24}, {"L", 2}, {"C", 48}, {"H", 3}, {"V", 101}, {"Vp", 120}};
  CHECK(checkPlacements("diagrams/gpt2/model.dg", "gpt2", gpt2).interleaved == 2);
}

TEST_CASE("parts that would not start 16-byte aligned are joined by a launch of their own", "[concat_parts]") {
  // F = 100: the value's half starts at element 100 of each row.
  const Checked odd = checkPlacements("tests/diagrams/fused_gated_mlp.dg", "fused_gated_mlp_loss",
                                      {{"N", 300}, {"C", 72}, {"F", 100}});
  CHECK(odd.interleaved == 0);
}
