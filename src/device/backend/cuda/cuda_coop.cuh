// The cuda backend's team: one thread block per channel.
//
// Waits are done by thread 0 and shared with the block through a barrier:
// thread 0's acquire load followed by __syncthreads orders every thread's
// later reads after the producer's writes. Before thread 0 publishes a
// counter, __threadfence_system after the barrier makes the whole block's
// writes visible system-wide first (peers may be other GPUs, the host proxy
// or another process). Spins are bounded: they poll the communicator's abort
// flag (host-mapped memory) and give up when it is set.
#pragma once

#include "device/atomics.h"
#include "device/primitives.h"

namespace weft::device {

class CudaCoop {
 public:
  // Tree AllReduce is instantiated in every reducing kernel (communicators
  // across nodes get double binary trees). One-shot is not yet: the planner
  // keeps cuda communicators within a node on rings.
  static constexpr bool kHasTree = true;
  static constexpr bool kHasOneShot = false;
  // scratch: at least 2 ints of the block's shared memory.
  __device__ CudaCoop(const uint32_t* abortFlag, int* scratch) : abortFlag_(abortFlag), scratch_(scratch) {}

  __host__ __device__ int threadRank() const {
#if WEFT_DEVICE_PASS
    return static_cast<int>(threadIdx.x);
#else
    return 0;
#endif
  }
  __host__ __device__ int size() const {
#if WEFT_DEVICE_PASS
    return static_cast<int>(blockDim.x);
#else
    return 1;
#endif
  }
  __host__ __device__ bool leader() const { return threadRank() == 0; }
  __host__ __device__ void sync() {
#if WEFT_DEVICE_PASS
    __syncthreads();
#endif
  }
  __host__ __device__ void publishFence() {
#if WEFT_DEVICE_PASS
    __threadfence_system();
#endif
  }

  __host__ __device__ int broadcastFromLeader(int value) {
#if WEFT_DEVICE_PASS
    if (leader()) scratch_[0] = value;
    __syncthreads();
    int shared = scratch_[0];
    __syncthreads();
    return shared;
#else
    return value;
#endif
  }

  template <typename Ready, typename Culprit>
  __host__ __device__ bool waitUntil(Ready&& ready, Culprit&& /*culprit*/) {
    int ok = 1;
    if (leader()) {
      if (failed_) {
        ok = 0;
      } else {
        for (uint32_t polls = 0; !ready(); ++polls) {
          if ((polls & 1023) == 1023 && abortFlag_ != nullptr && loadRelaxed(abortFlag_) != 0) {
            ok = 0;
            break;
          }
        }
      }
    }
    ok = broadcastFromLeader(ok);
    if (!ok) failed_ = true;
    return ok != 0;
  }

  __host__ __device__ bool failed() const { return failed_; }

 private:
  const uint32_t* abortFlag_;
  int* scratch_;
  bool failed_ = false;
};

}  // namespace weft::device
