// The plan does not depend on names: every axis of a diagram renamed by a
// random bijection (which also changes their alphabetical order, the order of
// every map keyed by axis name) gives the same launches — the same roles,
// grids, blocks, shared memory, engines, GEMM shapes and tensor maps — on
// sm_90a and sm_80, forward and backward, for every diagram of the repository
// at sizes no tile divides.
#include <catch2/catch.hpp>

#include <fmt/format.h>

#include <map>
#include <random>
#include <set>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "lowering/lowering.h"
#include "planning/target.h"
#include "report/pseudocode.h"
#include "test_support.h"

using namespace llmc;

namespace {

std::string renamed(const std::map<std::string, std::string>& names, const std::string& axis) {
  auto it = names.find(axis);
  return it == names.end() ? axis : it->second;
}

// The graph with every axis name mapped through `names`.
Graph renameAxes(Graph g, const std::map<std::string, std::string>& names) {
  for (Node& n : g.nodes) {
    for (Axis& a : n.type.axes) a.name = renamed(names, a.name);
    for (std::string& a : n.axes) a = renamed(names, a);
    for (std::string& a : n.newAxes) a = renamed(names, a);
  }
  return g;
}

// A bijection of the graph's axis names onto random names of other lengths and letters.
std::map<std::string, std::string> randomAxisNames(const Graph& g, uint32_t seed) {
  std::set<std::string> axes;
  for (const Node& n : g.nodes)
    for (const Axis& a : n.type.axes) axes.insert(a.name);
  std::mt19937 rng(seed);
  std::map<std::string, std::string> names;
  std::set<std::string> taken;
  for (const std::string& a : axes) {
    std::string fresh;
    do {
      fresh = "ax";
      const int length = 1 + static_cast<int>(rng() % 6);
      for (int i = 0; i < length; ++i) fresh += static_cast<char>('a' + rng() % 26);
    } while (taken.count(fresh) || axes.count(fresh));
    taken.insert(fresh);
    names[a] = fresh;
  }
  return names;
}

// What a launch is, without its names.
std::string launchShape(const KernelLaunch& l) {
  std::string s = fmt::format("{} grid {}x{}x{} block {} smem {} params {} tc {}", l.role, l.grid[0], l.grid[1], l.grid[2],
                              l.block, l.dynamicSmemBytes, l.params.size(),
                              l.instructions.tensorCores.empty() ? "no" : "yes");
  if (l.gemm)
    s += fmt::format(" gemm {} {}x{}x{} batches {}x{} lda {} ldb {} splits {}", l.gemm->configType(), l.gemm->M, l.gemm->N,
                     l.gemm->K, l.gemm->batchOuter, l.gemm->batchInner, l.gemm->a.ld, l.gemm->b.ld, l.gemm->splits);
  for (const TensorMapParam& m : l.tensorMaps)
    s += fmt::format(" map [{} {} {} {}] [{} {} {}] [{} {}]", m.dims[0], m.dims[1], m.dims[2], m.dims[3], m.stridesBytes[0],
                     m.stridesBytes[1], m.stridesBytes[2], m.box[0], m.box[1]);
  return s;
}

std::vector<std::string> launchShapes(const Graph& g, const Target& target, StorageType storage) {
  EmitOptions e;
  e.storage = storage;
  CostOptions cost;
  cost.storageBytes = storage == StorageType::F32 ? 4 : 2;
  const CudaModule m = emitCuda(g, lowerKernels(g, target, cost, e), target, e);
  std::vector<std::string> shapes;
  for (const KernelLaunch& l : m.launches) shapes.push_back(launchShape(l));
  return shapes;
}

struct Diagram {
  std::string path, entry;
  SizeBindings sizes;
  bool grad = false;
};

}  // namespace

TEST_CASE("renaming every axis leaves the launches unchanged", "[rename]") {
  const SizeBindings gpt2 = {{"B", 3}, {"T", 37}, {"maxT", 40}, {"L", 2}, {"C", 40}, {"H", 4}, {"V", 101}, {"Vp", 120}};
  const std::vector<Diagram> diagrams = {
      {"diagrams/gpt2/model.dg", "gpt2", gpt2, false},
      {"diagrams/gpt2/model.dg", "gpt2", gpt2, true},
      {"diagrams/examples/rmsnorm.dg", "rmsnorm_rows", {{"N", 100}, {"C", 771}}},
      {"diagrams/examples/grouped_query_attention.dg", "", {{"B", 2}, {"H", 4}, {"G", 2}, {"T", 50}, {"X", 70}, {"D", 24}}},
      {"diagrams/examples/contraction_chain.dg", "", {{"I", 30}, {"J", 17}, {"K", 65}, {"Lr", 9}, {"M", 33}}},
      {"benchmarks/diagrams/gated_mlp.dg", "gated_mlp", {{"N", 100}, {"C", 77}, {"F", 205}}},
      {"benchmarks/diagrams/gated_mlp.dg", "gated_mlp_loss", {{"N", 100}, {"C", 77}, {"F", 205}}, true},
      {"benchmarks/diagrams/multi_query_attention.dg", "multi_query_attention_loss",
       {{"H", 3}, {"Tq", 100}, {"Tk", 130}, {"D", 40}}, true},
      {"benchmarks/diagrams/value_axis_attention.dg", "value_axis_attention_loss",
       {{"B", 2}, {"H", 3}, {"T", 100}, {"D", 40}, {"E", 24}}, true},
      {"benchmarks/diagrams/sliding_window_attention.dg", "sliding_window_attention",
       {{"B", 1}, {"H", 2}, {"T", 300}, {"D", 64}, {"W", 100}}},
      {"benchmarks/diagrams/contraction_chain.dg", "contraction_chain_loss",
       {{"I", 100}, {"J", 96}, {"K", 200}, {"L", 40}, {"M", 77}, {"P", 33}}, true},
      {"benchmarks/diagrams/layernorm_matmul_gelu.dg", "layernorm_matmul_gelu_loss", {{"N", 33}, {"C", 77}, {"F", 308}},
       true},
      {"benchmarks/diagrams/rmsnorm_matmul.dg", "rmsnorm_matmul_loss", {{"N", 33}, {"C", 77}, {"F", 308}}, true},
      {"benchmarks/diagrams/classifier.dg", "classifier", {{"N", 77}, {"V", 1001}, {"C", 80}}, true},
  };
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    for (const Diagram& d : diagrams) {
      PipelineOptions p;
      p.path = testing::repoPath(d.path);
      p.entry = d.entry;
      p.sizes = d.sizes;
      p.grad = d.grad;
      p.target = &target;
      const Graph g = compileToIR(p);
      // One bijection a diagram and architecture, drawn from both: over the
      // list, names land before, between and after the originals.
      const uint32_t seed = static_cast<uint32_t>(d.path.size() * 31 + d.entry.size() * 7 + (arch[3] == '9'));
      INFO(fmt::format("{} {}{} on {}, seed {}", d.path, d.entry, d.grad ? " --grad" : "", arch, seed));
      const Graph r = renameAxes(g, randomAxisNames(g, seed));
      for (StorageType storage : {StorageType::BF16, StorageType::F32})
        CHECK(launchShapes(r, target, storage) == launchShapes(g, target, storage));
    }
  }
}
