#include "core/bootstrap.h"

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <thread>

#include "common/log.h"
#include "common/params.h"
#include "common/process.h"

namespace weft::core {
namespace {

constexpr int kPollSliceMs = 100;                // how often blocking waits look at the abort flag
constexpr int64_t kProbeEveryNs = 1000000000ll;  // a waited-on peer's listener is probed once a second
constexpr int kNoticeConnectMs = 250;            // per connection attempt: a notice, a probe, a send

constexpr int kNoticeGraceMs = 1000;  // how long a rank that found a peer gone waits for a notice (a loaded machine may
                                      // take that long to deliver it)
constexpr int kNoticeBudgetMs = 500;  // all notices of one failure: abort must return within a second
constexpr size_t kNoticeBatch = 256;  // connections open at once (file descriptors)

// A notice on its way to one peer: a non-blocking connect, then one send
// (header and body fit in any socket buffer).
struct NoticeSend {
  Socket socket;
  bool done = false;
};

// Sends `message` to every address at once, best effort (a peer may be gone
// too), until all are sent or the deadline passes.
void sendToAll(const std::vector<SocketAddress>& to, const std::vector<char>& message, Deadline deadline) {
  std::vector<NoticeSend> sends(to.size());
  std::vector<pollfd> fds;
  for (size_t i = 0; i < to.size(); ++i) {
    sends[i].socket = Socket(::socket(to[i].family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    const bool started = sends[i].socket.valid() &&
                         (::connect(sends[i].socket.fd(), &to[i].u.sa, to[i].length()) == 0 || errno == EINPROGRESS);
    sends[i].done = !started;
  }
  for (;;) {
    fds.clear();
    for (const NoticeSend& s : sends)
      if (!s.done) fds.push_back({s.socket.fd(), POLLOUT, 0});
    if (fds.empty() || deadline.expired()) return;
    if (::poll(fds.data(), fds.size(), std::max(1, deadline.remainingMsForPoll())) <= 0) continue;
    size_t f = 0;
    for (NoticeSend& s : sends) {
      if (s.done) continue;
      const pollfd& p = fds[f++];
      if (p.revents == 0) continue;
      // Connected (or refused: then send fails and the peer is skipped).
      (void)::send(s.socket.fd(), message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      s.done = true;
    }
  }
}

}  // namespace

Bootstrap::Bootstrap(int rank, int nranks, uint64_t secret, Socket listen, const std::atomic<uint32_t>* abortFlag)
    : rank_(rank),
      nranks_(nranks),
      secret_(secret),
      mailbox_(std::make_unique<BootstrapMailbox>(std::move(listen), secret, rank, nranks)),
      abortFlag_(abortFlag) {}

WaitLimit Bootstrap::waitLimit() const {
  const int64_t callSec = param::waitTimeoutSec();
  if (passedFinalBarrier_.load(std::memory_order_acquire) && callSec > 0)
    return {Deadline::afterSec(callSec), callSec, "WEFT_TIMEOUT"};
  const int64_t initSec = param::bootstrapTimeoutSec();
  return {Deadline::afterSec(initSec), initSec, "WEFT_BOOTSTRAP_TIMEOUT"};
}

Deadline Bootstrap::deadline() const { return waitLimit().deadline; }

Status Bootstrap::noticeStatus() const {
  BootstrapMailbox::Notice n = mailbox_->firstNotice();
  return errorStatus(ncclRemoteError, "rank %d: rank %d failed (reported by rank %d): %s", rank_, n.origin, n.reporter,
                     n.why.c_str());
}

Status Bootstrap::checkAbort(bool recovering) const {
  if (recovering) return okStatus();
  if (abortFlag_ && abortFlag_->load(std::memory_order_relaxed))
    return errorStatus(ncclInvalidUsage, "rank %d: bootstrap interrupted by ncclCommAbort", rank_);
  // In init's final barrier a notice from a rank that passed it does not stop
  // the barrier: every rank has entered it and sent its part, so it ends; the
  // notice then fails the communicator's next call (watchFailureNotices).
  // A rank that dies inside the barrier is still found by its closed ring
  // connection.
  if (mailbox_->noticed() && !(inFinalBarrier_ && mailbox_->firstNotice().afterInit)) return noticeStatus();
  return okStatus();
}

void Bootstrap::noteSuspect(int peer) {
  if (mailbox_->noticed()) return;
  int none = -1;
  suspect_.compare_exchange_strong(none, peer);
}

bool Bootstrap::awaitNotice(int graceMs) const {
  // By the clock: counted in sleeps, the grace stretched on a loaded machine.
  const int64_t endNs = nowNs() + int64_t{graceMs} * 1000000;
  while (!mailbox_->noticed() && nowNs() < endNs) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return mailbox_->noticed();
}

Status Bootstrap::peerGone(int peer, const char* how, bool recovering) {
  // The peer may have gone because another rank failed first, and its
  // notice may be on its way (from the peer itself, before it exited): give
  // it a moment, so the error names the rank that failed first.
  if (!recovering && awaitNotice(kNoticeGraceMs)) return noticeStatus();
  int expected = -1;
  suspect_.compare_exchange_strong(expected, peer);
  const std::string where =
      peers_.empty() ? std::string() : " (bootstrap address " + peers_[static_cast<size_t>(peer)].toString() + ")";
  return errorStatus(ncclRemoteError,
                     "rank %d: rank %d%s is gone: %s; it exited, was killed or aborted its communicator", rank_, peer,
                     where.c_str(), how);
}

bool Bootstrap::peerAlive(int peer) {
  if (peer < 0 || peer >= nranks_ || peer == rank_) return true;
  // In join only the ring neighbours' addresses are known.
  const int prevRank = (rank_ + nranks_ - 1) % nranks_;
  const SocketAddress at = !peers_.empty()    ? peers_[static_cast<size_t>(peer)]
                           : peer == prevRank ? prev_
                                              : SocketAddress{};
  if (!at.valid()) return true;
  int err = 0;
  Result<Socket> conn = Socket::connectOnce(at, kNoticeConnectMs, &err);
  if (!conn.ok()) return err != ECONNREFUSED;  // no answer in time proves nothing
  wire::PeerHeader probe{secret_, rank_, wire::kProbeTag, 0};
  (void)conn.value().sendAll(&probe, sizeof(probe), Deadline::afterMs(kNoticeConnectMs));
  return true;
}

std::function<Status()> Bootstrap::waitCheck(int peer) { return waitCheck(peer, false); }

std::function<Status()> Bootstrap::waitCheck(int peer, bool recovering) {
  auto nextProbe = std::make_shared<int64_t>(nowNs() + kProbeEveryNs);
  const pid_t pid =
      peer >= 0 && static_cast<size_t>(peer) < peerPids_.size() ? peerPids_[static_cast<size_t>(peer)] : 0;
  return [this, peer, pid, nextProbe, recovering]() -> Status {
    WEFT_RETURN_IF_ERROR(checkAbort(recovering));
    // Called every 100 ms: a local peer's exit costs a signal-0 kill, not a connection.
    if (pid > 0 && !processAlive(pid)) return peerGone(peer, "its process exited", recovering);
    if (nowNs() < *nextProbe) return okStatus();
    *nextProbe = nowNs() + kProbeEveryNs;
    if (!peerAlive(peer)) return peerGone(peer, "its bootstrap listener refuses connections", recovering);
    return okStatus();
  };
}

Result<Socket> Bootstrap::listenOnBootstrapInterface() {
  std::vector<NetInterface> interfaces = findInterfaces(param::socketIfname(), param::socketFamily(), 1);
  if (interfaces.empty())
    return errorStatus(ncclSystemError, "no usable network interface for bootstrap (NCCL_SOCKET_IFNAME=\"%s\")",
                       param::socketIfname().c_str());
  return Socket::listen(interfaces[0].address);
}

namespace {

// The root's answer, waited for in slices so that abort ends the wait.
Result<wire::Welcome> awaitWelcome(const Socket& root, int rank, const SocketAddress& rootAddress,
                                   const std::function<Status()>& checkAbort) {
  wire::Welcome welcome{};
  size_t got = 0;
  const Deadline limit = Deadline::afterSec(param::bootstrapTimeoutSec() + 30);  // the root's own timeout first
  while (got < sizeof(welcome)) {
    WEFT_RETURN_IF_ERROR(checkAbort());
    Result<bool> readable = root.waitReadable(kPollSliceMs);
    if (!readable.ok()) return readable.status();
    if (!readable.value()) {
      if (limit.expired())
        return errorStatus(ncclRemoteError, "rank %d: no answer from the bootstrap root %s", rank,
                           rootAddress.toString().c_str());
      continue;
    }
    Result<size_t> n = root.recvSome(reinterpret_cast<char*>(&welcome) + got, sizeof(welcome) - got);
    if (!n.ok())
      return errorStatus(ncclRemoteError,
                         "rank %d: the bootstrap root %s closed the connection before answering (%s): the process "
                         "that called ncclGetUniqueId, which hosts the root, exited or failed",
                         rank, rootAddress.toString().c_str(), n.status().message().c_str());
    got += n.value();
  }
  welcome.message[sizeof(welcome.message) - 1] = '\0';
  return welcome;
}

}  // namespace

Result<std::unique_ptr<Bootstrap>> Bootstrap::join(const UniqueIdContents& id, int rank, int nranks,
                                                   const std::atomic<uint32_t>* abortFlag) {
  WEFT_ASSIGN_OR_RETURN(Socket listen, listenOnBootstrapInterface());
  const SocketAddress listenAddress = listen.localAddress();
  std::unique_ptr<Bootstrap> self(new Bootstrap(rank, nranks, id.secret, std::move(listen), abortFlag));
  const Deadline deadline = self->deadline();
  Result<Socket> root = Socket::connect(id.root, deadline, abortFlag);
  WEFT_RETURN_IF_ERROR(self->checkAbort());
  if (!root.ok())
    return root.status().withContext(strFormat(
        "rank %d: cannot reach the bootstrap root at %s within %lld s (is the process that called ncclGetUniqueId "
        "alive, and is this unique id used for one communicator only?)",
        rank, id.root.toString().c_str(), static_cast<long long>(param::bootstrapTimeoutSec())));
  wire::Hello hello{wire::kHelloMagic, id.secret, rank, nranks, listenAddress};
  WEFT_RETURN_IF_ERROR(root.value().sendAll(&hello, sizeof(hello), deadline));
  WEFT_ASSIGN_OR_RETURN(wire::Welcome welcome,
                        awaitWelcome(root.value(), rank, id.root, [&self] { return self->checkAbort(); }));
  if (welcome.status != 0) return errorStatus(ncclInvalidUsage, "bootstrap: %s", welcome.message);
  self->next_ = welcome.next;
  self->prev_ = welcome.prev;
  Status ring = self->connectRing(welcome.next);
  if (ring.ok()) {
    std::vector<SocketAddress> addresses(static_cast<size_t>(nranks));
    addresses[static_cast<size_t>(rank)] = listenAddress;
    ring = self->allGather(addresses.data(), sizeof(SocketAddress));
    if (ring.ok()) self->peers_ = std::move(addresses);
  }
  if (!ring.ok()) {
    self->passOnJoinFailure(ring);
    return ring;
  }
  return self;
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::fromAddresses(int rank, std::vector<SocketAddress> addresses,
                                                            Socket listen, uint64_t secret,
                                                            const std::atomic<uint32_t>* abortFlag) {
  int nranks = static_cast<int>(addresses.size());
  std::unique_ptr<Bootstrap> self(new Bootstrap(rank, nranks, secret, std::move(listen), abortFlag));
  self->peers_ = std::move(addresses);
  WEFT_RETURN_IF_ERROR(self->connectRing(self->peers_[static_cast<size_t>((rank + 1) % nranks)]));
  return self;
}

Status Bootstrap::connectRing(const SocketAddress& next) {
  if (nranks_ == 1) return okStatus();
  const int nextRank = (rank_ + 1) % nranks_;
  const int prevRank = (rank_ + nranks_ - 1) % nranks_;
  Result<Socket> conn = Socket::connect(next, deadline(), abortFlag_);
  WEFT_RETURN_IF_ERROR(checkAbort());
  if (!conn.ok()) return conn.status().withContext(strFormat("rank %d: bootstrap ring to rank %d", rank_, nextRank));
  wire::PeerHeader header{secret_, rank_, wire::kRingTag, 0};
  WEFT_RETURN_IF_ERROR(conn.value().sendAll(&header, sizeof(header), deadline()));
  ringNext_ = std::move(conn).value();
  // Peers' addresses are not known yet at join: the check is abort and notices only.
  std::function<Status()> check =
      peers_.empty() ? std::function<Status()>([this] { return checkAbort(); }) : waitCheck(prevRank);
  WEFT_ASSIGN_OR_RETURN(ringPrev_, mailbox_->takeRing(prevRank, waitLimit(), check));
  return okStatus();
}

Status Bootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  return sendTo(peer, tag, data, bytes, false);
}

Status Bootstrap::recv(int peer, int tag, void* data, size_t bytes) { return recvFrom(peer, tag, data, bytes, false); }

Status Bootstrap::sendTo(int peer, int tag, const void* data, size_t bytes, bool recovering) {
  // Every peer listens from its join on: a refusal means it is gone, and
  // retrying would only wait for the timeout.
  const SocketAddress& to = peers_[static_cast<size_t>(peer)];
  const Deadline limit = deadline();
  Result<Socket> conn = Status();
  for (;;) {
    WEFT_RETURN_IF_ERROR(checkAbort(recovering));
    int err = 0;
    conn = Socket::connectOnce(to, kNoticeConnectMs, &err);
    if (conn.ok()) break;
    if (err == ECONNREFUSED) return peerGone(peer, "its bootstrap listener refuses connections", recovering);
    if (limit.expired()) return conn.status().withContext(strFormat("rank %d: bootstrap send to rank %d", rank_, peer));
    std::this_thread::sleep_for(std::chrono::milliseconds(10));  // unreachable for now: not a busy loop
  }
  wire::PeerHeader header{secret_, rank_, tag, bytes};
  Status sent = conn.value().sendAll(&header, sizeof(header), limit);
  if (sent.ok()) sent = conn.value().sendAll(data, bytes, limit);
  // Accepted, then closed before taking it all: the peer's communicator went
  // away (its init failed, or it aborted), maybe on another rank's failure.
  if (!sent.ok() && !limit.expired())
    return peerGone(peer,
                    strFormat("its bootstrap listener closed the connection (%s)", sent.message().c_str()).c_str(),
                    recovering);
  return sent;
}

Status Bootstrap::recvFrom(int peer, int tag, void* data, size_t bytes, bool recovering) {
  const WaitLimit limit = waitLimit();
  Result<std::vector<char>> taken = mailbox_->take(peer, tag, limit, waitCheck(peer, recovering));
  if (!taken.ok()) {
    // Ended by abort, a notice, or the peer found gone: said already.
    if (!limit.deadline.expired() || recovering) return taken.status();
    // Out of time on a peer that is silent but alive: it may be waiting on
    // the rank that failed, whose waiter's notice is then on its way. If
    // none comes, this peer is the suspect a failure report names
    // (reportInitFailure), unless another wait found a rank gone first.
    if (awaitNotice(kNoticeGraceMs)) return noticeStatus();
    noteSuspect(peer);
    return taken.status();
  }
  std::vector<char> message = std::move(taken.value());
  if (message.size() != bytes)
    return errorStatus(ncclInternalError,
                       "rank %d: bootstrap message from rank %d (tag %d) has %zu bytes, expected %zu", rank_, peer, tag,
                       message.size(), bytes);
  std::memcpy(data, message.data(), bytes);
  return okStatus();
}

// Before the addresses are exchanged a rank knows only its ring successor's:
// the notice goes there, and each rank whose join fails on it passes it on,
// so it travels the ring (a rank that failed already refuses it).
void Bootstrap::passOnJoinFailure(const Status& failure) {
  if (abortFlag_ && abortFlag_->load(std::memory_order_relaxed)) return;
  const bool relayed = mailbox_->noticed();
  const BootstrapMailbox::Notice n = mailbox_->firstNotice();
  notifyFailure(relayed ? n.origin : (suspect() >= 0 ? suspect() : rank_), relayed ? n.why : failure.message());
}

void Bootstrap::notifyFailure(int origin, const std::string& why) {
  if (nranks_ == 1) return;
  wire::FailureNotice notice{};
  notice.origin = origin;
  notice.reporter = rank_;
  notice.afterInit = passedFinalBarrier_.load(std::memory_order_acquire) ? 1 : 0;
  std::snprintf(notice.why, sizeof(notice.why), "%s", why.c_str());
  WEFT_INFO(log::kBootstrap, "rank %d: telling %d peers that rank %d failed", rank_, nranks_ - 1, origin);
  const wire::PeerHeader header{secret_, rank_, wire::kNoticeTag, sizeof(notice)};
  std::vector<char> message(sizeof(header) + sizeof(notice));
  std::memcpy(message.data(), &header, sizeof(header));
  std::memcpy(message.data() + sizeof(header), &notice, sizeof(notice));
  // Sent before returning, in parallel and within a fixed budget: the caller
  // is often about to exit (an abort, then the process), which would end a
  // thread left to do it.
  const Deadline deadline = Deadline::afterMs(kNoticeBudgetMs);
  if (peers_.empty()) {  // in join: the successor only (passOnJoinFailure)
    if (next_.valid()) sendToAll({next_}, message, deadline);
    return;
  }
  std::vector<SocketAddress> batch;
  for (size_t r = 0; r < peers_.size(); ++r) {
    if (static_cast<int>(r) != rank_) batch.push_back(peers_[r]);
    if (batch.size() == kNoticeBatch || (r + 1 == peers_.size() && !batch.empty())) {
      sendToAll(batch, message, deadline);
      batch.clear();
    }
  }
}

// Sends to the next rank and receives from the previous one at the same
// time, so that no rank can block the ring whatever the message size.
Status Bootstrap::exchange(const void* sendData, void* recvData, size_t bytes) {
  const char* out = static_cast<const char*>(sendData);
  char* in = static_cast<char*>(recvData);
  size_t sent = 0;
  size_t received = 0;
  const WaitLimit wait = waitLimit();
  const Deadline& limit = wait.deadline;
  const int next = (rank_ + 1) % nranks_;
  const int prev = (rank_ + nranks_ - 1) % nranks_;
  while (sent < bytes || received < bytes) {
    WEFT_RETURN_IF_ERROR(checkAbort());
    pollfd fds[2] = {{ringNext_.fd(), static_cast<short>(sent < bytes ? POLLOUT : 0), 0},
                     {ringPrev_.fd(), static_cast<short>(received < bytes ? POLLIN : 0), 0}};
    int rc = ::poll(fds, 2, kPollSliceMs);
    if (rc < 0 && errno != EINTR) return errorStatus(ncclSystemError, "bootstrap ring poll: %s", strerror(errno));
    if (rc <= 0) {
      if (limit.expired() && awaitNotice(kNoticeGraceMs)) return noticeStatus();  // a rank that knows more told us
      if (limit.expired())
        return errorStatus(ncclRemoteError,
                           "rank %d: bootstrap ring exchange stalled for %lld s (%s; rank %d or %d stopped)", rank_,
                           static_cast<long long>(wait.seconds), wait.name, prev, next);
      continue;
    }
    if (sent < bytes && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::send(ringNext_.fd(), out + sent, bytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        return peerGone(next, strFormat("the bootstrap ring connection to it failed (%s)", strerror(errno)).c_str());
      if (n > 0) sent += static_cast<size_t>(n);
    }
    if (received < bytes && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      ssize_t n = ::recv(ringPrev_.fd(), in + received, bytes - received, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return peerGone(prev, "it closed the bootstrap ring connection");
      if (n > 0) received += static_cast<size_t>(n);
    }
  }
  return okStatus();
}

Status Bootstrap::allGather(void* data, size_t bytes) {
  char* base = static_cast<char*>(data);
  for (int step = 0; step < nranks_ - 1; ++step) {
    size_t sendSlot = static_cast<size_t>((rank_ - step + nranks_) % nranks_);
    size_t recvSlot = static_cast<size_t>((rank_ - step - 1 + nranks_) % nranks_);
    WEFT_RETURN_IF_ERROR(exchange(base + sendSlot * bytes, base + recvSlot * bytes, bytes));
  }
  return okStatus();
}

Status Bootstrap::gatherAmong(const std::vector<int>& members, int tag, void* data, size_t bytes,
                              const std::function<Status(const void* all)>& check) {
  const auto self = std::find(members.begin(), members.end(), rank_);
  if (self == members.end())
    return errorStatus(ncclInternalError, "rank %d: gatherAmong without this rank among the members", rank_);
  char* base = static_cast<char*>(data);
  const size_t all = bytes * members.size();
  const int leader = members.front();
  // The first member's verdict (tag + 1), then, when good, everything (tag +
  // 2): a member it could not hear from is named to the others at once, and
  // a member that counts other members than it fails rather than waiting.
  struct Verdict {
    int32_t failedRank;  // -1: good
    int32_t members;
    int32_t refused;  // 1: the first member's check failed (why says how)
    char why[400];
  };
  Verdict verdict{-1, static_cast<int32_t>(members.size()), 0, {}};
  if (self != members.begin()) {
    WEFT_RETURN_IF_ERROR(sendTo(leader, tag, base + static_cast<size_t>(self - members.begin()) * bytes, bytes, true));
    WEFT_RETURN_IF_ERROR(recvFrom(leader, tag + 1, &verdict, sizeof(verdict), true));
    verdict.why[sizeof(verdict.why) - 1] = '\0';
    if (verdict.failedRank >= 0)
      return errorStatus(ncclRemoteError, "rank %d: rank %d, which gathers the others, heard nothing from rank %d: %s",
                         rank_, leader, verdict.failedRank, verdict.why);
    if (verdict.refused != 0)
      return errorStatus(ncclInvalidUsage, "rank %d: rank %d, which gathers the others, found: %s", rank_, leader,
                         verdict.why);
    if (verdict.members != static_cast<int32_t>(members.size()))
      return errorStatus(ncclInvalidUsage,
                         "rank %d: rank %d, which gathers the others, counts %d ranks taking part and this rank %zu: "
                         "expected the same ranks on every one",
                         rank_, leader, verdict.members, members.size());
    return recvFrom(leader, tag + 2, base, all, true);
  }
  Status gathered = okStatus();
  for (size_t i = 1; i < members.size() && gathered.ok(); ++i) {
    gathered = recvFrom(members[i], tag, base + i * bytes, bytes, true);
    if (!gathered.ok()) {
      verdict.failedRank = members[i];
      std::snprintf(verdict.why, sizeof(verdict.why), "%s", gathered.message().c_str());
    }
  }
  Status checked = okStatus();
  if (gathered.ok() && check) {
    checked = check(base);
    if (!checked.ok()) {
      verdict.refused = 1;
      std::snprintf(verdict.why, sizeof(verdict.why), "%s", checked.message().c_str());
    }
  }
  // Every member that is still there hears the verdict, good or bad.
  Status told = okStatus();
  for (size_t i = 1; i < members.size(); ++i) {
    if (members[i] == verdict.failedRank) continue;
    Status sent = sendTo(members[i], tag + 1, &verdict, sizeof(verdict), true);
    if (sent.ok() && gathered.ok() && checked.ok()) sent = sendTo(members[i], tag + 2, base, all, true);
    if (told.ok() && !sent.ok()) told = sent;
  }
  WEFT_RETURN_IF_ERROR(gathered);
  WEFT_RETURN_IF_ERROR(checked);
  return told;
}

Status Bootstrap::barrier() {
  std::vector<char> dummy(static_cast<size_t>(nranks_), 0);
  return allGather(dummy.data(), 1);
}

Status Bootstrap::finalBarrier() {
  inFinalBarrier_ = true;
  Status done = barrier();
  inFinalBarrier_ = false;
  if (done.ok()) passedFinalBarrier_.store(true, std::memory_order_release);
  return done;
}

}  // namespace weft::core
