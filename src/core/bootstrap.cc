#include "core/bootstrap.h"

#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "common/log.h"
#include "common/params.h"

namespace weft::core {
namespace {

constexpr int kPollSliceMs = 100;  // how often blocking waits look at the abort flag

}  // namespace

Bootstrap::Bootstrap(int rank, int nranks, uint64_t secret, Socket listen, const std::atomic<uint32_t>* abortFlag)
    : rank_(rank), nranks_(nranks), secret_(secret), listen_(std::move(listen)), abortFlag_(abortFlag) {}

Deadline Bootstrap::deadline() const { return Deadline::afterSec(param::bootstrapTimeoutSec()); }

Status Bootstrap::checkAbort() const {
  if (abortFlag_ && abortFlag_->load(std::memory_order_relaxed))
    return errorStatus(ncclInvalidUsage, "rank %d: bootstrap interrupted by ncclCommAbort", rank_);
  return okStatus();
}

Result<Socket> Bootstrap::listenOnBootstrapInterface() {
  std::vector<NetInterface> interfaces = findInterfaces(param::socketIfname(), param::socketFamily(), 1);
  if (interfaces.empty())
    return errorStatus(ncclSystemError, "no usable network interface for bootstrap (NCCL_SOCKET_IFNAME=\"%s\")",
                       param::socketIfname().c_str());
  return Socket::listen(interfaces[0].address);
}

Result<std::unique_ptr<Bootstrap>> Bootstrap::join(const UniqueIdContents& id, int rank, int nranks,
                                                   const std::atomic<uint32_t>* abortFlag) {
  WEFT_ASSIGN_OR_RETURN(Socket listen, listenOnBootstrapInterface());
  std::unique_ptr<Bootstrap> self(new Bootstrap(rank, nranks, id.secret, std::move(listen), abortFlag));
  const Deadline deadline = self->deadline();
  Result<Socket> root = Socket::connect(id.root, deadline);
  if (!root.ok())
    return root.status().withContext(strFormat(
        "rank %d: cannot reach the bootstrap root at %s within %lld s (is the process that called ncclGetUniqueId "
        "alive, and is this unique id used for one communicator only?)",
        rank, id.root.toString().c_str(), static_cast<long long>(param::bootstrapTimeoutSec())));
  wire::Hello hello{wire::kHelloMagic, id.secret, rank, nranks, self->listen_.localAddress()};
  WEFT_RETURN_IF_ERROR(root.value().sendAll(&hello, sizeof(hello), deadline));
  wire::Welcome welcome{};
  Status got = root.value().recvAll(&welcome, sizeof(welcome), Deadline::afterSec(param::bootstrapTimeoutSec() + 30));
  if (!got.ok())
    return got.withContext(strFormat("rank %d: waiting for the bootstrap root %s", rank, id.root.toString().c_str()));
  welcome.message[sizeof(welcome.message) - 1] = '\0';
  if (welcome.status != 0) return errorStatus(ncclInvalidUsage, "bootstrap: %s", welcome.message);
  WEFT_RETURN_IF_ERROR(self->connectRing(welcome.next));
  self->peers_.assign(static_cast<size_t>(nranks), SocketAddress{});
  self->peers_[static_cast<size_t>(rank)] = self->listen_.localAddress();
  WEFT_RETURN_IF_ERROR(self->allGather(self->peers_.data(), sizeof(SocketAddress)));
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
  Result<Socket> conn = Socket::connect(next, deadline());
  if (!conn.ok()) return conn.status().withContext(strFormat("rank %d: bootstrap ring to rank %d", rank_, nextRank));
  wire::PeerHeader header{secret_, rank_, wire::kRingTag, 0};
  WEFT_RETURN_IF_ERROR(conn.value().sendAll(&header, sizeof(header), deadline()));
  ringNext_ = std::move(conn).value();
  std::lock_guard<std::mutex> lock(mutex_);
  for (;;) {
    WEFT_ASSIGN_OR_RETURN(Incoming in, acceptOne("the bootstrap ring connection"));
    if (in.tag == wire::kRingTag && in.from == prevRank) {
      ringPrev_ = std::move(in.socket);
      return okStatus();
    }
    Message message;
    WEFT_RETURN_IF_ERROR(readMessage(in, &message));
    unexpected_.push_back(std::move(message));
  }
}

Result<Bootstrap::Incoming> Bootstrap::acceptOne(const char* waitingFor) {
  const Deadline limit = deadline();
  for (;;) {
    WEFT_RETURN_IF_ERROR(checkAbort());
    if (limit.expired())
      return errorStatus(ncclRemoteError,
                         "rank %d: no peer connected for %lld s while waiting for %s "
                         "(WEFT_BOOTSTRAP_TIMEOUT); a peer may have died or not called this function",
                         rank_, static_cast<long long>(param::bootstrapTimeoutSec()), waitingFor);
    WEFT_ASSIGN_OR_RETURN(bool readable, listen_.waitReadable(kPollSliceMs));
    if (!readable) continue;
    Result<Socket> conn = listen_.accept(Deadline::afterMs(kPollSliceMs));
    if (!conn.ok()) continue;
    wire::PeerHeader header{};
    if (!conn.value().recvAll(&header, sizeof(header), Deadline::afterSec(10)).ok() || header.secret != secret_ ||
        header.from < 0 || header.from >= nranks_) {
      WEFT_WARN("rank %d: bootstrap dropped a connection that did not present this communicator's secret", rank_);
      continue;
    }
    return Incoming{std::move(conn).value(), header.from, header.tag, header.bytes};
  }
}

Status Bootstrap::readMessage(Incoming& in, Message* out) {
  out->from = in.from;
  out->tag = in.tag;
  out->data.resize(in.bytes);
  Status got = in.socket.recvAll(out->data.data(), in.bytes, deadline());
  return got.withContext(strFormat("rank %d: bootstrap message from rank %d", rank_, in.from));
}

Status Bootstrap::send(int peer, int tag, const void* data, size_t bytes) {
  Result<Socket> conn = Socket::connect(peers_[static_cast<size_t>(peer)], deadline());
  if (!conn.ok()) return conn.status().withContext(strFormat("rank %d: bootstrap send to rank %d", rank_, peer));
  wire::PeerHeader header{secret_, rank_, tag, bytes};
  WEFT_RETURN_IF_ERROR(conn.value().sendAll(&header, sizeof(header), deadline()));
  return conn.value().sendAll(data, bytes, deadline());
}

Status Bootstrap::recv(int peer, int tag, void* data, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  Message message;
  bool found = false;
  for (auto it = unexpected_.begin(); it != unexpected_.end(); ++it) {
    if (it->from == peer && it->tag == tag) {
      message = std::move(*it);
      unexpected_.erase(it);
      found = true;
      break;
    }
  }
  while (!found) {
    std::string what = strFormat("a message from rank %d (tag %d)", peer, tag);
    WEFT_ASSIGN_OR_RETURN(Incoming in, acceptOne(what.c_str()));
    if (in.tag == wire::kRingTag) continue;  // a stale ring connection: nothing to read
    WEFT_RETURN_IF_ERROR(readMessage(in, &message));
    found = message.from == peer && message.tag == tag;
    if (!found) unexpected_.push_back(std::move(message));
  }
  if (message.data.size() != bytes)
    return errorStatus(ncclInternalError,
                       "rank %d: bootstrap message from rank %d (tag %d) has %zu bytes, expected %zu", rank_, peer, tag,
                       message.data.size(), bytes);
  std::memcpy(data, message.data.data(), bytes);
  return okStatus();
}

// Sends to the next rank and receives from the previous one at the same
// time, so that no rank can block the ring whatever the message size.
Status Bootstrap::exchange(const void* sendData, void* recvData, size_t bytes) {
  const char* out = static_cast<const char*>(sendData);
  char* in = static_cast<char*>(recvData);
  size_t sent = 0;
  size_t received = 0;
  const Deadline limit = deadline();
  while (sent < bytes || received < bytes) {
    WEFT_RETURN_IF_ERROR(checkAbort());
    pollfd fds[2] = {{ringNext_.fd(), static_cast<short>(sent < bytes ? POLLOUT : 0), 0},
                     {ringPrev_.fd(), static_cast<short>(received < bytes ? POLLIN : 0), 0}};
    int rc = ::poll(fds, 2, kPollSliceMs);
    if (rc < 0 && errno != EINTR) return errorStatus(ncclSystemError, "bootstrap ring poll: %s", strerror(errno));
    if (rc <= 0) {
      if (limit.expired())
        return errorStatus(ncclRemoteError,
                           "rank %d: bootstrap ring exchange stalled for %lld s (rank %d or %d stopped)", rank_,
                           static_cast<long long>(param::bootstrapTimeoutSec()), (rank_ + nranks_ - 1) % nranks_,
                           (rank_ + 1) % nranks_);
      continue;
    }
    if (sent < bytes && (fds[0].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t n = ::send(ringNext_.fd(), out + sent, bytes - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EINTR)
        return errorStatus(ncclRemoteError, "rank %d: bootstrap ring send to rank %d: %s", rank_, (rank_ + 1) % nranks_,
                           strerror(errno));
      if (n > 0) sent += static_cast<size_t>(n);
    }
    if (received < bytes && (fds[1].revents & (POLLIN | POLLERR | POLLHUP))) {
      ssize_t n = ::recv(ringPrev_.fd(), in + received, bytes - received, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
        return errorStatus(ncclRemoteError, "rank %d: bootstrap ring connection from rank %d closed: the peer exited",
                           rank_, (rank_ + nranks_ - 1) % nranks_);
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

Status Bootstrap::barrier() {
  std::vector<char> dummy(static_cast<size_t>(nranks_), 0);
  return allGather(dummy.data(), 1);
}

}  // namespace weft::core
