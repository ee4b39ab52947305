// Fusion: the graph cut into kernels. A kernel is a set of nodes run as one
// GPU launch; the values crossing kernel boundaries are stored in GMEM.
//
// Anchors are the nodes that reduce (contraction, sum, max, gather,
// scatter-add). Elementwise and axis boxes join the kernel that consumes them
// (a prologue, recomputed there) or the kernel that produces their operand (an
// epilogue). Reductions over the same axis merge with the kernel that produces
// what they reduce when the union streams over that axis (streamability.h):
// that is how a softmax and the contraction after it become one kernel.
#pragma once

#include <string>
#include <set>
#include <vector>

#include "ir/ir.h"

namespace llmc {

struct Kernel {
  int id = 0;
  std::string name;               // from the nodes it holds
  std::vector<NodeId> nodes;      // in graph order
  std::vector<NodeId> inputs;     // values read from GMEM: graph inputs, other kernels' outputs
  std::vector<NodeId> outputs;    // values written to GMEM: read by other kernels, or graph outputs
  std::string streamAxis;         // the axis streamed with an accumulator; empty: none
  std::vector<std::string> innerAxes;  // other reduced axes, consumed whole within a chunk
};

// Choices the lowering stage (lowering.h) feeds back into fusion.
struct FusionOptions {
  // Reductions that join no stream with the kernels making their operands:
  // the lowering found the stream they would anchor cannot run on the tensor
  // cores and priced it above the separate kernels (a chain of contractions
  // whose middle operand lies transposed for the stream's tiles).
  std::set<NodeId> unstreamed;
  // Values stored by the kernel that makes them rather than remade as a
  // prologue of the contraction that reads them: the tensor-core engines
  // take stored operands only, and the lowering priced the store below the
  // prologue's contraction on the CUDA cores (a weight gradient's activation).
  std::set<NodeId> stored;
  // Reductions whose kernel takes nothing that reads them along an axis they
  // reduce: a statistic over the rows of a column (a batch normalisation's
  // mean) held whole in a block leaves the grid a block a tile of columns,
  // each thread walking every row; apart, the statistic is a column sum
  // shared out over the grid, and what reads it along the rows a kernel of
  // its own. The lowering tries it where the held kernel leaves SMs idle or
  // waits on the memory's latency (lowering/unfuse.h).
  std::set<NodeId> apart;
  // A contraction over a stream's rows of a value the stream computes
  // (attention's dQ, a sum over the keys of the scores' gradient, beside the
  // stream over the queries that makes dK and dV) joins that stream as a
  // row product (planning/row_products.h): each block adds its rows' share
  // into an f32 output by atomics, where apart the value would be stored for
  // a kernel of its own or remade there. Experimental: not yet measured on a
  // GPU (llmc-compile --row-products).
  bool rowProducts = false;
};

std::vector<Kernel> formKernels(const Graph& graph, const FusionOptions& options = {});

// The vocabulary of fusion.
// Anchors reduce (contraction, sum, max, gather, scatter-add): each starts a kernel.
bool isAnchor(const Node& n);
// Constants, positions and elementwise expressions of them alone (a causal
// mask) cost nothing to make: every kernel that uses one makes its own, and
// they are never stored nor part of a kernel's nodes.
bool isFree(const Graph& g, const Node& n);
// isFree of every node of g, by id, in one pass.
std::vector<char> freeNodes(const Graph& g);
// freeNodes, less the matrices made of positions and constants alone that a
// contraction reads (a causal mask summed against values, ir/masked_sums.h):
// stored once, such a matrix is a tensor-core operand, where made in every
// kernel that reads it, it would keep its contraction on the CUDA cores.
std::vector<char> freeNodesUnlessMatrixOperands(const Graph& g);
// Axis boxes that only relabel, reorder or select (split, merge, rename,
// transpose, index, broadcast) are views: a kernel reads its input through
// them, strided, instead of a kernel copying the data. A concat is a view too:
// its parts are stored into their slices of one array (stacked per-layer
// gradients); and so is a stop_gradient, the identity once autodiff is done.
bool isView(const Node& n);
// A backward value the step stores once for long matmuls: an operand of a
// float contraction over more than a head's channels (a tensor-core GEMM),
// made without a short contraction (the classifier's dlogits, elementwise
// from the stored logits). Its GEMMs read it as stored tiles: remade in a
// prologue it would take them off the tensor cores, and copied per reading
// stream it would be stored twice. (Attention's probabilities, remade from
// q·k over 64 channels inside the streams over keys and queries, are not.)
// `readers`: the nodes that read `id`.
bool storedForMatmul(const Graph& g, NodeId id, const std::vector<NodeId>& readers);

// A kernel that sums a whole array to one float (a gradient's global norm, a
// loss), from elementwise work on stored arrays: one of `outputs` is that sum,
// any others are elementwise values with the summed array's axes in its order
// (the loss's logits, stored as the same loop passes them), and `nodes` holds
// no other reduction. It runs over the whole grid (at most
// kWholeArraySumBlocks blocks, each adding its warps' partial sums by atomics):
// the emitter writes it so (cuda_kernel_writer.h, isGridSum) and the cost
// model counts it so. wholeArraySumOf: that sum, or -1.
constexpr int64_t kWholeArraySumBlocks = 1024;
// The blocks of 256 threads a whole-array sum of `summed` runs in: a thread
// takes 8 consecutive elements a step (a scalar's one), as many blocks as
// give each thread one step, at most kWholeArraySumBlocks.
int64_t wholeArraySumBlocks(const Type& summed);
NodeId wholeArraySumOf(const Graph& g, const std::vector<NodeId>& outputs, const std::set<NodeId>& nodes);
bool isWholeArraySum(const Graph& g, const std::vector<NodeId>& outputs, const std::set<NodeId>& nodes);

}  // namespace llmc
