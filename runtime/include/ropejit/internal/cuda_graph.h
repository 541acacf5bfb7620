#pragma once
// CUDA graph capture and replay through the driver table (cuda_driver.h): launches recorded
// once on a private non-blocking stream, then replayed with one cuGraphLaunch each. The tuner
// times decode-size kernels this way (a replay submits all its launches at once, so the time is
// the kernels', not the CPU's launch rate), and tests use it to prove Kernel::launch capturable.
#include <cstddef>
#include <functional>

#include "ropejit/internal/cuda_driver.h"

namespace ropejit {

/// A non-blocking stream (no implicit ordering with the legacy default stream), destroyed with
/// this object.
class CudaStream {
 public:
  /// Creates the stream in `ctx`; throws Error(backend_error) naming the failing call.
  CudaStream(const CudaDriver& d, CUcontext ctx);
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  /// The stream handle (pass as a launch's `void* stream`).
  CUstream get() const { return stream_; }
  /// Waits for everything enqueued on the stream.
  void synchronize() const;

 private:
  const CudaDriver& d_;
  CUcontext ctx_;
  CUstream stream_ = nullptr;
};

/// An instantiated CUDA graph of the work one callback enqueued on a stream.
class CudaGraph {
 public:
  /// Captures what `record()` enqueues on `stream` (which must be a non-default stream of
  /// `ctx`), instantiates the graph and uploads it to `stream`. Capture is thread-local: other
  /// threads' driver calls go on normally, while a disallowed call on this thread (an allocation,
  /// a synchronization) fails the capture. Throws Error(backend_error) naming the failing call;
  /// an exception from `record` ends the capture and propagates.
  CudaGraph(const CudaDriver& d, CUcontext ctx, CUstream stream, const std::function<void()>& record);
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  /// Enqueues one replay on `stream` (asynchronous).
  void launch(CUstream stream) const;
  /// Microseconds of one replay on `stream` between `start` and `stop` (events of `ctx`, owned
  /// by the caller), waited for.
  double time_replay_us(CUstream stream, CUevent start, CUevent stop) const;
  /// Nodes of the captured graph.
  size_t node_count() const;
  /// Kernel nodes of the captured graph (one per captured launch).
  size_t kernel_node_count() const;

 private:
  void release() noexcept;

  const CudaDriver& d_;
  CUcontext ctx_;
  CUgraph graph_ = nullptr;
  CUgraphExec exec_ = nullptr;
};

}  // namespace ropejit
