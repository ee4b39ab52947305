#include "stack_thread.h"

#include <pthread.h>

#include <cstdio>
#include <cstdlib>

namespace llmc::fuzz {

StackThread::StackThread(size_t stackBytes) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stackBytes);
  pthread_t thread;
  if (pthread_create(&thread, &attr, loop, this) != 0) {
    std::fprintf(stderr, "llmc-libfuzz-frontend: cannot start a thread with %zu bytes of stack\n", stackBytes);
    std::abort();
  }
  pthread_attr_destroy(&attr);
  // Never joined: it waits for work until the process exits.
  pthread_detach(thread);
}

void StackThread::run(const std::function<void()>& work) {
  std::unique_lock<std::mutex> lock(mutex_);
  work_ = &work;
  changed_.notify_all();
  changed_.wait(lock, [&] { return work_ == nullptr; });
}

void* StackThread::loop(void* self) {
  StackThread& t = *static_cast<StackThread*>(self);
  std::unique_lock<std::mutex> lock(t.mutex_);
  for (;;) {
    t.changed_.wait(lock, [&] { return t.work_ != nullptr; });
    // The caller holds no lock while the work runs; it waits for work_ to clear.
    const std::function<void()>* work = t.work_;
    lock.unlock();
    (*work)();
    lock.lock();
    t.work_ = nullptr;
    t.changed_.notify_all();
  }
}

}  // namespace llmc::fuzz
