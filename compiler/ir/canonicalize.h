// Canonicalisation: removes what does not reach an output (dead code) and
// merges identical nodes (common subexpressions, repeated constants), drops
// products and quotients by the constant 1 (autodiff's seed: exact, so no
// value changes), then renumbers. Inputs always stay: they are the diagram's
// signature.
#pragma once

#include "ir/ir.h"

namespace llmc {

Graph canonicalize(const Graph& graph);

}  // namespace llmc
