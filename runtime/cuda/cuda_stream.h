// A CUDA stream, and a CUDA graph captured from one: the training step's
// hundreds of launches replayed by one cuGraphLaunch (about 1 us a kernel
// instead of 4 on the H200; the target files' overheads).
#pragma once

#include <cuda.h>

#include <functional>

namespace llmc::cuda {

class Stream {
 public:
  Stream();  // a non-blocking stream in the current context
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  CUstream get() const { return stream_; }
  void synchronize() const;

 private:
  CUstream stream_ = nullptr;
};

// The work `record` submits to `stream`, captured once and replayed.
class CapturedGraph {
 public:
  // Runs `record(stream)` under stream capture: nothing executes until launch().
  CapturedGraph(const Stream& stream, const std::function<void(CUstream)>& record);
  ~CapturedGraph();
  CapturedGraph(const CapturedGraph&) = delete;
  CapturedGraph& operator=(const CapturedGraph&) = delete;

  void launch(const Stream& stream) const;

 private:
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace llmc::cuda
