// Runs independent pieces of work on the machine's cores. Each index goes to
// one thread, in contiguous runs, and writes only its own results, so what
// a caller computes does not depend on how many threads there are; nor does
// what it throws (the exception of the lowest index that threw).
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace llmc {

// The threads parallelFor uses: the machine's cores, at least one.
inline size_t workerThreads() { return std::max<size_t>(1, std::thread::hardware_concurrency()); }

// work(i) for every i in [0, count), on up to workerThreads() threads (one,
// the caller's, where `count` is under `perThreadMin`: a thread's start
// costs more than a little work). A run that throws stops there; the
// exception of the lowest index that threw is rethrown.
template <class Work>
void parallelFor(size_t count, size_t perThreadMin, const Work& work) {
  const size_t threads = std::min(workerThreads(), count / std::max<size_t>(1, perThreadMin));
  if (threads <= 1) {
    for (size_t i = 0; i < count; ++i) work(i);
    return;
  }
  std::vector<std::exception_ptr> thrown(threads);
  auto run = [&](size_t part) {
    const size_t begin = count * part / threads, end = count * (part + 1) / threads;
    try {
      for (size_t i = begin; i < end; ++i) work(i);
    } catch (...) {
      thrown[part] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (size_t part = 1; part < threads; ++part) helpers.emplace_back(run, part);
    run(0);
  }  // (the helpers join here)
  for (const std::exception_ptr& e : thrown)
    if (e) std::rethrow_exception(e);
}

}  // namespace llmc
