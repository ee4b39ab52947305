// Inputs read through shifting views (planning/shifted_axes.h): a padded
// sequence's windows index it along the kernel's group axis under another
// name, and the cost model tiles it there instead of counting the whole axis
// once per tile; renaming the axes does not change that.
#include <catch2/catch.hpp>

#include "driver/pipeline.h"
#include "driver/backend.h"
#include "planning/shifted_axes.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

// The planned kernel that reads the value named `name`, and its node.
std::pair<const PlannedKernel*, NodeId> readerOf(const Graph& g, const std::vector<PlannedKernel>& kernels,
                                                 const std::string& name) {
  for (const PlannedKernel& k : kernels)
    for (NodeId in : k.kernel.inputs)
      if (g.node(in).name == name) return {&k, in};

  return {nullptr, -1};
}

}  // namespace

TEST_CASE("a convolution's windows tile the sequence they shift", "[cost][views]") {
  const Target target = loadTarget("sm_90a");
  const SizeBindings sizes = {{"B", 3}, {"T", 1001}, {"C", 77}, {"O", 50}};
  const Graph g = testing::compileFor("benchmarks/diagrams/same_convolution.dg", "same_convolution", sizes, false, target);
  BackendOptions options;
  options.until = "unfuse";
  const std::vector<PlannedKernel> kernels = compileBackend(g, target, options).kernels;
  // The kernel reads the padded sequence xp[b tp_unpadded c] (x between
  // two blocks of zeros, read through: a concatenation) as win[b u c k]:
  // tp_unpadded reaches the group axis u through two slices; b and c keep
  // their names.
  const auto [k, x] = readerOf(g, kernels, "xp");
  REQUIRE(k != nullptr);
  const std::map<std::string, std::string> shifted = shiftedGroupAxes(g, k->kernel, x, k->shape.groupAxes);
  CHECK(shifted == std::map<std::string, std::string>{{"tp_unpadded", "u"}});
  CHECK(renamedAxes(g.node(x).type, shifted).has("u"));
  // So a block reads its tile of it, not the whole sequence: what the
  // kernel moves through L2 is a few times what it reads and writes (its
  // blocks along k each read their tile), not once per tile of u (32 of
  // them and more).
  const double xBytes = static_cast<double>(g.node(x).type.elementCount()) * 2;
  const double written = static_cast<double>(g.node(k->kernel.outputs.at(0)).type.elementCount()) * 2;
  CHECK(k->cost.level("L2").movedBytes <= 4 * (xBytes + written));
}

TEST_CASE("an input read under its own names has no shifted axes", "[cost][views]") {
  const Target target = loadTarget("sm_90a");
  const Graph g = testing::compileFor("benchmarks/diagrams/gated_mlp.dg", "gated_mlp", {{"N", 100}, {"C", 77}, {"F", 205}},
                                      false, target);
  BackendOptions options;
  options.until = "unfuse";
  const std::vector<PlannedKernel> kernels = compileBackend(g, target, options).kernels;
  const auto [k, x] = readerOf(g, kernels, "x");
  REQUIRE(k != nullptr);
  REQUIRE(g.node(x).op == Op::Input);
  CHECK(shiftedGroupAxes(g, k->kernel, x, k->shape.groupAxes).empty());
}
