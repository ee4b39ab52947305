// Gathered contraction operands as one-hot contractions, where that is cheaper.
//
// A gather picks rows of a table by an index: gather(T, I, a)[i…, r…] =
// T[a = I[i…], r…]. Summed against a one-hot of the index it is a
// contraction over the gathered axis,
//
//   gather(T, I, a)  =  contract(onehot(I, a), T, a),   onehot[i…, a] = (I[i…] == a),
//
// so a contraction that reads a gathered table,
//
//   contract(X, gather(T, I, a), D)  =  contract(sum over D∖T of X · onehot(I, a), T, (D ∩ T) ∪ {a}),
//
// becomes a contraction of the table itself: a GEMM with the gathered axis in
// its inner dimension, on the tensor cores, where the gathered form reads a
// different block of T for every index (a mixture of experts' expert matrices
// chosen per token) and runs on the CUDA cores. The dense form does |a| times
// the multiply-adds, so the pass prices both on the target and rewrites only
// where the dense one is cheaper: a few experts, not a vocabulary.
//
// It runs before autodiff, so a rewritten forward gets a dense backward too.
// The rewrite is exact (both sides are the same sum) for indices in range;
// the interpreter rejects an index out of range in the gathered form, and the
// one-hot form reads it as a zero row.
#pragma once

#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/target.h"

namespace llmc {

Graph oneHotGathers(const Graph& graph, const Target& target, const CostOptions& options);

}  // namespace llmc
