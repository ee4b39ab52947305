// Transposed reads of a tile launch: values it reads from a stored array whose
// contiguous axis is not the one its threads walk.
//
// A tile launch's adjacent threads take adjacent points along its last group
// axis (the outputs' innermost, so that their stores coalesce). An array read
// at those points with another axis contiguous (the classifier's logits
// [n v] read to store their gradient [v n]) would have each lane of a warp
// touch its own 32-byte sector: 2 bytes used of 32. Such a read is staged: the
// block's threads first copy the array's tile into shared memory walking its
// contiguous axis, then read it there at their points. The cost model
// (planning/cost_model.cpp) prices those tiles' shared memory and barrier,
// and the CUDA writer (codegen/cuda_writer_tile.cpp) stages exactly these.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analysis/strided_view.h"
#include "ir/ir.h"

namespace llmc {

struct TransposedRead {
  NodeId value = -1;         // what the launch's nodes read: the stored array, or a view of it
  AffineLayout layout;       // where its positions lie in the stored array
  std::string contiguous;    // its axis of stride 1, walked by adjacent threads when staged
  std::vector<Axis> axes;    // its axes, in the launch's order of group axes (the threads' last)
  int64_t elementBytes = 0;  // of the stored array
  int64_t pitch = 0;         // elements a row of its tile in shared memory (transposedRowPitch)
  int64_t tileElements = 0;  // its tile in shared memory, rows padded
};

// The shared memory a block's staged tiles take.
int64_t transposedTileBytes(const std::vector<TransposedRead>& reads);

// The most a block may stage: the static shared memory of a kernel (48 KiB).
constexpr int64_t kTransposedTileBytesMax = 48 * 1024;

// The reads of a plain tile launch (no stream, no looped or split axes) over
// `groupAxes` (those its outputs have, in order: the last is the threads')
// tiled by `tiles`, that are staged. `computed`: the launch's nodes;
// `stored`: the arrays it reads from GMEM; `outputs`: what it stores (one
// that is a view of a stored array is read as it is stored). A read qualifies when all its axes
// are group axes, it varies along the threads' axis, and its contiguous axis
// is another group axis tiled 8 or more (a 16-byte run of bf16 at least).
// `elementBytes(array)`: the bytes of an element of a stored array. A
// tile's rows in shared memory run along the threads' axis, padded to an
// odd number of 4-byte words where that makes the contiguous axis' stride
// odd, so that threads walking it write to different banks.
std::vector<TransposedRead> transposedReads(const Graph& g, const std::set<NodeId>& computed,
                                            const std::set<NodeId>& stored, const std::vector<NodeId>& outputs,
                                            const std::vector<Axis>& groupAxes,
                                            const std::map<std::string, int64_t>& tiles,
                                            const std::function<int64_t(NodeId)>& elementBytes);

}  // namespace llmc
