// A contraction over several axes whose operand is made inside a stream,
// split into a contraction over one of them and a sum over the others:
//
//   contract(A, B, {t} ∪ R)  =  sum over R of contract(A, B, t)
//
// A stream sums over one axis (planning/fusion.h): a contraction over
// several cannot take an operand the stream makes at each of its positions,
// so that operand is stored for it, as large as the positions it spans.
// Grouped-query attention's backward is the case: the keys' gradients
// contract(dS, Q, r, t) sum over the query positions t and over the query
// heads r of each key head, and dS (like P for the values' gradients) is made
// from the short contraction q·k over the head's channels. Kept whole, P and
// dS were stored for two GEMMs, [heads, queries, keys] each; split, the
// contraction over t is the multi-head stream of FlashAttention (each key
// block a stream over the queries, r one more batch axis of the blocks), its
// result one partial gradient per r, which a small sum over r adds up.
//
// Which operands a stream makes is fusion's rule (remakingContraction:
// a chain of elementwise work from a short contraction with every axis of the
// operand, as the recompute pass remakes it). The axis kept is the longest
// reduced one, the first in the operands' order on a tie (by sizes and
// order, never by names): it leaves the partial sums smallest. The pass
// prices both forms on the target and rewrites where the split is cheaper:
// the operand written and read once by a launch of its own, against the
// partial sums written and read once and the launch of their sum — the
// split pays where the positions kept outnumber the channels of the result
// (attention's positions against its head's channels).
//
// It runs with a target, on the whole graph: after autodiff's passes (the
// backward is where such sums arise) and before recompute.
#pragma once

#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/target.h"

namespace llmc {

Graph splitContractions(const Graph& graph, const Target& target, const CostOptions& options);

}  // namespace llmc
