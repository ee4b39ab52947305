// parse(print(ir)) is the same IR, for every diagram of the repository.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "driver/pipeline.h"
#include "gpt2_config.h"
#include "ir/print.h"
#include "test_support.h"

using namespace llmc;
using namespace llmc::testing;

namespace {

Graph reparse(const Graph& g, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / ("llmc_roundtrip_" + g.name + ".dg");
  std::ofstream(path) << text;
  PipelineOptions options;
  options.path = path.string();
  Graph back = compileToIR(options);
  std::filesystem::remove(path);
  return back;
}

void checkRoundTrip(const Graph& g) {
  std::string text = printGraph(g);
  Graph back = reparse(g, text);
  std::string why;
  INFO(text);
  CHECK(structurallyEqual(g, back, &why));
  INFO(why);
  // Printing is a fixed point (without the comments: composite paths are not
  // part of the printed language).
  CHECK(printGraph(back, PrintOptions{false}) == printGraph(g, PrintOptions{false}));
}

}  // namespace

TEST_CASE("GPT-2 forward and loss survive printing and parsing", "[printer]") {
  SizeBindings sizes = Gpt2Config{2, 16, 4, 32, 90, 128}.sizes(2, 8);
  checkRoundTrip(compileFile("diagrams/gpt2/model.dg", sizes, "gpt2"));
  checkRoundTrip(compileFile("diagrams/gpt2/model.dg", sizes, "gpt2_logits"));
}

TEST_CASE("example diagrams survive printing and parsing", "[printer]") {
  checkRoundTrip(compileFile("diagrams/examples/rmsnorm.dg", {{"N", 3}, {"C", 5}}));
  checkRoundTrip(compileFile("diagrams/examples/grouped_query_attention.dg",
                             {{"B", 2}, {"H", 4}, {"G", 2}, {"T", 3}, {"X", 5}, {"D", 2}}));
  checkRoundTrip(compileFile("diagrams/examples/contraction_chain.dg",
                             {{"I", 2}, {"J", 3}, {"K", 4}, {"Lr", 5}, {"M", 2}}));
}

TEST_CASE("every primitive survives printing and parsing", "[printer]") {
  checkRoundTrip(compileFile("tests/diagrams/all_primitives.dg", {{"N", 4}, {"M", 6}}));
}

TEST_CASE("a structurally different graph is told apart", "[printer]") {
  Graph a = compileFile("diagrams/examples/rmsnorm.dg", {{"N", 3}, {"C", 5}});
  Graph b = compileFile("diagrams/examples/rmsnorm.dg", {{"N", 3}, {"C", 6}});
  std::string why;
  CHECK_FALSE(structurallyEqual(a, b, &why));
  CHECK_FALSE(why.empty());
}
