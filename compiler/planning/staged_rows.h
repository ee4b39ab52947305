// Rows held whole in shared memory.
//
// A tile launch without a stream that holds a reduced axis x whole (a
// softmax's maximum and sum over a vocabulary, then every position of it
// again for the output or the gradient) reads each point's row of x once a
// pass. A short row stays in L1 between the passes (a layernorm's 768
// channels, 1.5 KB); a long one (GPT-2's 50304 logits, 100 KB a row) is gone
// when the next pass comes back for it, and every pass reads it from HBM
// again. Such rows are staged: the block takes one point at a time, its
// threads copy the point's rows into shared memory once, and every pass reads
// them there; its reductions combine the block's warps. The fuser holds an
// axis longer than kWholeAxisLimit whole only where its rows fit here
// (planning/fusion_streams.cpp), the cost model prices their shared memory
// and barriers (planning/cost_model.cpp), and the CUDA writer stages exactly
// these (codegen/cuda_writer_rows.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// A point's rows are staged when they take more than this many bytes.
// Staging serialises a block's work: each point's copy, a barrier, then its
// passes. It pays where the passes would read a row from HBM again, and on
// the H200 that happens only for rows far longer than L1's or L2's share of
// a warp suggests: a layernorm's backward, three rows of 1.5 KB a point
// (GPT-2 d12), ran 72 us a launch staged (41bf104) against 52 unstaged
// (4cb3fbc); with three rows of 3.2 KB (d48, c29cb58) unstaged at 3.3 TB/s
// all the same; the classifier's 100 KB rows staged beat a stream and a
// second kernel over them (step_kernels_bench, 2026-12-05). Between those,
// a point's rows twice what an SM must have in flight to hide GMEM's
// latency (440 ns at 32 GB/s an SM: 14 KB).
inline constexpr int64_t kStagedRowsAbove = 32 * 1024;
// And at most this many: two blocks an SM on sm_90a (227 KB each at most),
// one on sm_80 (163 KB). The fuser plans with it (it knows no target); the
// cost model and the writer with stagedRowsLimit, which a target with less
// shared memory a block lowers.
inline constexpr int64_t kStagedRowsMax = 112 * 1024;
// Static shared memory a staging block keeps beside its rows: its reductions'
// partial results, a value a warp (cuda_writer_rows.cpp).
inline constexpr int64_t kStagedRowsReserve = 1024;
// The most a launch stages where a block may take `smemPerBlock` bytes of
// shared memory (MemoryLevel::maxPerBlock of the target's SMEM).
inline int64_t stagedRowsLimit(int64_t smemPerBlock) {
  return smemPerBlock - kStagedRowsReserve < kStagedRowsMax ? smemPerBlock - kStagedRowsReserve : kStagedRowsMax;
}
// Threads a staging block gives its point (a multiple of the warp).
inline constexpr int kStagedRowThreads = 512;

// The axis a tile launch without a stream holds whole and walks by its
// lanes: the longest (32 or more) that one of `computed`'s reductions loops
// over, neither a group axis nor shared out across blocks; empty: none.
std::string heldRowAxis(const Graph& g, const std::set<NodeId>& computed, const std::vector<Axis>& groupAxes,
                        const std::set<std::string>& splitAxes);

struct StagedRow {
  NodeId array = -1;        // the stored array, read at the point's row by the launch's nodes
  int64_t elementBytes = 0;
  int64_t offsetBytes = 0;  // in the block's shared memory (16-byte aligned)
};

struct StagedRows {
  std::string axis;  // the held axis; empty: nothing staged
  int64_t extent = 0;
  std::vector<StagedRow> rows;
  int64_t bytes = 0;  // the shared memory they take
  bool empty() const { return rows.empty(); }
};

// A point's own rows along `axis`: the stored arrays (`stored`) that
// `computed`'s nodes read directly (not through views, gathers or
// scatters; renamings of their innermost axis to `axis` read them
// directly), floats whose innermost axis is `axis` (or so renamed) and whose other axes are
// all group axes, one at least longer than one (a row every point reads
// alike, a layernorm's weights, stays in L1 as it is), lying row-major
// (`rowMajor`: not interleaved in a concatenation). Staged here, or held in
// registers (planning/held_rows.h).
std::vector<NodeId> pointRowArrays(const Graph& g, const std::set<NodeId>& computed, const std::set<NodeId>& stored,
                                   const std::vector<Axis>& groupAxes, const std::string& axis,
                                   const std::function<bool(NodeId)>& rowMajor);

// The rows a launch stages: its point rows along the held axis
// (pointRowArrays), where together they take more than kStagedRowsAbove and
// at most `maxBytes` (stagedRowsLimit); `elementBytes(array)` as stored.
StagedRows stagedRows(const Graph& g, const std::set<NodeId>& computed, const std::set<NodeId>& stored,
                      const std::vector<Axis>& groupAxes, const std::string& heldAxis,
                      const std::function<int64_t(NodeId)>& elementBytes,
                      const std::function<bool(NodeId)>& rowMajor, int64_t maxBytes);

// The bytes a point's rows of `axis` would take in such a launch over
// `members` (the fuser's estimate, before the arrays are known: every
// operand from outside `members` with `axis` innermost, at `elementBytes`
// each element).
int64_t rowBytesAlong(const Graph& g, const std::set<NodeId>& members, const std::string& axis,
                      const std::function<int64_t(NodeId)>& elementBytes);

}  // namespace llmc
