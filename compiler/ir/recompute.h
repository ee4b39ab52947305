// Store or recompute: for every value of the forward pass that the backward
// pass reads, decide by the cost model whether the forward pass stores it or
// the backward pass computes it again from smaller stored values.
//
// Elementwise work is always recomputed where it is read (it costs less than
// the bytes of its result). A reduction or contraction as large as the value
// read is recomputed when its work, at the unit's peak rate, takes less time
// than writing its result once and reading it back: attention's scores
// q·kᵀ over d (2d operations per element against 2×2 bytes) are recomputed,
// so the probabilities are never stored; the classifier's logits over the
// channels (2C operations per element) are stored, and the softmax over the
// vocabulary is recomputed from them and the saved row statistics. A value
// the forward stores for its own kernels (q, k, v with their bias, read as
// tiles by its attention kernel) is read where it is, unless remaking costs
// less than that one read. A remade chain reads each stored value it starts
// from once (GELU's derivative remakes its links from the one stored hidden
// value), as its fused kernel does.
//
// The backward readers get copies of the recomputed nodes (marked adjoint);
// the forward nodes stay as they were for the forward's own readers.
//
// Both choices assume that fusion (planning/fusion.h) takes a remade value
// into the kernels that read it. The pass asks fusion: a remade copy that
// it stores anyway (a contraction is a kernel of its own) of a value the
// forward stores too, or of a contraction, is read as stored instead, and a backward value split
// for several streams of which more than one copy is stored (the gradient
// of a running sum, read by sums over two different axes) is made once.
#pragma once

#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/target.h"

namespace llmc {

struct RecomputeOptions {
  // Hold less memory for a write: a value the forward stores for its own
  // kernels and the backward reads, made elementwise from values the
  // backward holds anyway, is remade in the backward even where that costs
  // writing it again (for a matmul, which reads stored operands) in a kernel
  // with other work. It is then no longer held from the forward to the
  // backward, across the step's peak of memory: GPT-2's GELU output, remade
  // beside its derivative from the stored pre-activation, 4·C values a token
  // a layer. false: time alone decides.
  bool holdLess = true;
};

Graph recompute(const Graph& graph, const Target& target, const CostOptions& options,
                const RecomputeOptions& policy = {});

}  // namespace llmc
