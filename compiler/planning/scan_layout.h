// A running sum or maximum (Op::Scan) as its launch runs it: the blocked
// scan, one pass along the scanned axis carrying each line's aggregate.
//
// A line is one position of the result's other axes; the scan along it is
// associative, so its positions can be taken in rounds:
//
//   for each round (slices x perSlice positions of every line of the block)
//     each thread: its perSlice adjacent positions, scanned in registers
//     the slices' totals scanned across the line in shared memory
//     each position: carry + the totals of the slices before + its own prefix
//     carry += the round's total
//
// so the work is the elements once (linear, where the masked form the front
// end writes visits every pair of positions), and the bytes are the inputs
// read and the result written once. The layout is data: the cost model
// prices it (scanCost) and the CUDA writer writes it
// (codegen/cuda_writer_scan.cpp) from the same ScanLayout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "planning/cost_model.h"
#include "planning/fusion.h"
#include "planning/target.h"

namespace llmc {

struct ScanLayout {
  NodeId scan = -1;
  std::string along;        // the result's scanned axis
  int64_t positions = 0;    // its extent
  std::vector<Axis> lines;  // the result's other axes, in its order
  int64_t lineCount = 1;
  // The scanned axis is the result's innermost: a line's slices lie side by
  // side in the block's threads (adjacent threads, adjacent runs of
  // positions); else the lines do (adjacent threads, adjacent lines).
  bool positionsInnermost = false;
  int linesPerBlock = 1;
  int slices = 1;     // threads sharing a line, each taking perSlice adjacent positions a round
  int perSlice = 1;
  int64_t blocks = 1;
  int64_t rounds = 1;  // per block: ceil(positions / (slices x perSlice))
  // Registers a monoid element takes: 1 for a sum or maximum, 2 for a
  // linear recurrence's pair (a, b) (ir.h's isLinearScan) or a user
  // operator's (present, x) (isMonoidScan). A thread's work
  // a point, its registers and the totals in shared memory grow with them.
  int parts = 1;
  int threads() const { return linesPerBlock * slices; }
};

// The kernel's scan (its only anchor), or -1.
NodeId scanOf(const Graph& graph, const Kernel& kernel);

// The layout of `scan` on the target: enough threads to fill the device
// where the lines allow (slices where the lines are few), lines side by side
// for coalesced accesses where the scanned axis is not innermost.
// The positions a thread takes a round are those the cost model prices
// cheapest for the kernel's bytes.
ScanLayout scanLayout(const Graph& graph, const Kernel& kernel, NodeId scan, const Target& target,
                      const CostOptions& options);
// The same for a scan of `input` whose result is `result`, along its axis
// `along` (before the scan node exists: ir/masked_sums.h); `scan` is left -1.
ScanLayout scanLayout(const Type& input, const Type& result, const std::string& along, const Target& target,
                      const CostOptions& options);

// The kernel's time under its layout: the inputs and the result once through
// GMEM, or the rounds one after another (each a load's latency and the
// slices' barriers), whichever is longer; plus the launch.
KernelCost scanCost(const Graph& graph, const Kernel& kernel, const ScanLayout& layout, const Target& target,
                    const CostOptions& options);

// The same for a scan of `input` to `result` before fusion (ir/masked_sums.h
// prices the forms of a running sum with it): `input` read and `result`
// written once.
double scanSeconds(const Type& input, const Type& result, const ScanLayout& layout, const Target& target,
                   const CostOptions& options);

// The partition text of a scan kernel (partitionText): its lines and rounds.
std::string scanPartitionText(const ScanLayout& layout);

}  // namespace llmc
