// Rows held in registers.
//
// A tile launch without a stream whose lanes walk a reduced axis (a warp a
// point, codegen/cuda_writer_tile.cpp) makes a pass over the point's rows
// for each reduction over that axis and one more for the outputs along it:
// a layernorm's forward four (the residual sum stored, its mean, its
// variance, the normalised output), its backward three. Each pass read its
// rows from GMEM again, and at GPT-2 d48's 1600 channels (two rows of
// 3.2 KB a point, 64 warps an SM: more than L1) those reads came back from
// L2: 74 us a launch where its bytes take 52 (step_kernels_bench, H200,
// 2026-12-05). A lane touches the same positions of a row in every pass
// (lane * 8 + k * 8 * lanes, k = 0 .. chunks - 1), so it can load them once,
// all of them at the start of the point (every load in flight together), into
// registers indexed by the unrolled k, and every pass reads them there: no
// barrier, no shared memory. Rows read by a single pass gain nothing and are
// left as they are; the rows read by most passes are held first, within a
// register budget. Staged rows (planning/staged_rows.h) take precedence: a
// row long enough to stage is far past the budget.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// The registers a thread gives its held rows. With some 40 of its own work,
// a thread of such a launch then takes about 104, and an SM keeps some 600
// threads (65536 registers) resident, each with its rows' loads in flight
// together at the start of a point: GPT-2 d48's layernorm, 7 spans of 8
// channels of two bf16 rows a lane, 56 registers, 7 KB in flight a warp.
inline constexpr int64_t kHeldRowRegisters = 64;

struct HeldRow {
  NodeId array = -1;
  int passes = 0;          // the lane passes that read it
  int64_t registers = 0;   // a thread's, for its chunks
};

struct HeldRows {
  std::string axis;         // the lanes' axis; empty: nothing held
  int64_t extent = 0;       // its positions
  int64_t chunks = 0;       // a lane's: spans of 8 positions (vectorised) or single positions
  bool vectorised = false;  // a lane takes 8 adjacent positions a chunk (16-byte loads)
  std::vector<HeldRow> rows;
  int64_t registers = 0;
  bool empty() const { return rows.empty(); }
  bool holds(NodeId array) const;
};

// The lane passes of a launch over `laneAxis`: one per reduction in
// `computed` over it, one for `outputs` along it (stored in one loop each,
// but all reading the same positions); the number of them that read `array`
// (through `computed`'s elementwise nodes and views, not through another reduction
// over the axis, which is a pass of its own).
int lanePassesReading(const Graph& g, const std::set<NodeId>& computed, const std::vector<NodeId>& outputs,
                      const std::string& laneAxis, NodeId array);

// The rows a launch holds: of `rows` (the point's own rows along `laneAxis`,
// pointRowArrays), those read by two passes or more, the most read first,
// within kHeldRowRegisters. `lanes`: the lanes a point takes; `vectorised`:
// they take 8 adjacent positions a chunk; `elementBytes(array)` as stored
// (a bf16 chunk of 8 is held as 4 registers, packed; an f32 one as 8; a
// single position as one).
HeldRows heldRows(const Graph& g, const std::set<NodeId>& computed, const std::vector<NodeId>& outputs,
                  const std::vector<NodeId>& rows, const std::string& laneAxis, int lanes, bool vectorised,
                  const std::function<int64_t(NodeId)>& elementBytes);

}  // namespace llmc
