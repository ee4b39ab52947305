// The front end, one pass after another. Each pass is a free function in its
// own file; the IR can be printed after any of them (--dump-after) and each
// can be timed (--time-passes). The verifier runs after every pass that makes
// IR. The back end's stages (backend.cpp) follow in a list of their own.
#include "driver/pipeline.h"

#include <fmt/format.h>

#include <stdexcept>

#include "frontend/elaborate.h"
#include "frontend/resource_limits.h"
#include "ir/autodiff.h"
#include "ir/canonicalize.h"
#include "ir/collect_terms.h"
#include "ir/masked_sums.h"
#include "ir/one_hot_gathers.h"
#include "ir/print.h"
#include "ir/reassociate.h"
#include "ir/recompute.h"
#include "ir/split_contractions.h"
#include "ir/verify.h"

namespace llmc {

SizeBindings parseSizeBindings(const std::string& text) {
  SizeBindings sizes;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const std::string item = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw std::invalid_argument(fmt::format("--set expects NAME=N, got '{}'", item));
    const std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    size_t used = 0;
    long long n = 0;
    try {
      n = std::stoll(value, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != value.size() || n <= 0)
      throw std::invalid_argument(fmt::format("--set {}: '{}' is not a positive whole number", name, value));
    if (n > kMaxAxisSize)
      throw std::invalid_argument(
          fmt::format("--set {}: {} is more than the largest size, {} (2^40)", name, value, kMaxAxisSize));
    sizes[name] = n;
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return sizes;
}

const std::vector<std::string>& passNames() {
  static const std::vector<std::string> names = {"parse",           "resolve",  "elaborate",   "canonicalize",
                                                 "one-hot-gathers", "masked-sums", "autodiff", "reassociate", "collect-terms",
                                                 "split-contractions", "recompute"};
  return names;
}

namespace {

// Checks the IR a pass made and dumps it if asked.
void afterIR(const PassRunner& passes, const std::string& name, const Graph& g) {
  verifyGraph(g);
  if (passes.dumps(name)) passes.dump(fmt::format("# IR after {}\n{}", name, printGraph(g)));
}

}  // namespace

Graph compileToIR(const PipelineOptions& options) {
  PassRunner passes(options.reporting, "pass");
  Program program = passes.run("parse", [&] { return loadProgram(options.path); });
  std::string entry = options.entry.empty() ? defaultEntry(program) : options.entry;
  passes.run("resolve", [&] { resolveProgram(program, options.sizes, entry); return 0; });

  Graph graph = passes.run("elaborate", [&] { return elaborate(program, entry, options.sizes, options.usedSizes); });
  afterIR(passes, "elaborate", graph);

  graph = passes.run("canonicalize", [&] { return canonicalize(graph); });
  afterIR(passes, "canonicalize", graph);

  // Priced on the target: without one the gathers stay as written.
  if (options.target) {
    graph = passes.run("one-hot-gathers", [&] { return canonicalize(oneHotGathers(graph, *options.target, options.cost)); });
    afterIR(passes, "one-hot-gathers", graph);
    graph = passes.run("masked-sums", [&] { return canonicalize(maskedSums(graph, *options.target, options.cost)); });
    afterIR(passes, "masked-sums", graph);
  }

  if (options.grad) {
    graph = passes.run("autodiff", [&] { return differentiate(graph, {options.loss, options.wrt}); });
    afterIR(passes, "autodiff", graph);
    graph = passes.run("canonicalize", [&] { return canonicalize(graph); });
    afterIR(passes, "canonicalize", graph);
    graph = passes.run("reassociate", [&] { return canonicalize(reassociate(graph)); });
    afterIR(passes, "reassociate", graph);
    if (options.collectTerms) {
      graph = passes.run("collect-terms", [&] { return canonicalize(collectTerms(graph)); });
      afterIR(passes, "collect-terms", graph);
    }
  }
  // On the whole graph, the backward's contractions included.
  if (options.target) {
    graph = passes.run("split-contractions",
                       [&] { return canonicalize(splitContractions(graph, *options.target, options.cost)); });
    afterIR(passes, "split-contractions", graph);
  }
  if (options.grad && options.target && options.recompute) {
    graph = passes.run("recompute", [&] { return recompute(graph, *options.target, options.cost, options.remaking); });
    afterIR(passes, "recompute", graph);
  }
  return graph;
}

}  // namespace llmc
