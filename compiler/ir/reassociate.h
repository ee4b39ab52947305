// Reassociation of a sum through a contraction, where the graph already holds
// the inner product: for A lacking the summed axes X and W lacking the
// contracted axes D,
//
//   sum over X of ( contract(A, B, D) · W · K )  =  K · contract(A, contract(W, B, X), D)
//
// (K: factors lacking X, multiplied or divided; a sign). Both sides are the
// same sum over X and D, taken in the other order. The pass rewrites only
// where contract(W, B, X) is a node of the graph already, so the new form
// costs one contraction over D of arrays without X instead of a contraction
// and a sum over X·D. Attention's backward is the case it finds (FlashAttention's
// D = rowsum(dO ∘ O)): the row term of the softmax's gradient, a sum over the
// keys of (dO·vᵀ) · P / l, becomes (dO · O) / l, O being the forward's output
// contract(P, v, x) — no stream over the keys to recompute P for it.
//
// It runs after autodiff (the backward is where such sums arise) on any
// diagram, from the IR's structure alone.
#pragma once

#include "ir/ir.h"

namespace llmc {

Graph reassociate(const Graph& graph);

}  // namespace llmc
