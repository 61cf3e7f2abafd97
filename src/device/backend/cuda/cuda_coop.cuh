// The cuda backend's team: one thread block per channel.
//
// Waits are done by thread 0 and shared with the block through a barrier:
// thread 0's acquire load followed by __syncthreads orders every thread's
// later reads after the producer's writes. Before thread 0 publishes a
// counter, __threadfence_system after the barrier makes the whole block's
// writes visible system-wide first (peers may be other GPUs, the host proxy
// or another process). Spins are bounded: they poll the communicator's abort
// flag (host-mapped memory) and give up when it is set, announce long waits
// in the block's WaitReport and give up after the timeout
// (device/wait_report.h).
#pragma once

#include <chrono>

#include "device/atomics.h"
#include "device/primitives.h"
#include "device/wait_report.h"
#include "device/windows.h"

namespace weft::device {

class CudaCoop {
 public:
  // Tree AllReduce is instantiated in every reducing kernel (communicators
  // across nodes get double binary trees). One-shot (2 to 4 ranks of a
  // node, under Simple and LL) in the sum's kernels and the data-only kernel
  // only, as the exchanges below (kExtraSumOnly), and taken only where
  // NCCL_ALGO names it until it has been measured on a GPU.
  static constexpr bool kHasTree = true;
  static constexpr bool kHasOneShot = true;
  // LL (prims_ll.h, 16-byte lines): ring and tree kernels under LL too, for
  // the data-only collectives and the sum only: LL for every op would
  // triple the kernels' build time (the planner keeps the other ops on
  // Simple: PlanInputs::llSumOnly).
  static constexpr bool kHasLL = true;
  static constexpr bool kLLSumOnly = true;
  // LL128 (prims_ll128.h, eight lanes of 16 bytes per 128-byte line): ring
  // kernels for the same calls as LL, taken only where NCCL_PROTO names
  // LL128 and every link keeps a warp's 128-byte store whole
  // (PlanInputs::ll128Possible), until it is measured on a GPU. Not trees:
  // their LL128 form would add a quarter to the float kernels' build (71 s
  // -> 89 s of CPU; PlanInputs::ll128Trees).
  static constexpr bool kHasLL128 = true;
  static constexpr bool kLL128Trees = false;
  // Direct mode. Ranks of one process on one GPU: the cuda p2p transport
  // marks those links kReachAddress (a peer's user buffer is a pointer this
  // kernel can write). Processes on one node (kReachShared, cuda p2p links
  // between processes): only outputs inside registered windows
  // (device/windows.h): the consumer names its window and offset, the
  // producer writes through its CUDA IPC mapping of the peer's window; any
  // other buffer, and every other link, stays on the slots. No cross-memory
  // attach on a GPU: crossWrite is never asked (resolveDirect never says so).
  static constexpr bool kHasDirect = true;
  // Direct reads (prims_simple.h, directReadSend) are portable code, but
  // off in kernels until they have run on a GPU: the first sends copy.
  static constexpr bool kHasDirectRead = false;
  // A block of threads: each keeps its own copy of the FIFO positions.
  static constexpr bool kOneThread = false;
  __host__ __device__ DirectPost describeDirect(const void* base, uint64_t bytes) const {
    return describeWindow(windows_, base, bytes);
  }
  __host__ __device__ DirectWay resolveDirect(int peer, const DirectPost& post, uint64_t* addr) const {
    return resolveWindow(windows_, peer, post, addr);
  }
  __host__ __device__ bool crossWrite(int, const void*, uint64_t, void*, uint64_t) const { return false; }
  // Butterfly, halving-doubling, the hierarchical ring and the 2D torus (and
  // one-shot, above): in the sum's kernels and the data-only kernel
  // (AllGather by doubling, one-shot AllGather and Broadcast) only, as LL:
  // every op would add a third to the kernels' build time (the planner keeps
  // the other ops on rings and trees: PlanInputs::extraSumOnly).
  static constexpr bool kHasExchange = true;
  static constexpr bool kHasHierRing = true;
  static constexpr bool kExtraSumOnly = true;
  // scratch: at least 2 ints of the block's shared memory. report: this
  // block's report in host-mapped memory (null: none); timeoutNs 0: no timeout.
  // windows: the communicator's registered windows in device memory (null:
  // none). Host-callable too: the host pass of this class (one thread, a
  // host clock) is how tests check the wait logic without a GPU.
  __host__ __device__ CudaCoop(uint32_t* abortFlag, int* scratch, WaitReport* report = nullptr, int64_t timeoutNs = 0,
                               const WindowTable* windows = nullptr)
      : abortFlag_(abortFlag), scratch_(scratch), report_(report), timeoutNs_(timeoutNs), windows_(windows) {}

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
  // The lanes of a warp converge (prims_ll128.h: a line's eight stores
  // must issue together).
  __host__ __device__ void warpSync() {
#if WEFT_DEVICE_PASS
    __syncwarp();
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

  // `ready` (run by the leader) may record a mismatched call: the wait then
  // fails for the whole block although the data is there.
  template <typename Ready, typename Culprit>
  __host__ __device__ bool waitUntil(Ready&& ready, Culprit&& culprit) {
    int ok = 1;
    if (leader()) ok = failed_ ? 0 : leaderWait(ready, culprit) && !failed_;
    ok = broadcastFromLeader(ok);
    if (!ok) failed_ = true;
    return ok != 0;
  }

  // Each thread waits for a condition of its own (its LL lines), with the
  // same abort and timeout checks as the leader's waits. Several threads of
  // a block may announce a wait in the block's one report word; none clears
  // it when its own wait ends, since others may still be waiting: agree(),
  // which follows every slice's waits, clears it once all are over (and
  // never over a failure).
  template <typename Ready, typename Culprit>
  __host__ __device__ bool waitEach(Ready&& ready, Culprit&& culprit) {
    if (failed_) return false;
    WaitClock clock;
    for (uint32_t polls = 0; !ready(); ++polls)
      if ((polls & 1023) == 1023 && !keepWaiting(&clock, culprit())) {
        failed_ = true;
        return false;
      }
    if (clock.announced) announced_ = true;
    return true;
  }

  // A wait of a warp's threads for their LL128 lines together: every lane
  // calls it the same number of times (prims_ll128.h), the warp polls until
  // `ready` holds on all its lanes (only the flag lane of a line can see its
  // flag), and lane 0 checks the abort flag and the clock for the warp, so
  // the lanes leave together, as the votes need. The host pass (one thread)
  // is waitEach.
  template <typename Ready, typename Culprit>
  __host__ __device__ bool waitWarp(Ready&& ready, Culprit&& culprit) {
#if WEFT_DEVICE_PASS
    constexpr unsigned kAll = 0xffffffffu;
    if (__any_sync(kAll, failed_ ? 1 : 0)) {
      failed_ = true;
      return false;
    }
    const bool laneZero = (threadIdx.x & 31) == 0;
    WaitClock clock;
    for (uint32_t polls = 0; !__all_sync(kAll, ready() ? 1 : 0); ++polls) {
      if ((polls & 1023) != 1023) continue;
      const int keep = laneZero ? (keepWaiting(&clock, culprit()) ? 1 : 0) : 1;
      if (__shfl_sync(kAll, keep, 0) == 0) {
        failed_ = true;
        return false;
      }
    }
    if (clock.announced) announced_ = true;  // cleared by agree(), as waitEach's
    return true;
#else
    return waitEach(ready, culprit);
#endif
  }

  // Whether every thread of the block succeeded (a barrier: every thread's
  // earlier reads are complete when it returns). When a thread's wait was
  // announced (waitEach, waitWarp) and every thread succeeded, the leader
  // takes the announcement back: no thread of the block waits any more. One
  // barrier when nothing was announced or failed, three otherwise.
  __host__ __device__ bool agree(bool ok) {
#if WEFT_DEVICE_PASS
    if (__syncthreads_count((!ok || announced_) ? 1 : 0) != 0) {
      ok = __syncthreads_and(ok ? 1 : 0) != 0;
      const bool any = __syncthreads_or(announced_ ? 1 : 0) != 0;
      if (ok && any && leader()) endAnnouncedWait();
    }
#else
    if (ok && announced_) endAnnouncedWait();
#endif
    announced_ = false;
    if (!ok) failed_ = true;
    return ok;
  }

  __host__ __device__ bool failed() const { return failed_; }

  // The call being run (device/signature.h); word 0: unchecked.
  __host__ __device__ void setCallSignature(const CallSignature& sig) {
    call_ = sig;
    callHash_ = callHash(sig);
  }
  __host__ __device__ uint32_t callSignatureHash() const { return callHash_; }
  __host__ __device__ const CallSignature& callSignature() const { return call_; }
  // Leader only: a step from site.peer belongs to another call. Recorded like
  // a timeout (the host names both calls), and the block fails its waits.
  __host__ __device__ __noinline__ void recordMismatch(const WaitSite& site, const CallSignature& theirs) {
    if (failed_) return;
    failed_ = true;
    if (report_ != nullptr) {
      storeRelaxed(&report_->theirs[0], theirs.word);
      storeRelaxed(&report_->theirs[1], theirs.count);
      storeRelaxed(&report_->ours[0], call_.word);
      storeRelaxed(&report_->ours[1], call_.count);
      storeRelaxed(&report_->waitedNs, int64_t{0});
      storeRelaxed(&report_->kind, static_cast<uint32_t>(WaitFailure::kMismatch));
      storeRelease(&report_->word, packWaitWord(WaitState::kFailed, site));
    }
    if (abortFlag_ != nullptr) storeRelease(abortFlag_, 1u);
  }

 private:
  // The spin is inlined at every wait site; what runs every 1024 polls is
  // one out-of-line function per translation unit (inlining it everywhere
  // cost the kernel build a third more time).
  template <typename Ready, typename Culprit>
  __host__ __device__ int leaderWait(Ready& ready, Culprit& culprit) {
    WaitClock clock;
    for (uint32_t polls = 0; !ready(); ++polls)
      if ((polls & 1023) == 1023 && !keepWaiting(&clock, culprit())) return 0;
    // Not over a mismatch `ready` recorded: that record is the failure the
    // host must find.
    if (clock.announced && !failed_) endAnnouncedWait();
    return 1;
  }

  struct WaitClock {
    uint64_t start = 0;
    bool announced = false;
  };

  // The abort flag, then the clock (the first check starts it): announce
  // the wait after kWaitAnnounceNs, fail it after the timeout.
  __host__ __device__ __noinline__ bool keepWaiting(WaitClock* clock, WaitSite site) {
    if (abortFlag_ != nullptr && loadRelaxed(abortFlag_) != 0) return false;
    const uint64_t now = globalTimerNs();
    if (clock->start == 0) clock->start = now;
    const int64_t waited = static_cast<int64_t>(now - clock->start);
    if (timeoutNs_ > 0 && waited > timeoutNs_) {
      recordTimeout(site, waited);
      return false;
    }
    if (!clock->announced && report_ != nullptr && waited > kWaitAnnounceNs) {
      storeRelaxed(&report_->word, packWaitWord(WaitState::kWaiting, site));
      clock->announced = true;
    }
    return true;
  }

  __host__ __device__ __noinline__ void endAnnouncedWait() {
    storeRelaxed(&report_->word, packWaitWord(WaitState::kIdle, WaitSite{-1, 0, -1}));
  }

  // The record first, released by the word; then the abort flag, so the
  // host finds the record once it sees the flag, and the other blocks stop.
  __host__ __device__ void recordTimeout(const WaitSite& site, int64_t waited) {
    if (report_ != nullptr) {
      storeRelaxed(&report_->waitedNs, waited);
      storeRelaxed(&report_->kind, static_cast<uint32_t>(WaitFailure::kTimeout));
      storeRelease(&report_->word, packWaitWord(WaitState::kFailed, site));
    }
    if (abortFlag_ != nullptr) storeRelease(abortFlag_, 1u);
  }

  __host__ __device__ static uint64_t globalTimerNs() {
#if WEFT_DEVICE_PASS
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
#else
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
            .count());
#endif
  }

  uint32_t* abortFlag_;
  int* scratch_;
  WaitReport* report_;
  int64_t timeoutNs_;
  const WindowTable* windows_;
  CallSignature call_{0, 0};
  uint32_t callHash_ = 0;
  bool failed_ = false;
  bool announced_ = false;  // this thread announced a wait agree() has not taken back
};

}  // namespace weft::device
