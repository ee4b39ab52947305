#include "large_stack.h"

#include <pthread.h>

#include <exception>

namespace llmc::capi {

void runWithLargeStack(const std::function<void()>& work, size_t stackBytes) {
  struct Call {
    const std::function<void()>* work;
    std::exception_ptr failure;
  } call{&work, nullptr};
  auto body = [](void* p) -> void* {
    Call* c = static_cast<Call*>(p);
    try {
      (*c->work)();
    } catch (...) {
      c->failure = std::current_exception();
    }
    return nullptr;
  };
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stackBytes);
  pthread_t thread;
  const bool started = pthread_create(&thread, &attr, body, &call) == 0;
  pthread_attr_destroy(&attr);
  if (!started) {
    work();
    return;
  }
  pthread_join(thread, nullptr);
  if (call.failure) std::rethrow_exception(call.failure);
}

}  // namespace llmc::capi
