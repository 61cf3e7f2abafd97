// The door of a bootstrap listener (the root's, and every rank's): accepts
// connections and reads the fixed-size hello each must send first, from many
// connections at once and without ever blocking on one. A connection that
// sends nothing, too little, or a hello the owner does not recognise (no
// secret, wrong secret) costs a file descriptor until its short deadline at
// most, and is logged as a stranger; it delays no real peer.
#pragma once

#include <poll.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/socket.h"

namespace weft::core {

class HelloGate {
 public:
  // How long a connection may take to send its hello.
  static constexpr int64_t kHelloDeadlineMs = 5000;
  // Connections waiting for their hello at once; more are closed at once.
  static constexpr size_t kMaxPending = 4096;

  // `isPeer` says whether a complete hello comes from one of ours. `owner`
  // names the listener in log lines ("bootstrap root 1.2.3.4:5").
  HelloGate(std::string owner, size_t helloBytes, std::function<bool(const void* hello)> isPeer)
      : owner_(std::move(owner)), helloBytes_(helloBytes), isPeer_(std::move(isPeer)) {}

  struct Arrival {
    Socket socket;
    std::vector<char> hello;
  };

  // Appends the listener's and the pending connections' poll entries.
  void addPollFds(const Socket& listen, std::vector<pollfd>* fds) const;
  // Acts on what poll() reported for the entries added from `fds` on:
  // accepts, reads, drops strangers and expired connections, and appends
  // every connection whose hello came and was recognised to `arrived`.
  void handle(const Socket& listen, const pollfd* fds, std::vector<Arrival>* arrived);
  // Milliseconds until the next pending connection expires (-1: none).
  int msUntilNextDeadline() const;

  size_t pending() const { return pending_.size(); }
  uint64_t strangers() const { return strangers_; }

 private:
  struct Pending {
    Socket socket;
    std::vector<char> hello;
    size_t got = 0;
    int64_t deadlineNs = 0;
    std::string from;
  };

  void acceptAll(const Socket& listen);
  // Reads what is there; true when the connection is done with (arrived or dropped).
  bool readHello(Pending& p, std::vector<Arrival>* arrived);
  void dropStranger(const Pending& p, const char* why);

  std::string owner_;
  size_t helloBytes_;
  std::function<bool(const void*)> isPeer_;
  std::vector<Pending> pending_;
  uint64_t strangers_ = 0;
};

}  // namespace weft::core
