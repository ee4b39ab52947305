// Row products: a contraction over the rows of a stream, made inside it.
//
// A stream over t with rows x (a group axis, tiled across blocks) computes,
// at each step, values W[x, t] of its rows and the step's positions
// (attention's backward: dS, the scores' gradient, in the stream over the
// queries t that sums dK and dV over them). A contraction of W with a stored
// operand V[x, d] over x (dQ = sum over the keys x of dS * K) needs every
// row at each position: apart, it is a kernel of its own that stores W for
// it or remakes it (the recompute pass's second stream over x). Inside the
// stream it is one more tensor-core product a step, over the block's own 64
// rows: out[t, d] += sum over the block's x of W[x, t] * V[x, d], each block
// adding its share into an f32 output zeroed first, by atomics
// (FlashAttention-2's dQ). The fuser makes such kernels where
// FusionOptions::rowProducts asks (fusion_row_products.cpp); the launch list
// keeps their outputs in f32 and clears them first; the tensor-core stream
// plans the product (lowering/tensor_core_stream.h, StreamRowProduct).
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// Whether `contraction` is a row product of a kernel streamed over `stream`
// (`inKernel(id)`: whether the kernel computes node id): it contracts one axis x, one
// operand (the weights) is made in the kernel and has x and the stream
// axis, the other (the values) is read from outside with x and without the
// stream axis, and x is the kernel's: some member reduces the stream axis
// and keeps x (a sum over the stream by row).
template <class InKernel>
bool isRowProduct(const Graph& g, const Node& contraction, const std::string& stream, InKernel inKernel);

// The outputs of a kernel streamed over `stream` that are row products:
// partial sums over the block's rows, added by atomics into f32 arrays.
std::vector<NodeId> rowProductOutputs(const Graph& g, const std::vector<NodeId>& outputs,
                                      const std::vector<NodeId>& nodes, const std::string& stream);

// The other outputs of such a kernel that lie along `stream`: a tensor-core
// stream stores them at each step (lowering/tensor_core_stream.h,
// stepOutputs), where none reads the stream's results, and the steps it
// skips must leave them 0 (analysis/step_skip.h, skipKeepingZeros).
std::vector<NodeId> outputsAlongStream(const Graph& g, const std::vector<NodeId>& outputs,
                                       const std::vector<NodeId>& nodes, const std::string& stream);

// ---- implementation

template <class InKernel>
bool isRowProduct(const Graph& g, const Node& c, const std::string& stream, InKernel inKernel) {
  if (stream.empty() || c.op != Op::Contract || c.axes.size() != 1 || c.operands.size() != 2 ||
      !isFloat(c.type.dtype) || !c.type.has(stream))
    return false;
  const std::string& x = c.axes[0];
  if (x == stream) return false;
  for (int side = 0; side < 2; ++side) {
    const Node& w = g.node(c.operands[static_cast<size_t>(side)]);
    const Node& v = g.node(c.operands[static_cast<size_t>(1 - side)]);
    if (!inKernel(w.id) || inKernel(v.id) || !w.type.has(x) || !w.type.has(stream) || !v.type.has(x) ||
        v.type.has(stream))
      continue;
    // x is the kernel's row axis: a member sums over the stream and keeps x.
    for (const Node& m : g.nodes)
      if (inKernel(m.id) && (m.op == Op::Contract || m.op == Op::Reduce) && m.type.has(x) &&
          std::find(m.axes.begin(), m.axes.end(), stream) != m.axes.end())
        return true;
  }
  return false;
}

}  // namespace llmc
