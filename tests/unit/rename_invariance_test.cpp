// The plan does not depend on names: every axis of a diagram renamed by a
// random bijection (which also changes their alphabetical order, the order of
// every map keyed by axis name) gives the same launches — the same roles,
// grids, blocks, shared memory, engines, GEMM shapes and tensor maps — on
// sm_90a and sm_80, forward and backward, for every diagram of the repository
// at sizes no tile divides.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <sstream>

#include "codegen/emit_cuda.h"
#include "driver/pipeline.h"
#include "frontend/source.h"
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

std::vector<std::string> launchShapes(const Graph& g, const Target& target, StorageType storage,
                                     bool rowProducts = false) {
  EmitOptions e;
  e.storage = storage;
  CostOptions cost;
  cost.storageBytes = storage == StorageType::F32 ? 4 : 2;
  cost.rowProducts = rowProducts;
  const CudaModule m = emitCuda(g, lowerKernels(g, target, cost, e), target, e);
  std::vector<std::string> shapes;
  for (const KernelLaunch& l : m.launches) shapes.push_back(launchShape(l));
  return shapes;
}

struct Diagram {
  std::string path, entry;
  SizeBindings sizes;
  bool grad = false;
  bool rowProducts = false;  // CostOptions::rowProducts
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
      // A column's statistics kept apart (FusionOptions::apart); a prologue stored for a GEMM (dV of cross-attention).
      {"benchmarks/diagrams/batch_norm.dg", "batch_norm_loss", {{"N", 5003}, {"C", 40}, {"O", 24}}, true},
      // Statistics over two axes held whole together (Fuser::mergeHeldWhole).
      {"benchmarks/diagrams/group_norm.dg", "group_norm_loss", {{"B", 2}, {"G", 5}, {"E", 3}, {"S", 333}}, true},
      {"benchmarks/diagrams/contrastive.dg", "contrastive_loss", {{"B", 77}, {"N", 301}, {"D", 40}}, true},
      {"benchmarks/diagrams/cross_attention.dg", "cross_attention_loss",
       {{"B", 1}, {"H", 2}, {"Tq", 20}, {"Tk", 1000}, {"D", 128}}, true},
      {"tests/diagrams/split_contractions.dg", "grouped_attention", {{"B", 2}, {"H", 6}, {"G", 2}, {"T", 300}, {"D", 40}},
       true},
      {"benchmarks/diagrams/llama_block.dg", "llama_block_loss",
       {{"B", 2}, {"T", 77}, {"C", 96}, {"H", 6}, {"G", 2}, {"D", 16}, {"F", 200}}, true},
      // Stream tiles read from staged copies (tensor_core_stream.h, StreamTileStaging).
      {"tests/diagrams/staged_tiles.dg", "causal_attention", {{"B", 2}, {"H", 3}, {"T", 300}, {"D", 37}}, true},
      {"tests/diagrams/staged_tiles.dg", "channel_major_values",
       {{"B", 2}, {"H", 3}, {"T", 100}, {"X", 300}, {"D", 40}, {"E", 50}}, true},
      {"tests/diagrams/row_products.dg", "attention_backward", {{"B", 2}, {"H", 3}, {"T", 333}, {"D", 64}}, false, true},
      {"tests/diagrams/row_products.dg", "attention_backward", {{"B", 1}, {"H", 2}, {"T", 333}, {"D", 40}}, false, true},
      // Outputs along a stream staged through shared memory (tensor_core_stream.h, StagedStepOutput).
      {"tests/diagrams/stream_step_outputs.dg", "stored_probabilities", {{"B", 2}, {"H", 6}, {"T", 1000}, {"D", 64}}},
      {"tests/diagrams/stream_step_outputs.dg", "stored_scores", {{"B", 2}, {"H", 3}, {"T", 1000}, {"D", 40}}},
  };
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    for (const Diagram& d : diagrams) {
      const Graph g = testing::compileFor(d.path, d.entry, d.sizes, d.grad, target);
      // One bijection a diagram and architecture, drawn from both: over the
      // list, names land before, between and after the originals.
      const uint32_t seed = static_cast<uint32_t>(d.path.size() * 31 + d.entry.size() * 7 + (arch[3] == '9'));
      INFO(fmt::format("{} {}{} on {}, seed {}", d.path, d.entry, d.grad ? " --grad" : "", arch, seed));
      const Graph r = renameAxes(g, randomAxisNames(g, seed));
      for (StorageType storage : {StorageType::BF16, StorageType::F32})
        CHECK(launchShapes(r, target, storage, d.rowProducts) == launchShapes(g, target, storage, d.rowProducts));
    }
  }
}

namespace {

// Every diagram file of the repository outside tests/lit (whose files are
// FileCheck tests, many of them errors), as repository paths, sorted.
std::vector<std::string> repositoryDiagramFiles() {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  const fs::path root = testing::repoPath("");
  for (const char* dir : {"diagrams", "benchmarks/diagrams", "tests/diagrams", "tests/cuda", "tests/fuzz/regressions"})
    for (const fs::directory_entry& e : fs::recursive_directory_iterator(root / dir))
      if (e.is_regular_file() && e.path().extension() == ".dg")
        files.push_back(fs::relative(e.path(), root).generic_string());
  std::sort(files.begin(), files.end());
  return files;
}

// The names of the diagrams a file defines, in order.
std::vector<std::string> diagramNames(const std::string& relative) {
  std::ifstream in(testing::repoPath(relative));
  std::stringstream text;
  text << in.rdbuf();
  const std::string s = text.str();
  static const std::regex header(R"((^|\n)diagram ([A-Za-z_][A-Za-z_0-9]*)\()");
  std::vector<std::string> names;
  for (auto it = std::sregex_iterator(s.begin(), s.end(), header); it != std::sregex_iterator(); ++it)
    names.push_back((*it)[2].str());
  return names;
}

// FNV-1a: a seed from a name, the same on every platform.
uint32_t nameHash(const std::string& s) {
  uint32_t h = 2166136261u;
  for (unsigned char c : s) h = (h ^ c) * 16777619u;
  return h;
}

}  // namespace

// The list above picks sizes per diagram; this one takes every diagram of
// every file (an entry of its own where it can be one), forward and, where it
// has a scalar loss, backward against its params (every float input where it
// marks none), with one set of small sizes no tile divides (M a multiple of 6
// for the diagrams that split it so). Diagrams that cannot be entries (axes
// '..', or axes without sizes: the library's and GPT-2's building blocks) are
// renamed where an entry inlines them (GPT-2's model, the benchmarks).
TEST_CASE("renaming every axis of every diagram of the repository leaves the launches unchanged", "[rename]") {
  const SizeBindings sizes = {{"B", 3},  {"T", 37}, {"maxT", 40}, {"L", 2},  {"C", 44}, {"H", 4},  {"V", 101},
                              {"Vp", 120}, {"N", 33}, {"M", 30},   {"K", 23}, {"D", 24}, {"F", 52}, {"I", 30},
                              {"J", 17}, {"X", 41}, {"G", 2},    {"Tq", 19}, {"Tk", 43}, {"P", 13}, {"Lr", 9},
                              {"E", 20}, {"O", 11}, {"W", 7},  {"R", 3}, {"HP", 5}, {"S", 5}};
  const std::vector<std::string> files = repositoryDiagramFiles();
  REQUIRE(files.size() >= 50);
  int entries = 0, backward = 0;
  std::vector<std::string> notEntries;
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    entries = backward = 0;
    notEntries.clear();
    for (const std::string& file : files) {
      const std::vector<std::string> names = diagramNames(file);
      INFO(file);
      REQUIRE(!names.empty());
      for (const std::string& entry : names) {
        PipelineOptions p;
        p.path = testing::repoPath(file);
        p.entry = entry;
        p.sizes = sizes;
        if (entry == "axis_boxes") p.sizes["M"] = 6;  // splits m into 2 x 3
        p.target = &target;
        Graph forward;
        try {
          forward = compileToIR(p);
        } catch (const CompileError& e) {
          const std::string why = e.message();
          INFO(why);
          CHECK((why.find("cannot have '..'") != std::string::npos || why.find("has no size") != std::string::npos));
          notEntries.push_back(file + " " + entry);
          continue;
        }
        ++entries;
        std::vector<Graph> graphs{forward};
        std::vector<std::string> scalars, params, floats;
        for (const GraphOutput& o : forward.outputs)
          if (forward.node(o.node).type.axes.empty() && isFloat(forward.node(o.node).type.dtype)) scalars.push_back(o.name);
        for (NodeId id : forward.inputs) {
          if (forward.node(id).isParam) params.push_back(forward.node(id).name);
          if (isFloat(forward.node(id).type.dtype)) floats.push_back(forward.node(id).name);
        }
        if (scalars.size() == 1) {
          p.grad = true;
          p.loss = scalars[0];
          p.wrt = params.empty() ? floats : params;
          graphs.push_back(compileToIR(p));
          ++backward;
        }
        for (size_t k = 0; k < graphs.size(); ++k) {
          const Graph& g = graphs[k];
          const uint32_t seed = nameHash(file + " " + entry) + static_cast<uint32_t>((arch[3] == '9') + 2 * k);
          INFO(fmt::format("{} {}{} on {}, seed {}", file, entry, k ? " --grad" : "", arch, seed));
          const Graph r = renameAxes(g, randomAxisNames(g, seed));
          for (StorageType storage : {StorageType::BF16, StorageType::F32})
            CHECK(launchShapes(r, target, storage) == launchShapes(g, target, storage));
        }
      }
    }
  }
  // What the loop covered, so that a diagram that stops compiling as an entry shows.
  INFO(fmt::format("{} entries, {} with a backward; not entries: {}", entries, backward, fmt::join(notEntries, ", ")));
  CHECK(entries >= 97);
  CHECK(backward >= 73);
  // Building blocks without sizes: GPT-2's, the library's, RoPE's rotate, elu + 1, the LLaMA block's RMSNorm and RoPE.
  CHECK(notEntries.size() <= 18);
}
