#include "cuda_stream.h"

#include "cuda_driver.h"

namespace llmc::cuda {

Stream::Stream() { check(driver().streamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"); }

Stream::~Stream() { driver().streamDestroy(stream_); }

void Stream::synchronize() const { check(driver().streamSynchronize(stream_), "cuStreamSynchronize"); }

CapturedGraph::CapturedGraph(const Stream& stream, const std::function<void(CUstream)>& record) {
  // Thread-local capture: another thread's unrelated driver calls (the JIT's
  // loads) do not invalidate it.
  check(driver().streamBeginCapture(stream.get(), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  try {
    record(stream.get());
  } catch (...) {
    CUgraph abandoned = nullptr;
    driver().streamEndCapture(stream.get(), &abandoned);
    if (abandoned) driver().graphDestroy(abandoned);
    throw;
  }
  check(driver().streamEndCapture(stream.get(), &graph_), "cuStreamEndCapture");
  CUresult instantiated = driver().graphInstantiateWithFlags(&exec_, graph_, 0);
  if (instantiated != CUDA_SUCCESS) {
    driver().graphDestroy(graph_);
    check(instantiated, "cuGraphInstantiateWithFlags");
  }
}

CapturedGraph::~CapturedGraph() {
  if (exec_) driver().graphExecDestroy(exec_);
  if (graph_) driver().graphDestroy(graph_);
}

void CapturedGraph::launch(const Stream& stream) const {
  check(driver().graphLaunch(exec_, stream.get()), "cuGraphLaunch");
}

}  // namespace llmc::cuda
