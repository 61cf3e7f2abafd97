// The proxy: one progress engine per communicator that moves network
// connections' FIFO slots between the local data path and the network
// (DESIGN.md §6). A data path cannot drive a NIC by itself (a kernel cannot
// call into a network library; a host worker should not block in one), so it
// only fills and drains FIFOs, and the engine posts the sends and receives.
//
// Work arrives as operations: "move N more steps on this link", queued per
// link by the launching thread in the order the data path will use the
// steps. progressOnce() makes one pass over every link with work; the thread
// loops it while work is outstanding and sleeps on a condition otherwise.
// Tests call progressOnce() directly with no thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "transport/net/net_link.h"

namespace weft::proxy {

struct ProxyOp {
  uint64_t id = 0;     // the launch it belongs to (for messages)
  uint64_t steps = 0;  // FIFO steps this operation moves on its link
};

class ProgressEngine {
 public:
  // failedFlag is set (to 1) when a network call fails, so waiting data paths
  // stop at once; abortFlag stops all progress.
  ProgressEngine(int rank, const std::atomic<uint32_t>* abortFlag, std::atomic<uint32_t>* failedFlag);
  ~ProgressEngine();  // stops the thread; links stay with their owners
  ProgressEngine(const ProgressEngine&) = delete;
  ProgressEngine& operator=(const ProgressEngine&) = delete;

  // Queues an operation on a link. Any thread; ops on one link run in the
  // order they were posted.
  void post(transport::NetLink* link, const ProxyOp& op);
  // One pass: posts every send and receive the FIFOs allow and completes
  // every finished request. Returns whether anything moved; a network
  // failure is returned, remembered (failure()) and flagged.
  Result<bool> progressOnce();
  // progressOnce unless another thread is in it right now (then false at
  // once). Host data paths call this while they wait on the network, which
  // saves the hand-off to the proxy thread on every step.
  Result<bool> tryProgress();
  // Starts the thread that loops progressOnce (idempotent).
  void start();
  // True when every posted operation is complete.
  bool idle() const;
  // Waits until idle, the network failed, or timeoutNs passed (0: forever).
  // A collective returns once its data is in the FIFOs; the sends may still
  // be under way, so whoever tears the links down waits here first.
  bool waitIdle(int64_t timeoutNs) const;
  Status failure() const;
  // What is still in flight, link by link ("send to rank 3 (...) on channel
  // 1: 5 of 8 steps sent, 4 acknowledged, 6 published by the data path"), for
  // messages about transfers that do not finish.
  std::string describePending();

 private:
  struct PendingOp {
    uint64_t id;
    uint64_t endStep;  // complete once the link's completed count reaches it
  };
  struct LinkWork {
    transport::NetLink* link;
    std::deque<PendingOp> ops;
  };

  void takeIncoming();
  Result<bool> progressSend(transport::NetLink& link);
  Result<bool> progressRecv(transport::NetLink& link);
  Status netFailure(const transport::NetLink& link, const char* what, ncclResult_t code) const;
  void retireOps(LinkWork& work);
  void loop();

  Result<bool> progressLocked();

  const int rank_;
  std::mutex progressMutex_;  // held by whoever runs a pass (thread, helper, test)
  const std::atomic<uint32_t>* abortFlag_;
  std::atomic<uint32_t>* failedFlag_;
  std::vector<LinkWork> active_;  // proxy-owned: links with operations

  std::atomic<int64_t> outstanding_{0};  // operations posted and not yet complete
  mutable std::mutex mutex_;             // guards incoming_, stop_, failure_
  std::condition_variable wake_;
  std::vector<std::pair<transport::NetLink*, ProxyOp>> incoming_;
  std::atomic<bool> hasIncoming_{false};
  bool stop_ = false;
  Status failure_;
  std::thread thread_;
};

}  // namespace weft::proxy
