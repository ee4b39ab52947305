// Masked sums as contractions with their mask, where that is cheaper.
//
// A sum over S of a selection between a value and zero, where the condition
// has axes the value lacks (positions t compared with s: a prefix sum, a
// window), is a contraction of the condition, as a 0/1 array, with the value:
//
//   sum over S of where(cond, x, 0)  =  contract(float(cond), sum over S∖cond of x, S ∩ cond)
//
// (where(cond, 0, x) is the same with `not cond`). `scan(sum, x, t)` is such a
// sum (x renamed along t to s, the condition s ≤ t), so a running sum of
// outer products, linear attention's state, becomes a GEMM of the triangular
// 0/1 matrix with the products on the tensor cores instead of a reduction
// that visits every (t, s) pair for every channel on the CUDA cores. The
// contraction does the same multiply-adds; the pass prices both on the target
// (the contraction's operand written and read once more) and rewrites where
// the contraction is cheaper. A condition without axes of its own (a mask over
// the value's own points) is no contraction and stays.
//
// A running sum (the condition a comparison of pos(s) with pos(t), the value
// along s and not t) has a third form: a scan node, run as a blocked scan,
// one pass along the axis (planning/scan_layout.h). The pass prices the three
// forms, each with its launch, and keeps the cheapest;
// CostOptions::scansAlways keeps the scan (the fuzzer). A running maximum
// (max over s of where(pos(s) REL pos(t), x, -inf)) has two: the masked
// maximum or the scan.
//
// It runs before autodiff: the backward of the contraction is contractions too.
#pragma once

#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/target.h"

namespace llmc {

Graph maskedSums(const Graph& graph, const Target& target, const CostOptions& options);

}  // namespace llmc
