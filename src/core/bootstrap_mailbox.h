// Everything that arrives at a rank's bootstrap listener, read by a thread of
// its own from the moment the rank listens until its bootstrap ends: tagged
// messages from peers, the ring connection, liveness probes and failure
// notices. Because one thread reads every connection, without blocking on
// any (hello_gate.h), a stranger or a slow peer never delays a real one, and
// a failure notice is seen even while the rank's own threads are busy on the
// data path (the notice handler runs on this thread).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/socket.h"
#include "common/status.h"
#include "core/bootstrap_wire.h"
#include "core/hello_gate.h"

namespace weft::core {

// How long a bootstrap wait may last, and the setting that says so (for
// the message when it runs out).
struct WaitLimit {
  Deadline deadline;
  int64_t seconds;
  const char* name;
};

class BootstrapMailbox {
 public:
  // A failure notice as received: who failed first, who tells, and why.
  struct Notice {
    int origin = -1;
    int reporter = -1;
    std::string why;
    bool afterInit = false;  // the reporter had passed init's final barrier
  };
  using NoticeHandler = std::function<void(const Notice&)>;

  BootstrapMailbox(Socket listen, uint64_t secret, int rank, int nranks);
  ~BootstrapMailbox();  // stops and joins the thread, closes what is left
  BootstrapMailbox(const BootstrapMailbox&) = delete;
  BootstrapMailbox& operator=(const BootstrapMailbox&) = delete;

  SocketAddress address() const { return address_; }

  // Called on the mailbox thread for every failure notice (the first one is
  // also kept: firstNotice()). Setting it (null to stop) waits for a call of
  // the previous handler in progress, so its owner may then go away.
  void setNoticeHandler(NoticeHandler handler);
  bool noticed() const { return noticed_.load(std::memory_order_acquire); }
  Notice firstNotice() const;

  // Waits for the message (from, tag) until it arrives, `deadline` passes, or
  // `check` (called every 100 ms: abort flag, notices, peer liveness) fails.
  Result<std::vector<char>> take(int from, int tag, const WaitLimit& limit, const std::function<Status()>& check);
  // The same for the ring connection of rank `from`.
  Result<Socket> takeRing(int from, const WaitLimit& limit, const std::function<Status()>& check);

 private:
  struct Message {
    int from;
    int tag;
    std::vector<char> data;
  };
  struct Reading {  // a peer's message body on its way in
    Socket socket;
    wire::PeerHeader header;
    std::vector<char> data;
    size_t got = 0;
    int64_t deadlineNs = 0;
  };
  struct RingArrival {
    int from;
    Socket socket;
  };

  void run();
  void admit(HelloGate::Arrival&& arrival);
  void finish(Reading&& reading);
  bool readBody(Reading& r);
  template <typename Found>
  Status waitFor(Found&& found, const WaitLimit& limit, const std::function<Status()>& check, const char* what);

  const uint64_t secret_;
  const int rank_;
  const int nranks_;
  Socket listen_;
  SocketAddress address_;
  HelloGate gate_;
  std::vector<Reading> reading_;  // mailbox thread only
  int wakeFd_ = -1;

  mutable std::mutex mutex_;
  std::condition_variable arrivedCv_;
  std::deque<Message> messages_;
  std::deque<RingArrival> rings_;
  std::mutex handlerMutex_;  // held while the handler runs
  NoticeHandler handler_;
  Notice first_;
  std::atomic<bool> noticed_{false};
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace weft::core
