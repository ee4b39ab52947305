// The IR verifier: checks the invariants every pass must keep (wiring,
// operand counts, types consistent with each primitive's typing rule, one size
// per axis name). A failure is a compiler bug, reported as std::logic_error.
#pragma once

#include "ir/ir.h"

namespace llmc {

void verifyGraph(const Graph& graph);

}  // namespace llmc
