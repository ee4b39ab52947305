// Work run on a thread of its own with a large stack: the compiler's passes
// recurse along the graph, so a diagram of a long chain needs more stack than
// a host program's thread may have (llmc-compile and llmc-run run on such a
// thread too). A library cannot choose its caller's stack, so it makes one.
#pragma once

#include <cstddef>
#include <functional>

namespace llmc::capi {

// Runs `work` on a new thread with `stackBytes` of stack reserved (pages are
// committed only as used) and waits for it; what it throws is rethrown here.
// Where no such thread can be started, runs it on the calling thread.
void runWithLargeStack(const std::function<void()>& work, size_t stackBytes = size_t{1} << 30);

}  // namespace llmc::capi
