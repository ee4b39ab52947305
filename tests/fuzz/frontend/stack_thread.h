// One thread with a stack of a given size that runs the work it is handed,
// one piece at a time, while the caller waits. llmc-libfuzz-frontend compiles
// every input on one, with llmc-compile's 1 GiB (tools/llmc_compile.cpp): the
// passes recurse along the graph. It is made once because AddressSanitizer
// clears the shadow of a thread's whole stack when the thread ends, which for
// a thread per input costs more than the compile.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>

namespace llmc::fuzz {

class StackThread {
 public:
  explicit StackThread(size_t stackBytes);  // aborts if the thread cannot start
  StackThread(const StackThread&) = delete;
  StackThread& operator=(const StackThread&) = delete;

  // Runs `work` on the thread and returns when it is done.
  void run(const std::function<void()>& work);

 private:
  static void* loop(void* self);

  std::mutex mutex_;
  std::condition_variable changed_;
  const std::function<void()>* work_ = nullptr;  // handed over, not yet done
};

}  // namespace llmc::fuzz
