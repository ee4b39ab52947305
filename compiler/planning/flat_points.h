// Flat points: a plain elementwise launch whose outputs and reads share one
// layout, its threads taking 8 consecutive elements of the flattened index.
//
// A tile launch's threads take 8 adjacent points along the last group axis
// only where that axis' size and tile are multiples of 8: a row of 16 bytes
// of bf16 starts 16-byte aligned. At other sizes (a classifier's logits
// gradient [n v], v = 50257) each point loaded and stored 2 bytes at a time,
// too few bytes an access and in flight to reach the memory's bandwidth.
// Where every output is laid out over the group axes in their order and every
// array read along the last of them has it contiguous, the flattened index is
// the same offset in all of them: 8 consecutive elements from a multiple of 8
// are one 16-byte access in each, whatever the rows' length. The block keeps
// the partition's count of blocks, each taking an equal run of the flattened
// index (its tiles' points, evened out); the run's last 8 past the end load
// the last element again and store only what is inside.
// The cost model (planning/thread_loads.cpp) counts 16 bytes a thread in
// flight for them; the CUDA writer (codegen/cuda_writer_flat.cpp) writes them.
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "ir/ir.h"

namespace llmc {

// Whether a plain launch (no stream, no looped or split axes: the caller's to
// check) over `groupAxes` computing `computed`, reading the arrays `stored`
// and storing `outputs`, takes flat points: every output a value (not a view)
// of a float type over exactly the group axes in their order, stored in
// bf16 or f32 (`elementBytes` 2 or 4), one of them in bf16 (a warp's 4-byte
// accesses already fill whole sectors); every array read that varies along
// the last group axis contiguous along it; no concatenation whose parts the
// last group axis picks.
bool takesFlatPoints(const Graph& g, const std::set<NodeId>& computed, const std::set<NodeId>& stored,
                     const std::vector<NodeId>& outputs, const std::vector<Axis>& groupAxes,
                     const std::function<int64_t(NodeId)>& elementBytes);

}  // namespace llmc
