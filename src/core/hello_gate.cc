#include "core/hello_gate.h"

#include <fcntl.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"

namespace weft::core {

void HelloGate::addPollFds(const Socket& listen, std::vector<pollfd>* fds) const {
  fds->push_back({listen.fd(), POLLIN, 0});
  for (const Pending& p : pending_) fds->push_back({p.socket.fd(), POLLIN, 0});
}

int HelloGate::msUntilNextDeadline() const {
  if (pending_.empty()) return -1;
  int64_t first = pending_.front().deadlineNs;
  for (const Pending& p : pending_) first = std::min(first, p.deadlineNs);
  const int64_t leftMs = (first - nowNs()) / 1000000 + 1;
  return static_cast<int>(std::clamp<int64_t>(leftMs, 0, 0x7fffffff));
}

void HelloGate::dropStranger(const Pending& p, const char* why) {
  ++strangers_;
  WEFT_INFO(log::kBootstrap, "%s: closed a connection from %s that %s (not a peer of this communicator)",
            owner_.c_str(), p.from.c_str(), why);
}

void HelloGate::acceptAll(const Socket& listen) {
  // The listener is the gate's alone: non-blocking, so the loop below ends
  // when no connection is left to accept.
  const int flags = fcntl(listen.fd(), F_GETFL);
  if ((flags & O_NONBLOCK) == 0) fcntl(listen.fd(), F_SETFL, flags | O_NONBLOCK);
  for (;;) {
    const int fd = ::accept4(listen.fd(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) return;  // EAGAIN: none left; anything else: try again at the next poll
    Pending p;
    p.socket = Socket(fd);
    p.from = p.socket.peerAddress().toString();
    if (pending_.size() >= kMaxPending) {
      dropStranger(p, "arrived while too many connections were waiting for their hello");
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    p.hello.resize(helloBytes_);
    p.deadlineNs = nowNs() + kHelloDeadlineMs * 1000000ll;
    pending_.push_back(std::move(p));
  }
}

bool HelloGate::readHello(Pending& p, std::vector<Arrival>* arrived) {
  Result<size_t> n = p.socket.recvSome(p.hello.data() + p.got, helloBytes_ - p.got);
  if (!n.ok()) {
    dropStranger(p, "closed before sending a whole hello");
    return true;
  }
  p.got += n.value();
  if (p.got < helloBytes_) return false;
  if (!isPeer_(p.hello.data())) {
    dropStranger(p, "did not present this communicator's secret");
    return true;
  }
  // The connection goes on in blocking mode; its users bound every wait.
  arrived->push_back({std::move(p.socket), std::move(p.hello)});
  const int fd = arrived->back().socket.fd();
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  return true;
}

void HelloGate::handle(const Socket& listen, const pollfd* fds, std::vector<Arrival>* arrived) {
  const size_t before = pending_.size();  // fds[1..before] are these, in order
  std::vector<bool> done(before, false);
  for (size_t i = 0; i < before; ++i)
    if (fds[1 + i].revents != 0) done[i] = readHello(pending_[i], arrived);
  const int64_t now = nowNs();
  size_t kept = 0;
  for (size_t i = 0; i < before; ++i) {
    if (done[i]) continue;
    if (now >= pending_[i].deadlineNs) {
      dropStranger(pending_[i], "sent no whole hello before its deadline");
      continue;
    }
    if (kept != i) pending_[kept] = std::move(pending_[i]);
    ++kept;
  }
  pending_.resize(kept);
  if (fds[0].revents != 0) acceptAll(listen);
}

}  // namespace weft::core
