// Collecting like terms: a sum of products rewritten as fewer operations.
//
// Reverse mode differentiates a product chain link by link, so the gradient
// of a polynomial comes out as one product per link: GELU's derivative, from
// x + 0.044715·x·x·x, holds a·x·x·k, a·x·(k·x) and a·(k·x·x) as three terms
// of one sum, and the whole derivative takes 17 multiplications and additions
// where 8 do. Elementwise work is free in memory-bound kernels but not in a
// GEMM's epilogue, where one warpgroup's instructions set the pace.
//
// For every floating-point sum (add, subtract), and constant times a sum, the
// pass expands the expression below it into terms, each a constant times a
// product of atoms:
//   - constants fold into the coefficients; negation and subtraction flip them;
//   - a product distributes only over single terms: a factor that is a sum of
//     several (1 - t·t) stays one atom, so nothing is multiplied out — but for
//     a constant factor, which scales the sum's coefficients (GELU's forward
//     0.797·(x + 0.045·x·x·x) is the polynomial 0.797·x + 0.036·x·x·x);
//   - a sum that other nodes read too is one atom of the sums around it: it is
//     computed for them anyway, and x + k·x·x·x stays a polynomial in x;
//   - every other node (an exp, a division, a where, a view, an input) is an atom.
// Terms with the same atoms merge. The result is written back by factoring:
// the atoms common to all terms first, then the atom found in most terms
// (Horner's rule, one atom at a time), then a plain sum. The rewrite is kept
// only where it has fewer operations than the nodes it frees (those whose
// every reader is inside the rewritten sum), so sums whose parts are used
// elsewhere stay as they are. The rewrites run in graph order, in rounds until
// a round removes nothing: a forward sum decided while the backward's
// uncollected terms still read its parts is taken up again once they do not.
//
// Exact as real arithmetic; in floating point the operations are reordered,
// as a compiler's reassociation would. A cancellation (x - x) is left as
// written: dropping the term would turn inf - inf into 0. Renaming axes or
// nodes changes nothing: atoms are ordered by node id, coefficients by value.
#pragma once

#include "ir/ir.h"

namespace llmc {

Graph collectTerms(const Graph& graph);

}  // namespace llmc
