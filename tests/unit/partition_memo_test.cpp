// The partition memo (planning/partition_memo.h): a search it remembers is
// the search it stands for, the middle layers of a model share theirs, and
// kernels that differ in what the cost model reads do not.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <utility>

#include "planning/partition.h"
#include "planning/partition_memo.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

bool samePartition(const Partition& a, const Partition& b) {
  return a.groupTiles == b.groupTiles && a.streamChunk == b.streamChunk && a.splitTiles == b.splitTiles;
}

SizeBindings smallGpt2(int64_t layers) {
  return {{"B", 2}, {"T", 40}, {"maxT", 40}, {"L", layers}, {"C", 48}, {"H", 3}, {"V", 131}, {"Vp", 136}};
}

}  // namespace

TEST_CASE("the partition memo gives each kernel its own search", "[partition]") {
  for (const std::string arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    const Graph g = compileFor("diagrams/gpt2/model.dg", "gpt2", smallGpt2(3), true, target);
    const std::vector<Kernel> kernels = formKernels(g);
    for (const bool tensorCores : {true, false}) {
      INFO(arch << (tensorCores ? ", tensor cores" : ", CUDA cores"));
      const CostOptions options{2, tensorCores};
      PartitionMemo memo(g, target);
      for (const Kernel& k : kernels) {
        const KernelShape shape = kernelShape(g, k, target, options);
        INFO(k.name);
        CHECK(samePartition(memo.search(k, shape, options), searchPartition(g, k, shape, target, options)));
      }
      CHECK(memo.lookups() == kernels.size());
      CHECK(memo.searches() < kernels.size());
    }
  }
}

TEST_CASE("a deeper model costs the partition memo few more searches", "[partition]") {
  // The layers between the first and the last are the same computation,
  // but for the axes the compiler names apart in each (a concat's).
  const Target target = loadTarget("sm_90a");
  auto searches = [&](int64_t layers) {
    const Graph g = compileFor("diagrams/gpt2/model.dg", "gpt2", smallGpt2(layers), true, target);
    PartitionMemo memo(g, target);
    const std::vector<PlannedKernel> planned = planKernels(CostOptions{}, {}, memo);
    return std::pair{memo.searches(), planned.size()};
  };
  const auto [shallow, shallowKernels] = searches(4);
  const auto [deep, deepKernels] = searches(6);
  CHECK((deep - shallow) * 10 < deepKernels - shallowKernels);
}

TEST_CASE("the partition memo's key tells apart what node ids do not", "[partition]") {
  const Target target = loadTarget("sm_90a");
  const Graph g = compileFor("diagrams/gpt2/model.dg", "gpt2", smallGpt2(3), true, target);
  const PartitionMemo memo(g, target);
  std::set<std::string> keys;
  size_t kernels = 0;
  for (const Kernel& k : formKernels(g)) {
    ++kernels;
    keys.insert(memo.structureKey(k));
    // Another kernel of the same nodes that stores one more of them (or
    // reads one input fewer) is another computation.
    if (k.outputs.size() < k.nodes.size()) {
      Kernel more = k;
      for (NodeId id : k.nodes)
        if (std::find(k.outputs.begin(), k.outputs.end(), id) == k.outputs.end()) {
          more.outputs.push_back(id);
          break;
        }
      CHECK(memo.structureKey(more) != memo.structureKey(k));
    }
    Kernel renamed = k;
    renamed.id += 1000;
    renamed.name += "_renamed";
    CHECK(memo.structureKey(renamed) == memo.structureKey(k));
  }
  CHECK(keys.size() < kernels);
}
