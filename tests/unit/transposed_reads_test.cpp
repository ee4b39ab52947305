// Which reads of a tile launch are staged through shared memory
// (planning/transposed_reads.h), and their tiles' row pitch.
#include <catch2/catch.hpp>

#include <set>

#include "planning/fusion.h"
#include "planning/transposed_reads.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

struct Launch {
  Graph graph;
  Kernel kernel;
};

// shifted_exp's one kernel: exp(x[n v] - m[n]) * 0.5, before its output is copied transposed.
Launch shiftedExp() {
  Launch l{compileFile("tests/diagrams/transposed_reads.dg", {{"N", 77}, {"V", 1001}}, "shifted_exp"), {}};
  std::vector<Kernel> kernels = formKernels(l.graph);
  REQUIRE(kernels.size() == 1);
  l.kernel = kernels[0];
  return l;
}

std::vector<TransposedRead> readsOf(const Launch& l, const std::vector<std::string>& order,
                                    const std::map<std::string, int64_t>& tiles, int64_t bytes) {
  std::vector<Axis> axes;
  for (const std::string& name : order)
    for (NodeId in : l.kernel.inputs)
      if (const Axis* a = l.graph.node(in).type.find(name); a && axes.size() < order.size() &&
          std::none_of(axes.begin(), axes.end(), [&](const Axis& x) { return x.name == name; }))
        axes.push_back(*a);
  REQUIRE(axes.size() == order.size());
  const std::set<NodeId> computed(l.kernel.nodes.begin(), l.kernel.nodes.end());
  const std::set<NodeId> stored(l.kernel.inputs.begin(), l.kernel.inputs.end());
  return transposedReads(l.graph, computed, stored, l.kernel.outputs, axes, tiles, [&](NodeId) { return bytes; });
}

}  // namespace

TEST_CASE("a read contiguous along another axis than the threads' is staged", "[transposed]") {
  const Launch l = shiftedExp();
  // Threads along n (a [v n] output): x [n v] is contiguous along v.
  std::vector<TransposedRead> reads = readsOf(l, {"v", "n"}, {{"v", 64}, {"n", 32}}, 2);
  REQUIRE(reads.size() == 1);
  CHECK(l.graph.node(reads[0].layout.array).name == "x");
  CHECK(reads[0].contiguous == "v");
  CHECK(reads[0].axes.back().name == "n");
  // Rows of 32 bf16 are 16 words: padded to 17 (an odd stride for the threads walking v), 34 values.
  CHECK(reads[0].pitch == 34);
  CHECK(reads[0].tileElements == 64 * 34);
  CHECK(transposedTileBytes(reads) == 64 * 34 * 2);
  // f32: 32 words a row, padded to 33.
  CHECK(readsOf(l, {"v", "n"}, {{"v", 64}, {"n", 32}}, 4)[0].pitch == 33);
  // Rows of 77 bf16 already take an odd count of words (39): no padding past the whole words.
  CHECK(readsOf(l, {"v", "n"}, {{"v", 64}, {"n", 77}}, 2)[0].pitch == 78);
}

TEST_CASE("reads along the threads' axis, short contiguous tiles and vectors are not staged", "[transposed]") {
  const Launch l = shiftedExp();
  // Threads along v: x is read as it lies.
  CHECK(readsOf(l, {"n", "v"}, {{"v", 64}, {"n", 32}}, 2).empty());
  // The contiguous axis tiled under 8: no 16-byte run to walk.
  CHECK(readsOf(l, {"v", "n"}, {{"v", 4}, {"n", 32}}, 2).empty());
  // m[n] has one axis (along the threads): never staged, at any tiles.
  for (const TransposedRead& r : readsOf(l, {"v", "n"}, {{"v", 64}, {"n", 32}}, 2))
    CHECK(l.graph.node(r.layout.array).name != "m");
  // Elements neither bf16 nor f32: not staged.
  CHECK(readsOf(l, {"v", "n"}, {{"v", 64}, {"n", 32}}, 8).empty());
}
