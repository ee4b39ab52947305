// Shrinking a failing diagram: smaller versions are tried, and one is kept
// while it still fails with the same signature.
#pragma once

#include <functional>

#include "diagram_spec.h"

namespace llmc::fuzz {

struct ShrinkStats {
  int tried = 0, kept = 0;
};

// `stillFails` runs the failing check on a candidate. Moves, repeated until
// none helps or `seconds` run out: a statement's value becomes an input of
// its type (what computed it goes); a statement is bypassed (its uses read
// one of its operands of the same type); a differentiated input stops being
// one; an axis gets a smaller odd size (1, 3, 5, 7, or half).
DiagramSpec shrink(DiagramSpec spec, const std::function<bool(const DiagramSpec&)>& stillFails, double seconds,
                   ShrinkStats* stats = nullptr);

}  // namespace llmc::fuzz
