// The device memory plan of a module: every stored array that the caller does
// not place itself gets an offset in one arena, and two arrays share bytes
// only when no launch sees both alive, or when a launch writes one over the
// other in place as the other's last use. Lifetimes come from the launch order:
// an array lives from the first launch that touches it to the last (inputs
// from before the first, outputs until after the last), so a step's
// activations, its backward's temporaries and its gradients' partial sums
// reuse the same memory, with no allocation while the step runs. Each array
// takes the lowest offset free over its lifetime; the arrays are placed in
// each of a few orders and the smallest arena is kept, then, in a small
// module, improved by swapping arrays in that order.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "codegen/module.h"

namespace llmc {

struct MemoryPlan {
  static constexpr int64_t kOutside = -1;
  // Per buffer of the module: its byte offset in the arena, or kOutside for
  // the buffers the caller places.
  std::vector<int64_t> offsets;
  int64_t arenaBytes = 0;     // what the arena needs
  int64_t separateBytes = 0;  // what the same arrays would take allocated one by one
  int64_t peakLiveBytes = 0;  // the most bytes alive at one launch: the least any plan needs
  int64_t peakLaunch = -1;    // where that is (-1: before the first launch)
  std::vector<std::pair<int, int>> inPlace;  // (output, input) buffers at the same offset, written in place
  // (output, input) buffers both placed by the caller that the caller may give
  // the same memory: the one launch that writes the output writes it in place
  // over the input at the input's last use (an optimizer's w_next over w).
  std::vector<std::pair<int, int>> callerInPlace;
  // Per buffer: the launches it lives from and to (inclusive; -1 before the
  // first, launches.size() after the last).
  std::vector<std::pair<int64_t, int64_t>> lifetimes;
};

// `placedByCaller[i]`: buffer i lives outside the arena (parameters,
// gradients, token batches the caller owns). A buffer that lies within
// another (BufferDesc::within) is placed with it, kOutside itself, and its
// launches keep the other alive. Offsets are multiples of
// `alignment` bytes (TMA wants 16; 256 keeps every array on its own sectors).
MemoryPlan planMemory(const CudaModule& module, const std::vector<bool>& placedByCaller, int64_t alignment = 256);

// planMemory's flags for a caller that places every graph input and output
// itself (a trainer's parameters, gradients and optimizer state).
std::vector<bool> graphInputsAndOutputs(const CudaModule& module);

// Whether `plan` lets the caller give the graph output named `output` the
// memory of the graph input named `input` (MemoryPlan::callerInPlace).
bool callerMayShare(const CudaModule& module, const MemoryPlan& plan, const std::string& output, const std::string& input);

// The plan in words (llmc-compile --emit memory): the arena against the
// arrays one by one and the peak, then the `top` largest arrays alive at the
// peak with the launches that write them first and read them last.
std::string describeMemoryPlan(const CudaModule& module, const MemoryPlan& plan, int top = 20);

}  // namespace llmc
