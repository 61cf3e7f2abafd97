// A host emulation of the cuda backend's team (CudaCoop's device pass,
// src/device/backend/cuda/cuda_coop.cuh): N std::threads play the N threads
// of one thread block, so the portable algorithms (src/device/*.h) can be
// run with a team larger than the host backend's single thread. What it
// checks: how the portable code splits work across a team (every thread
// takes its own elements and LL packs, waits are the leader's and shared
// through barriers, only the leader writes shared counters and FIFO
// positions, every thread reaches every barrier).
//
// As in a kernel, every thread has its own TeamCoop (a kernel's `coop` is a
// local variable of each thread): failed(), the call signature and the
// wait clock are per thread; what a block keeps in shared memory (the
// barrier, the scratch words) lives in the Team all of them point at.
//
// Where a host team cannot mirror the device exactly:
//  - memory model: a barrier here is a mutex and a condition variable, a
//    full happens-before edge among the team; __syncthreads orders memory
//    only at block scope, and the FIFO peers (other "GPUs") are ordered by
//    the leader's __threadfence_system, emulated by a seq_cst fence. Stores
//    a GPU could reorder or keep in L1 that x86-64 keeps in order are not
//    caught.
//  - reduceCopy's 16-byte pack path and LL's v4 line access exist only in
//    the device pass (WEFT_DEVICE_PASS); the team runs the element loop and
//    the host's two 8-byte LL lines, split across threads the same way.
//  - warps: there is no lock-step execution, no warp divergence, no
//    __syncwarp; threads interleave arbitrarily under the OS scheduler,
//    which is a superset of the block's interleavings for code that only
//    synchronises through sync()/agree()/broadcastFromLeader().
//  - scale: teams of a few threads, not 1024; splits that only go wrong
//    with many threads per element range are not exercised.
//  - timeouts: the barrier is bounded too (a thread that never arrives
//    fails the test instead of hanging it); a real __syncthreads that a
//    thread skips is undefined behaviour, here it ends as a timed-out team.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <random>
#include <thread>

#include "device/primitives.h"
#include "device/step_fifo.h"
#include "device/wait_report.h"

namespace weft::device {

// What one block keeps in shared memory, plus the emulation's bookkeeping.
class Team {
 public:
  // abortFlag: shared by every team of a run (the communicator's abort flag);
  // a failed team sets it so the others stop waiting.
  // A barrier gives up after barrierTimeoutNs (0: twice the wait timeout,
  // so that a wait that times out fails the team before its barrier does).
  Team(int size, std::atomic<uint32_t>* abortFlag, int64_t timeoutNs, bool jitter, int64_t barrierTimeoutNs = 0)
      : size_(size),
        abortFlag_(abortFlag),
        timeoutNs_(timeoutNs),
        barrierTimeoutNs_(barrierTimeoutNs > 0 ? barrierTimeoutNs : 2 * timeoutNs),
        jitter_(jitter) {}

  int size() const { return size_; }
  int64_t timeoutNs() const { return timeoutNs_; }
  bool jitter() const { return jitter_; }
  std::atomic<uint32_t>* abortFlag() const { return abortFlag_; }
  bool broken() const { return broken_.load(std::memory_order_acquire); }

  // __syncthreads_and: every thread arrives, each gets the AND of the votes.
  // A barrier that outlasts its timeout breaks the team (a thread
  // skipped it or is stuck): it and every later barrier return false at
  // once, and the run is aborted.
  bool arrive(bool vote) {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_.load(std::memory_order_relaxed)) return false;
    const uint64_t generation = generation_;
    votes_ = votes_ && vote;
    if (++arrived_ == size_) {
      result_ = votes_;
      votes_ = true;
      arrived_ = 0;
      generation_ += 1;
      cv_.notify_all();
      return result_;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(barrierTimeoutNs_);
    while (generation_ == generation && !broken_.load(std::memory_order_relaxed)) {
      if (cv_.wait_until(lock, deadline) == std::cv_status::timeout && generation_ == generation) {
        breakLocked();
        return false;
      }
    }
    if (generation_ != generation) return result_;
    return false;
  }

  // The block's shared words (CudaCoop's scratch).
  int scratch[2] = {0, 0};

  // Direct mode between "processes" (links of reach kReachShared): how the
  // team reaches a posted buffer, and how often (every n-th write, 0: never)
  // the cross-memory kernel refuses a write, which the leader alone sees.
  DirectWay sharedWay = DirectWay::kPointer;
  // Whether the team reaches a peer's posted input to read it in place
  // (direct reads between "processes"), as a mapped segment would be.
  bool sharedReads = true;
  int refuseEvery = 0;
  int crossWrites = 0;  // the leader's count

 private:
  void breakLocked() {
    broken_.store(true, std::memory_order_release);
    if (abortFlag_ != nullptr) abortFlag_->store(1, std::memory_order_release);
    cv_.notify_all();
  }

  const int size_;
  std::atomic<uint32_t>* const abortFlag_;
  const int64_t timeoutNs_;
  const int64_t barrierTimeoutNs_;
  const bool jitter_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool votes_ = true;
  bool result_ = true;
  std::atomic<bool> broken_{false};
};

// One thread's view of its team, with CudaCoop's interface and device-pass
// semantics. Direct: whether the team declares direct mode (kHasDirect),
// with peers reached by plain pointers (one address space, as the host
// team's threads do).
template <bool Direct = false>
class TeamCoopT {
 public:
  static constexpr bool kHasTree = true;
  static constexpr bool kHasOneShot = true;
  static constexpr bool kHasLL = true;
  static constexpr bool kLLSumOnly = false;
  static constexpr bool kHasLL128 = true;
  static constexpr bool kLL128Trees = true;
  static constexpr bool kHasDirect = Direct;
  static constexpr bool kHasDirectRead = Direct;
  // Several threads: each keeps its own copy of the FIFO positions.
  static constexpr bool kOneThread = false;
  static constexpr bool kHasExchange = true;
  static constexpr bool kHasHierRing = true;
  static constexpr bool kExtraSumOnly = false;

  TeamCoopT(Team& team, int threadRank) : team_(team), rank_(threadRank), rng_(0x9e3779b9u * (threadRank + 1)) {}

  int threadRank() {
    maybeJitter();
    return rank_;
  }
  int size() const { return team_.size(); }
  // The leader is slowed now and then (when the team jitters) at the points
  // where it alone writes shared state (FIFO positions in a Primitives'
  // destructor, counters in advance()): a thread that reads that state
  // without a barrier after the write then sees the old value.
  bool leader() {
    maybeJitter();
    return rank_ == 0;
  }
  void sync() {
    if (!team_.arrive(true)) failBroken();
  }
  // __threadfence_system: the leader's fence before it publishes a counter.
  void publishFence() { std::atomic_thread_fence(std::memory_order_seq_cst); }

  int broadcastFromLeader(int value) {
    if (rank_ == 0) team_.scratch[0] = value;
    sync();
    const int shared = team_.scratch[0];
    sync();
    return shared;
  }

  // As CudaCoop: the leader waits (a failure of its own makes it report 0),
  // the team learns the outcome through broadcastFromLeader. A broken team
  // fails every wait.
  template <typename Ready, typename Culprit>
  bool waitUntil(Ready&& ready, Culprit&& culprit) {
    int ok = 1;
    if (rank_ == 0) ok = failed_ ? 0 : leaderWait(ready, culprit) && !failed_;
    ok = broadcastFromLeader(ok);
    if (team_.broken()) ok = 0;
    if (!ok) failed_ = true;
    return ok != 0;
  }

  // Each thread waits for its own condition (its LL packs), with the same
  // abort and timeout checks as the leader's waits.
  template <typename Ready, typename Culprit>
  bool waitEach(Ready&& ready, Culprit&& culprit) {
    if (failed_) return false;
    const bool ok = leaderWait(ready, culprit) != 0;
    if (!ok) failed_ = true;
    return ok;
  }

  // Emulated threads own whole LL128 lines (ll128_line.h's host form): a
  // wait of their own, as waitEach.
  template <typename Ready, typename Culprit>
  bool waitWarp(Ready&& ready, Culprit&& culprit) {
    return waitEach(ready, culprit);
  }
  // Each emulated thread stores its lines whole: nothing to converge.
  void warpSync() const {}

  // __syncthreads_and.
  bool agree(bool ok) {
    ok = team_.arrive(ok);
    if (team_.broken()) failBroken();
    if (!ok) failed_ = true;
    return ok;
  }

  bool failed() const { return failed_; }
  const WaitFailureInfo& failure() const { return failure_; }

  void setCallSignature(const CallSignature& sig) {
    call_ = sig;
    callHash_ = callHash(sig);
  }
  uint32_t callSignatureHash() const { return callHash_; }
  const CallSignature& callSignature() const { return call_; }
  // Leader only (called from a `ready` the leader runs), as in CudaCoop:
  // the mismatch fails the leader's wait, and the run is aborted.
  void recordMismatch(const WaitSite& site, const CallSignature& theirs) {
    if (failed_) return;
    failed_ = true;
    failure_.kind = WaitFailure::kMismatch;
    failure_.site = site;
    failure_.theirs = theirs;
    failure_.ours = call_;
    if (team_.abortFlag() != nullptr) team_.abortFlag()->store(1, std::memory_order_release);
  }

  // Direct mode (Direct only; prims_simple.h asks these for links of reach
  // kReachShared): every "process" is this one, so a posted address is
  // usable as is, and a cross-memory write is a memcpy, or a refusal that
  // leaves the bytes in the slot (Team::refuseEvery). A posted input is
  // read in place unless the team is told it cannot reach it
  // (Team::sharedReads), as a process that may not map a segment.
  DirectPost describeDirect(const void* base, uint64_t) const {
    return DirectPost{static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base)), 0, 0, 0, uint64_t{1} << 32};
  }
  bool resolveRead(int, const DirectPost& post, uint64_t* addr) const {
    *addr = post.base;
    return team_.sharedReads;
  }
  DirectWay resolveDirect(int, const DirectPost& post, uint64_t* addr) const {
    *addr = post.base;
    return team_.sharedWay;
  }
  bool crossWrite(int, const void* from, uint64_t remote, void* slot, uint64_t bytes) {
    team_.crossWrites += 1;
    if (team_.refuseEvery > 0 && team_.crossWrites % team_.refuseEvery == 0) {
      std::memcpy(slot, from, bytes);
      return false;
    }
    std::memcpy(reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), from, bytes);
    return true;
  }

 private:
  // CudaCoop's leaderWait and keepWaiting: poll, and every 64 polls check
  // the abort flag and the clock. Polls yield: a team of N threads per rank
  // shares two cores with every other rank's team.
  template <typename Ready, typename Culprit>
  int leaderWait(Ready& ready, Culprit& culprit) {
    int64_t start = 0;
    for (uint32_t polls = 0; !ready(); ++polls) {
      std::this_thread::yield();
      if ((polls & 63) != 63) continue;
      if (team_.broken()) return fail(WaitFailure::kAborted, culprit(), 0);
      if (team_.abortFlag() != nullptr && team_.abortFlag()->load(std::memory_order_relaxed) != 0)
        return fail(WaitFailure::kAborted, culprit(), 0);
      const int64_t now = nowNs();
      if (start == 0) start = now;
      if (now - start > team_.timeoutNs()) {
        if (team_.abortFlag() != nullptr) team_.abortFlag()->store(1, std::memory_order_release);
        return fail(WaitFailure::kTimeout, culprit(), now - start);
      }
    }
    return 1;
  }

  int fail(WaitFailure kind, WaitSite site, int64_t waited) {
    if (failure_.kind == WaitFailure::kNone) {
      failure_.kind = kind;
      failure_.site = site;
      failure_.waitedNs = waited;
    }
    return 0;
  }

  void failBroken() {
    failed_ = true;
    fail(WaitFailure::kTimeout, WaitSite{-1, 0, -1}, 0);
  }

  void maybeJitter() {
    if (!team_.jitter()) return;
    const uint32_t draw = rng_();
    if ((draw & 63) == 0) std::this_thread::yield();
    if ((draw & 1023) == 1) std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  static int64_t nowNs() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  Team& team_;
  const int rank_;
  std::minstd_rand rng_;
  WaitFailureInfo failure_;
  CallSignature call_{0, 0};
  uint32_t callHash_ = 0;
  bool failed_ = false;
};

using TeamCoop = TeamCoopT<false>;
using TeamCoopDirect = TeamCoopT<true>;

}  // namespace weft::device
