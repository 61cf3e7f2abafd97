// Buffers of the communicator's kind: host memory on the host backend,
// device memory and a stream on the cuda backend (when built with CUDA).
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "perf/perf.h"
#include "weft.h"

#if WEFT_PERF_CUDA
#include <cuda_runtime.h>
#endif

namespace weft::perf {

Buffers::Buffers(ncclComm_t comm, size_t sendBytes, size_t recvBytes, int registerMode, bool privateBuffers)
    : comm_(comm), registerMode_(registerMode) {
  weftBackend_t backend = weftBackendHost;
  if (weftCommGetBackend(comm, &backend) != ncclSuccess) return;
  device_ = backend == weftBackendCuda;
#if WEFT_PERF_CUDA
  if (device_ && cudaStreamCreateWithFlags(reinterpret_cast<cudaStream_t*>(&stream_), cudaStreamNonBlocking) != 0)
    return;
#else
  if (device_) return;  // built without CUDA: cannot drive device buffers
#endif
  // ncclMemAlloc gives memory of the communicator's kind (host backend: a
  // shareable segment); --private-buffers plain host memory instead.
  private_ = privateBuffers && !device_;
  auto alloc = [&](void** p, size_t bytes) {
    bytes = std::max<size_t>(bytes, 1);
    if (private_) {
      *p = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
      return;
    }
    if (ncclMemAlloc(p, bytes) != ncclSuccess) *p = nullptr;
  };
  alloc(&send_, sendBytes);
  alloc(&recv_, recvBytes);
  void* buffers[2] = {send_, recv_};
  const size_t sizes[2] = {std::max<size_t>(sendBytes, 1), std::max<size_t>(recvBytes, 1)};
  for (int i = 0; i < 2 && registerMode_ != 0; ++i) {
    if (buffers[i] == nullptr) continue;
    const ncclResult_t rc =
        registerMode_ == 1 ? ncclCommRegister(comm, buffers[i], sizes[i], &handles_[i])
                           : ncclCommWindowRegister(comm, buffers[i], sizes[i],
                                                    reinterpret_cast<ncclWindow_t*>(&handles_[i]), NCCL_WIN_DEFAULT);
    if (rc != ncclSuccess) {
      handles_[i] = nullptr;
      send_ = recv_ = nullptr;  // not ok(): the caller reports it (the memory stays allocated: a failed run exits)
      return;
    }
  }
  // Touch everything once so no page fault is timed.
  std::vector<char> zeros(std::max(sendBytes, recvBytes), 0);
  if (send_) upload(send_, zeros.data(), sendBytes);
  if (recv_) upload(recv_, zeros.data(), recvBytes);
}

Buffers::~Buffers() {
  void* buffers[2] = {send_, recv_};
  for (int i = 0; i < 2; ++i) {
    if (handles_[i] == nullptr) continue;
    if (registerMode_ == 1)
      ncclCommDeregister(comm_, handles_[i]);
    else
      ncclCommWindowDeregister(comm_, static_cast<ncclWindow_t>(handles_[i]));
  }
  for (void* p : buffers) {
    if (p == nullptr) continue;
    if (private_)
      std::free(p);
    else
      ncclMemFree(p);
  }
#if WEFT_PERF_CUDA
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
#endif
}

void Buffers::upload(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
#if WEFT_PERF_CUDA
  if (device_) {
    cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void Buffers::download(void* dst, const void* src, size_t bytes) const {
  if (bytes == 0) return;
#if WEFT_PERF_CUDA
  if (device_) {
    cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
    return;
  }
#endif
  std::memcpy(dst, src, bytes);
}

void Buffers::sync() const {
#if WEFT_PERF_CUDA
  if (device_) cudaStreamSynchronize(static_cast<cudaStream_t>(stream_));
#endif
}

double replayAsGraph(const Buffers& b, int replays, ncclResult_t (*body)(void*), void* context, ncclResult_t* rc,
                     std::string* why) {
#if WEFT_PERF_CUDA
  if (!b.onDevice()) {
    *why = "CUDA graphs need the cuda backend (the communicator runs on the host backend)";
    return -1;
  }
  auto stream = static_cast<cudaStream_t>(b.stream());
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) {
    *why = std::string("cudaStreamBeginCapture: ") + cudaGetErrorString(cudaGetLastError());
    return -1;
  }
  *rc = body(context);
  const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
  if (*rc != ncclSuccess) return -1;
  if (ended != cudaSuccess || cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess) {
    *why = std::string("capturing the iterations: ") + cudaGetErrorString(cudaGetLastError());
    if (graph) cudaGraphDestroy(graph);
    return -1;
  }
  const auto t0 = std::chrono::steady_clock::now();
  cudaError_t err = cudaSuccess;
  for (int i = 0; i < replays && err == cudaSuccess; ++i) err = cudaGraphLaunch(exec, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  if (err != cudaSuccess) {
    *why = std::string("replaying the graph: ") + cudaGetErrorString(err);
    return -1;
  }
  return us / replays;
#else
  (void)b, (void)replays, (void)body, (void)context, (void)rc;
  *why = "this weft-perf was built without CUDA: CUDA graphs need the cuda backend";
  return -1;
#endif
}

}  // namespace weft::perf
