// Gathered contraction operands as one-hot contractions
// (compiler/ir/one_hot_gathers.cpp): where the target prices the dense form
// cheaper, the contraction reads the table itself, and the graph computes the
// same values, forward and backward; where it does not, the graph stays.
#include <catch2/catch.hpp>

#include <cmath>

#include "driver/pipeline.h"
#include "interpreter.h"
#include "planning/target.h"
#include "test_support.h"

using namespace llmc;

namespace {

const char* kFile = "tests/diagrams/one_hot_gathers.dg";
const SizeBindings kSizes = {{"N", 37}, {"C", 19}, {"X", 5}, {"O", 23}, {"R", 2}, {"S", 3}, {"V", 50000}};

SizeBindings sizesOf(const std::string& entry) {
  SizeBindings used;
  for (const char* name : {"N", "C", "X", "O"}) used[name] = kSizes.at(name);
  if (entry.rfind("routed", 0) == 0) used["R"] = kSizes.at("R");
  if (entry == "picked" || entry == "vocabulary") used["S"] = kSizes.at("S");
  if (entry == "vocabulary") used["V"] = kSizes.at("V"), used.erase("X");
  return used;
}

// Contractions with a gathered operand.
int gatheredContractions(const Graph& g) {
  int count = 0;
  for (const Node& n : g.nodes)
    if (n.op == Op::Contract)
      for (NodeId o : n.operands) count += g.node(o).op == Op::Gather;
  return count;
}

}  // namespace

TEST_CASE("a contraction of experts chosen per row reads the experts whole, same values forward and backward",
          "[one-hot-gathers]") {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    const Target target = loadTarget(arch);
    for (bool grad : {false, true}) {
      const std::string entry = grad ? "routed_loss" : "routed";
      const Graph plain = testing::compileFor(kFile, entry, sizesOf(entry), grad, target);
      PipelineOptions untargeted;
      untargeted.path = testing::repoPath(kFile);
      untargeted.entry = entry;
      untargeted.sizes = sizesOf(entry);
      untargeted.grad = grad;
      const Graph reference = compileToIR(untargeted);
      // The backward contracts the gathered experts again (the rows' gradient).
      CHECK(gatheredContractions(reference) == (grad ? 2 : 1));
      CHECK(gatheredContractions(plain) == 0);
      for (uint64_t seed : {1, 2}) CHECK(testing::largestRelativeDifference(reference, plain, seed, 2) <= 1e-9);
    }
  }
}

TEST_CASE("an index whose axis is contracted too, and an operand with the gathered axis's name",
          "[one-hot-gathers]") {
  const Target target = loadTarget("sm_90a");
  for (const char* entry : {"picked", "clash"}) {
    PipelineOptions untargeted;
    untargeted.path = testing::repoPath(kFile);
    untargeted.entry = entry;
    untargeted.sizes = sizesOf(entry);
    const Graph reference = compileToIR(untargeted);
    const Graph planned = testing::compileFor(kFile, entry, sizesOf(entry), false, target);
    CHECK(gatheredContractions(reference) == 1);
    CHECK(gatheredContractions(planned) == 0);
    for (uint64_t seed : {1, 2})
      CHECK(testing::largestRelativeDifference(reference, planned, seed, static_cast<double>(kSizes.at("X"))) <= 1e-9);
  }
}

TEST_CASE("a gathered vocabulary stays gathered: the dense form does |V| times the products",
          "[one-hot-gathers]") {
  const Target target = loadTarget("sm_90a");
  const Graph planned = testing::compileFor(kFile, "vocabulary", sizesOf("vocabulary"), false, target);
  CHECK(gatheredContractions(planned) == 1);
}
