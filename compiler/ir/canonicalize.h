// Canonicalisation: removes what does not reach an output (dead code) and
// merges identical nodes (common subexpressions, repeated constants), then
// renumbers. Inputs always stay: they are the diagram's signature.
#pragma once

#include "ir/ir.h"

namespace llmc {

Graph canonicalize(const Graph& graph);

}  // namespace llmc
