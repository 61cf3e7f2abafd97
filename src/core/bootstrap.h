// Per-rank bootstrap: a TCP ring among the ranks of a communicator plus
// tagged point-to-point messages, used during set-up (peer information,
// connection blobs, split) and never on the data path.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/socket.h"
#include "common/status.h"
#include "core/bootstrap_mailbox.h"
#include "core/bootstrap_wire.h"
#include "core/unique_id.h"

namespace weft::core {

class Bootstrap {
 public:
  // Joins the communicator described by `id` as `rank` of `nranks`. Every
  // blocking step polls `abortFlag` and gives up after WEFT_BOOTSTRAP_TIMEOUT.
  static Result<std::unique_ptr<Bootstrap>> join(const UniqueIdContents& id, int rank, int nranks,
                                                 const std::atomic<uint32_t>* abortFlag);

  // Builds a bootstrap among ranks that already know each other's listen
  // addresses (ncclCommSplit): `listen` must be the socket whose address is
  // addresses[rank].
  static Result<std::unique_ptr<Bootstrap>> fromAddresses(int rank, std::vector<SocketAddress> addresses, Socket listen,
                                                          uint64_t secret, const std::atomic<uint32_t>* abortFlag);

  // A listen socket on the interface NCCL_SOCKET_IFNAME selects.
  static Result<Socket> listenOnBootstrapInterface();

  int rank() const { return rank_; }
  SocketAddress address() const { return mailbox_->address(); }  // this rank's listener
  int nranks() const { return nranks_; }
  uint64_t secret() const { return secret_; }

  // data holds nranks slots of `bytes`; slot rank is ours, the rest is filled in.
  Status allGather(void* data, size_t bytes);
  Status barrier();
  // Init's last step: a barrier after which the rank's init returns. Failure
  // notices sent by a rank after it has passed it say so, and do not stop
  // another rank's final barrier (that rank's init succeeds; its next call
  // fails with the notice).
  Status finalBarrier();
  Status send(int peer, int tag, const void* data, size_t bytes);
  // Waits for the message; fails early when the peer is found gone (its
  // listener refuses connections), on abort, or on a failure notice.
  Status recv(int peer, int tag, void* data, size_t bytes);
  // ncclCommShrink's exchange among `members` (ranks of this communicator,
  // ascending, this rank among them): member i's `bytes` at data + i * bytes
  // end at every member. Point to point through the first member, so ranks
  // left out (dead, hung or busy elsewhere) take no part. Failure notices
  // and this communicator's abort flag do not end it (recovering from them
  // is what shrinking is for); a member found gone, or silent past the wait
  // limit, does, named. Uses tags `tag` to `tag` + 2. `check`, when given,
  // runs on the first member over everything gathered before any of it is
  // sent: its error ends the exchange on every member (as ncclInvalidUsage
  // naming what it found), the data unsent, so that a member that gave up
  // at once cannot turn the first member's error into a send to a gone peer.
  Status gatherAmong(const std::vector<int>& members, int tag, void* data, size_t bytes,
                     const std::function<Status(const void* all)>& check = nullptr);

  // Failure propagation. notifyFailure tells every other rank that rank
  // `origin` failed and why, to all at once and within half a second; each
  // receiver's mailbox runs the handler set with setNoticeHandler. The
  // bootstrap connections do not depend on the data path.
  void notifyFailure(int origin, const std::string& why);
  void setNoticeHandler(BootstrapMailbox::NoticeHandler handler) { mailbox_->setNoticeHandler(std::move(handler)); }
  bool noticed() const { return mailbox_->noticed(); }
  BootstrapMailbox::Notice firstNotice() const { return mailbox_->firstNotice(); }
  // Waits up to graceMs for a failure notice (true when one came).
  bool awaitNotice(int graceMs) const;

  // A failure notice received, as an error naming the rank that failed first.
  Status noticeStatus() const;
  // The rank a failed wait found gone (dead listener, closed ring link), or -1.
  int suspect() const { return suspect_.load(std::memory_order_relaxed); }
  // A wait on `peer` ran out of time: it becomes the suspect unless one is
  // known already or a notice came (which names the rank that failed first).
  void noteSuspect(int peer);
  // Whether `peer` is still there: false only when its listener refuses a
  // connection (the process exited, or its communicator is gone).
  bool peerAlive(int peer);
  // For a wait on `peer` outside the bootstrap (a network accept): fails on
  // abort, on a failure notice, and (probed once a second) when the peer is gone.
  std::function<Status()> waitCheck(int peer);
  // Per rank, a process on this host whose exit waitCheck notices within
  // 200 ms (no probe needed), or 0. Set once init knows them.
  void watchProcesses(std::vector<pid_t> pids) { peerPids_ = std::move(pids); }
  // How long a bootstrap wait may last from now: WEFT_BOOTSTRAP_TIMEOUT in
  // init; once init has passed its final barrier, a wait belongs to a call
  // (a connection made on first use, a split) and has a call's bound,
  // WEFT_TIMEOUT (when set), like the data path's waits in the same call.
  WaitLimit waitLimit() const;

 private:
  Bootstrap(int rank, int nranks, uint64_t secret, Socket listen, const std::atomic<uint32_t>* abortFlag);

  Status connectRing(const SocketAddress& next);
  Status exchange(const void* sendData, void* recvData, size_t bytes);
  Deadline deadline() const;
  // `recovering`: a wait of gatherAmong, which abort and failure notices do
  // not end, and whose errors blame the peer waited on, not a notice's rank.
  Status sendTo(int peer, int tag, const void* data, size_t bytes, bool recovering);
  Status recvFrom(int peer, int tag, void* data, size_t bytes, bool recovering);
  std::function<Status()> waitCheck(int peer, bool recovering);
  // Abort, or a failure notice: why a wait must end now (never, recovering).
  Status checkAbort(bool recovering = false) const;
  Status peerGone(int peer, const char* how, bool recovering = false);
  void passOnJoinFailure(const Status& failure);

  int rank_;
  int nranks_;
  uint64_t secret_;
  std::unique_ptr<BootstrapMailbox> mailbox_;
  Socket ringNext_;
  Socket ringPrev_;
  std::vector<SocketAddress> peers_;  // every rank's listener; empty until join's exchange of them
  SocketAddress next_;                // the ring successor's listener
  SocketAddress prev_;                // the ring predecessor's listener
  const std::atomic<uint32_t>* abortFlag_;
  std::atomic<int> suspect_{-1};
  std::vector<pid_t> peerPids_;                  // see watchProcesses
  bool inFinalBarrier_ = false;                  // touched by the init thread only
  std::atomic<bool> passedFinalBarrier_{false};  // read by notifyFailure on any thread
};

}  // namespace weft::core
