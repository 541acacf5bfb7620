// CUDA graph capture and replay: stream capture -> cuGraphInstantiateWithFlags -> cuGraphUpload,
// replays with cuGraphLaunch, all through the process-wide driver table.
#include "ropejit/internal/cuda_graph.h"

#include <vector>

#include "ropejit/error.h"

namespace ropejit {

namespace {

/// Runs `release` with `ctx` current, ignoring errors: destructors may run after the driver
/// deinitialized at process exit.
template <typename F>
void in_context_noexcept(const CudaDriver& d, CUcontext ctx, F release) noexcept {
  CUcontext current = nullptr;
  const bool push = d.cuCtxGetCurrent(&current) == CUDA_SUCCESS && current != ctx &&
                    d.cuCtxPushCurrent(ctx) == CUDA_SUCCESS;
  release();
  if (push) d.cuCtxPopCurrent(&current);
}

}  // namespace

// ---------------------------------------------------------------- CudaStream

CudaStream::CudaStream(const CudaDriver& d, CUcontext ctx) : d_(d), ctx_(ctx) {
  CudaContextScope scope(d_, ctx_);
  d_.check(d_.cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
}

CudaStream::~CudaStream() {
  if (!stream_) return;
  in_context_noexcept(d_, ctx_, [&] { d_.cuStreamDestroy(stream_); });
}

void CudaStream::synchronize() const {
  CudaContextScope scope(d_, ctx_);
  d_.check(d_.cuStreamSynchronize(stream_), "cuStreamSynchronize");
}

// ---------------------------------------------------------------- CudaGraph

CudaGraph::CudaGraph(const CudaDriver& d, CUcontext ctx, CUstream stream, const std::function<void()>& record)
    : d_(d), ctx_(ctx) {
  if (!stream)
    throw Error(Status::invalid_argument,
                "CUDA graph capture: stream null (the default stream) is not allowed: pass a created stream");
  CudaContextScope scope(d_, ctx_);
  d_.check(d_.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture");
  try {
    record();
  } catch (...) {
    // End the capture whatever happened, so the stream is usable again.
    CUgraph partial = nullptr;
    d_.cuStreamEndCapture(stream, &partial);
    if (partial) d_.cuGraphDestroy(partial);
    throw;
  }
  if (CUresult r = d_.cuStreamEndCapture(stream, &graph_); r != CUDA_SUCCESS) {
    release();  // an invalidated capture returns no graph; anything returned is dropped
    d_.check(r, "cuStreamEndCapture");
  }
  try {
    d_.check(d_.cuGraphInstantiate(&exec_, graph_, 0), "cuGraphInstantiateWithFlags");
    // Upload now, so the first replay pays no one-time setup.
    d_.check(d_.cuGraphUpload(exec_, stream), "cuGraphUpload");
  } catch (...) {
    release();
    throw;
  }
}

CudaGraph::~CudaGraph() { release(); }

void CudaGraph::release() noexcept {
  if (!exec_ && !graph_) return;
  in_context_noexcept(d_, ctx_, [&] {
    if (exec_) d_.cuGraphExecDestroy(exec_);
    if (graph_) d_.cuGraphDestroy(graph_);
  });
  exec_ = nullptr;
  graph_ = nullptr;
}

void CudaGraph::launch(CUstream stream) const {
  CudaContextScope scope(d_, ctx_);
  d_.check(d_.cuGraphLaunch(exec_, stream), "cuGraphLaunch");
}

double CudaGraph::time_replay_us(CUstream stream, CUevent start, CUevent stop) const {
  CudaContextScope scope(d_, ctx_);
  d_.check(d_.cuEventRecord(start, stream), "cuEventRecord");
  d_.check(d_.cuGraphLaunch(exec_, stream), "cuGraphLaunch");
  d_.check(d_.cuEventRecord(stop, stream), "cuEventRecord");
  d_.check(d_.cuEventSynchronize(stop), "cuEventSynchronize");
  float ms = 0.0f;
  d_.check(d_.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
  return double(ms) * 1e3;
}

size_t CudaGraph::node_count() const {
  CudaContextScope scope(d_, ctx_);
  size_t count = 0;
  d_.check(d_.cuGraphGetNodes(graph_, nullptr, &count), "cuGraphGetNodes");
  return count;
}

size_t CudaGraph::kernel_node_count() const {
  CudaContextScope scope(d_, ctx_);
  size_t count = 0;
  d_.check(d_.cuGraphGetNodes(graph_, nullptr, &count), "cuGraphGetNodes");
  std::vector<CUgraphNode> nodes(count);
  if (count) d_.check(d_.cuGraphGetNodes(graph_, nodes.data(), &count), "cuGraphGetNodes");
  size_t kernels = 0;
  for (size_t i = 0; i < count; ++i) {
    CUgraphNodeType type{};
    d_.check(d_.cuGraphNodeGetType(nodes[i], &type), "cuGraphNodeGetType");
    kernels += type == CU_GRAPH_NODE_TYPE_KERNEL;
  }
  return kernels;
}

}  // namespace ropejit
