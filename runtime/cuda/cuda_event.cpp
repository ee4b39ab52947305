#include "cuda_event.h"

namespace llmc::cuda {

Event::Event() { check(driver().eventCreate(&event_, CU_EVENT_DEFAULT), "cuEventCreate"); }

Event::~Event() { driver().eventDestroy(event_); }

void Event::record(CUstream stream) { check(driver().eventRecord(event_, stream), "cuEventRecord"); }

void Event::recordInGraph(CUstream stream) {
  check(driver().eventRecordWithFlags(event_, stream, CU_EVENT_RECORD_EXTERNAL), "cuEventRecordWithFlags(external)");
}

void Event::makeWait(CUstream stream) const {
  check(driver().streamWaitEvent(stream, event_, 0), "cuStreamWaitEvent");
}

void Event::synchronize() const { check(driver().eventSynchronize(event_), "cuEventSynchronize"); }

float Event::elapsedMilliseconds(const Event& start, const Event& end) {
  end.synchronize();
  float milliseconds = 0;
  check(driver().eventElapsedTime(&milliseconds, start.event_, end.event_), "cuEventElapsedTime");
  return milliseconds;
}

}  // namespace llmc::cuda
