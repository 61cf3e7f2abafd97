// Helpers for tests that need a GPU: skip when none is usable, check CUDA
// calls, move data between host vectors and device buffers, run ranks on GPU 0.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "nccl.h"

#define WEFT_REQUIRE_GPU()                                                   \
  do {                                                                       \
    int weft_ndev_ = 0;                                                      \
    if (cudaGetDeviceCount(&weft_ndev_) != cudaSuccess || weft_ndev_ == 0) { \
      cudaGetLastError();                                                    \
      GTEST_SKIP() << "no usable CUDA device";                               \
    }                                                                        \
  } while (0)

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call << ": " << cudaGetErrorString(cudaGetLastError())
#define NCCL_OK(call, comm) ASSERT_EQ((call), ncclSuccess) << #call << ": " << ncclGetLastError(comm)

namespace weft::test {

// cudaFree waits for the whole device, so a rank thread that frees a buffer
// between collectives waits for a peer's kernel that is waiting for this
// thread's next launch: a deadlock. Rank threads (onRanks) therefore keep
// their buffers until their body is over and their stream idle.
inline thread_local std::vector<void*>* deferredFrees = nullptr;

inline void freeDevice(void* ptr) {
  if (ptr == nullptr) return;
  if (deferredFrees != nullptr)
    deferredFrees->push_back(ptr);
  else
    cudaFree(ptr);
}

// Runs a rank thread's body with its frees deferred, then frees once the
// rank's stream is idle (its collectives are all launched and done).
inline void withDeferredFrees(cudaStream_t stream, const std::function<void()>& body) {
  std::vector<void*> frees;
  deferredFrees = &frees;
  body();
  cudaStreamSynchronize(stream);
  deferredFrees = nullptr;
  for (void* p : frees) cudaFree(p);
}

// Runs body(rank, comm, stream) on n ranks as threads sharing GPU 0, each
// with its own non-blocking stream.
inline void onRanks(int n, const std::function<void(int, ncclComm_t, cudaStream_t)>& body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      CUDA_OK(cudaSetDevice(0));
      ncclComm_t comm = nullptr;
      NCCL_OK(ncclCommInitRank(&comm, n, id, r), nullptr);
      cudaStream_t stream;
      CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      withDeferredFrees(stream, [&] { body(r, comm, stream); });
      cudaStreamDestroy(stream);
      NCCL_OK(ncclCommDestroy(comm), nullptr);
    });
  }
  for (auto& t : threads) t.join();
}

// Rank threads meet here (C++17 has no std::barrier). Captures need it: a
// synchronous call on the legacy stream (cudaMemcpy, as DeviceBuffer's) from
// one rank thread while another captures a graph on the same GPU may
// invalidate that capture, whatever its capture mode; so every rank finishes
// its set-up before any begins capturing, and ends capturing before any
// replays, synchronizes or reads back.
class RankBarrier {
 public:
  explicit RankBarrier(int n) : n_(n) {}
  void arriveAndWait() {
    std::unique_lock<std::mutex> lock(mutex_);
    const int generation = generation_;
    if (++arrived_ == n_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  int n_;
  int arrived_ = 0;
  int generation_ = 0;
};

// A device buffer of T freed on scope exit.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    if (cudaMalloc(&ptr_, std::max<size_t>(count, 1) * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
  }
  ~DeviceBuffer() { freeDevice(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  T* get() const { return ptr_; }
  // From pageable memory cudaMemcpy may return before the DMA lands; the
  // collectives run on non-blocking streams, which do not wait for it.
  void upload(const std::vector<T>& host) {
    cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
    cudaStreamSynchronize(cudaStreamLegacy);
  }
  std::vector<T> download() const {
    std::vector<T> host(count_);
    cudaMemcpy(host.data(), ptr_, count_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }

 private:
  T* ptr_ = nullptr;
  size_t count_;
};

}  // namespace weft::test
