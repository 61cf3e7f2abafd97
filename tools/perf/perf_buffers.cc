// Buffers of the communicator's kind: host memory on the host backend,
// device memory and a stream on the cuda backend (when built with CUDA).
#include <algorithm>
#include <cstring>
#include <vector>

#include "perf/perf.h"
#include "weft.h"

#if WEFT_PERF_CUDA
#include <cuda_runtime.h>
#endif

namespace weft::perf {

Buffers::Buffers(ncclComm_t comm, size_t sendBytes, size_t recvBytes) {
  weftBackend_t backend = weftBackendHost;
  if (weftCommGetBackend(comm, &backend) != ncclSuccess) return;
  device_ = backend == weftBackendCuda;
#if WEFT_PERF_CUDA
  if (device_ && cudaStreamCreateWithFlags(reinterpret_cast<cudaStream_t*>(&stream_), cudaStreamNonBlocking) != 0)
    return;
#else
  if (device_) return;  // built without CUDA: cannot drive device buffers
#endif
  // ncclMemAlloc gives memory of the communicator's kind.
  if (ncclMemAlloc(&send_, sendBytes > 0 ? sendBytes : 1) != ncclSuccess) send_ = nullptr;
  if (ncclMemAlloc(&recv_, recvBytes > 0 ? recvBytes : 1) != ncclSuccess) recv_ = nullptr;
  // Touch everything once so no page fault is timed.
  std::vector<char> zeros(std::max(sendBytes, recvBytes), 0);
  if (send_) upload(send_, zeros.data(), sendBytes);
  if (recv_) upload(recv_, zeros.data(), recvBytes);
}

Buffers::~Buffers() {
  if (send_) ncclMemFree(send_);
  if (recv_) ncclMemFree(recv_);
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

}  // namespace weft::perf
