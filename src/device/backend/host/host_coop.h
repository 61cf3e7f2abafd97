// The host backend's team: one thread per channel. size() is the constant 1,
// so the portable data loops compile to plain contiguous loops.
//
// Waiting: spin, yield, then sleep (common/backoff.h), checking now and then
// the communicator's abort flag, the proxy's network-failure flag, the
// per-wait timeout and whether the peer process waited on still exists. A failed wait makes every later wait fail
// at once, so the algorithm runs to its end quickly and the caller reports
// the first failure, naming the peer.
#pragma once

#include <sys/types.h>

#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/core_share.h"
#include "common/process.h"
#include "device/backend/host/host_direct.h"
#include "device/primitives.h"
#include "device/wait_report.h"

namespace weft::device {

struct HostWaitConfig {
  const std::atomic<uint32_t>* abortFlag = nullptr;
  const std::atomic<uint32_t>* netFailed = nullptr;   // set by the proxy when the network failed
  const std::atomic<uint32_t>* peerFailed = nullptr;  // set when another rank reports a failure
  // Called between polls while waiting: the host backend lends the waiting
  // thread to the proxy (network progress) instead of leaving it all to the
  // proxy thread. Null when the communicator has no network links.
  // Returns whether it moved anything (then the wait does not back off).
  bool (*help)(void* context) = nullptr;
  void* helpContext = nullptr;
  int spinCount = kDefaultSpinCount;
  int64_t timeoutNs = 0;  // 0: no timeout
  int64_t peerCheckNs = 200000000;
  // Whether a thread whose waits keep being handed off on its own core moves
  // to another (common/core_share.h); off when ranks outnumber cores.
  bool spreadCores = false;
  const pid_t* peerPids = nullptr;  // per rank: a local process to watch, or 0
  int32_t nranks = 0;
  int32_t rank = -1;  // this rank (the communicator's)
  HostDirect* direct = nullptr;  // direct mode between processes; null: slots only
};

class HostCoop {
 public:
  explicit HostCoop(const HostWaitConfig& config) : config_(config) {}

  static constexpr bool kHasTree = true;
  static constexpr bool kHasOneShot = true;
  static constexpr bool kHasLL = true;
  static constexpr bool kLLSumOnly = false;
  // LL128, emulated with a release per line (ll128_line.h): ring and tree,
  // for the sum and the data-only calls (run_work.h).
  static constexpr bool kHasLL128 = true;
  static constexpr bool kLL128Trees = true;
  // Ring calls in direct mode: peers' user buffers are addressable (threads),
  // mapped or reached by cross-memory attach (processes; see HostDirect).
  static constexpr bool kHasDirect = true;
  // In direct calls, links within the process, and AllReduce's links to
  // processes that map the input's segment, also let the consumer read the
  // producer's input in place (prims_simple.h, directReadSend).
  static constexpr bool kHasDirectRead = true;
  // One thread a rank: primitives work on the FIFO ends in place (prims_simple.h).
  static constexpr bool kOneThread = true;
  static constexpr bool kHasExchange = true;
  static constexpr bool kHasHierRing = true;
  static constexpr bool kExtraSumOnly = false;  // the exchanges, hierarchical ring and torus for every op
  static constexpr int threadRank() { return 0; }
  static constexpr int size() { return 1; }
  static constexpr bool leader() { return true; }
  void sync() {}
  // One thread wrote the data and publishes it: program order is enough.
  void publishFence() {}
  int broadcastFromLeader(int value) { return value; }

  DirectPost describeDirect(const void* base, uint64_t bytes) const {
    if (config_.direct != nullptr) return config_.direct->describe(base, bytes);
    return DirectPost{static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base)), 0, 0, 0,
                      static_cast<uint64_t>(thisProcessId()) << 32};
  }
  DirectWay resolveDirect(int peer, const DirectPost& post, uint64_t* addr) const {
    if (config_.direct != nullptr) return config_.direct->resolve(peer, post, addr);
    *addr = post.base;
    return post.owner >> 32 == static_cast<uint64_t>(thisProcessId()) ? DirectWay::kPointer : DirectWay::kSlot;
  }
  bool resolveRead(int peer, const DirectPost& post, uint64_t* addr) const {
    if (config_.direct != nullptr) return config_.direct->resolveRead(peer, post, addr);
    *addr = post.base;
    return post.owner >> 32 == static_cast<uint64_t>(thisProcessId());
  }
  bool crossWrite(int peer, const void* from, uint64_t remote, void* slot, uint64_t bytes) const {
    if (config_.direct != nullptr) return config_.direct->crossWrite(peer, from, remote, slot, bytes);
    std::memcpy(slot, from, bytes);
    return false;
  }

  // `ready` may record a mismatched call (recordMismatch): the wait then
  // fails although the data is there.
  template <typename Ready, typename Culprit>
  bool waitUntil(Ready&& ready, Culprit&& culprit) {
    if (failure_.kind != WaitFailure::kNone) return false;
    if (ready()) return failure_.kind == WaitFailure::kNone;
    return waitSlow(ready, culprit);
  }

  // A wait of one thread for a condition of its own (an LL line): the team
  // is this thread, so it is waitUntil.
  template <typename Ready, typename Culprit>
  bool waitEach(Ready&& ready, Culprit&& culprit) {
    return waitUntil(ready, culprit);
  }
  // A wait of the threads sharing LL128 lines (a warp on a GPU): here one
  // thread owns its lines whole.
  template <typename Ready, typename Culprit>
  bool waitWarp(Ready&& ready, Culprit&& culprit) {
    return waitUntil(ready, culprit);
  }
  // The lanes sharing a line store it together (a warp on a GPU): one thread here.
  void warpSync() const {}
  // Whether every thread of the team succeeded: here, this one.
  bool agree(bool ok) const { return ok && !failed(); }

  bool failed() const { return failure_.kind != WaitFailure::kNone; }
  const WaitFailureInfo& failure() const { return failure_; }

  // The call being run (device/signature.h): what producers sign and
  // consumers expect. Word 0: unchecked.
  void setCallSignature(const CallSignature& sig) {
    call_ = sig;
    callHash_ = callHash(sig);
  }
  uint32_t callSignatureHash() const { return callHash_; }
  const CallSignature& callSignature() const { return call_; }
  // A consumer found a step of another call from `site.peer`.
  void recordMismatch(const WaitSite& site, const CallSignature& theirs) {
    if (failure_.kind != WaitFailure::kNone) return;
    failure_.kind = WaitFailure::kMismatch;
    failure_.site = site;
    failure_.theirs = theirs;
    failure_.ours = call_;
  }

 private:
  template <typename Ready, typename Culprit>
  bool waitSlow(Ready& ready, Culprit& culprit) {
    Backoff backoff(config_.spinCount);
    // The clock is read only once spinning is over: most waits end sooner.
    int64_t start = 0;
    int64_t nextPeerCheck = 0;
    for (uint32_t polls = 1;; ++polls) {
      if (!config_.help || !config_.help(config_.helpContext)) backoff.pause();
      if (ready()) {
        if (config_.spreadCores) noteCoreShare(backoff, start, culprit);
        return failure_.kind == WaitFailure::kNone;
      }
      if ((polls & 255) != 0 && !backoff.pastSpinning()) continue;
      const int64_t now = nowNs();
      if (start == 0) {
        start = now;
        nextPeerCheck = now + config_.peerCheckNs;
      }
      if (config_.abortFlag && config_.abortFlag->load(std::memory_order_relaxed))
        return fail(WaitFailure::kAborted, culprit(), start);
      if (config_.netFailed && config_.netFailed->load(std::memory_order_relaxed))
        return fail(WaitFailure::kNetwork, culprit(), start);
      if (config_.peerFailed && config_.peerFailed->load(std::memory_order_relaxed))
        return fail(WaitFailure::kPeerFailed, culprit(), start);
      if (config_.timeoutNs > 0 && now - start > config_.timeoutNs)
        return fail(WaitFailure::kTimeout, culprit(), start);
      if (now >= nextPeerCheck && config_.peerPids) {
        nextPeerCheck = now + config_.peerCheckNs;
        WaitSite site = culprit();
        if (site.peer >= 0 && site.peer < config_.nranks && !processAlive(config_.peerPids[site.peer]))
          return fail(WaitFailure::kPeerExited, site, start);
      }
    }
  }

  // `start`: when spinning ended (the clock is read once it has).
  template <typename Culprit>
  void noteCoreShare(const Backoff& backoff, int64_t start, Culprit& culprit) const {
    if (!backoff.pastSpinning() || start == 0) return CoreShare::noteSpinWait();
    if (CoreShare::noteYieldWait(backoff.yields(), nowNs() - start))
      CoreShare::streakComplete(culprit().peer < config_.rank);
  }

  bool fail(WaitFailure kind, WaitSite site, int64_t start) {
    failure_.kind = kind;
    failure_.site = site;
    failure_.waitedNs = nowNs() - start;
    return false;
  }

  const HostWaitConfig& config_;
  WaitFailureInfo failure_;
  CallSignature call_{0, 0};
  uint32_t callHash_ = 0;
};

}  // namespace weft::device
