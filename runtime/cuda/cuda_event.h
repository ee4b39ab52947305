// A CUDA event: a marker in a stream, for timing work on the GPU and for
// ordering work across streams.
#pragma once

#include "cuda_driver.h"

namespace llmc::cuda {

class Event {
 public:
  Event();  // in the current context
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  void record(CUstream stream = nullptr);
  // Under stream capture of `stream`: an event-record node in the graph, so
  // that every replay records the event (to time parts of a graph). record()
  // under capture makes no node; it only marks a point for makeWait.
  void recordInGraph(CUstream stream);
  // Work submitted to `stream` after this waits for the work recorded before
  // the event (under stream capture: a dependency between the two streams).
  void makeWait(CUstream stream) const;
  // Waits until the work recorded before the event has finished.
  void synchronize() const;

  // Milliseconds of GPU time between two recorded events; waits for `end`.
  static float elapsedMilliseconds(const Event& start, const Event& end);

 private:
  CUevent event_ = nullptr;
};

}  // namespace llmc::cuda
