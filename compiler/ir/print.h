// Prints IR back as a diagram in the language: one primitive per line, every
// value annotated with its type, so that parsing the text gives the same IR.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

struct PrintOptions {
  bool comments = true;  // woven axes, source location and composite path per line
};

std::string printGraph(const Graph& graph, const PrintOptions& options = {});

// The name each node has in the printed IR (unique, valid identifiers).
std::vector<std::string> printedNames(const Graph& graph);

}  // namespace llmc
