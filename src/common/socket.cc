#include "common/socket.h"

#include <sys/uio.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <thread>

namespace weft {

socklen_t SocketAddress::length() const { return family() == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in); }

uint16_t SocketAddress::port() const { return ntohs(family() == AF_INET6 ? u.v6.sin6_port : u.v4.sin_port); }

void SocketAddress::setPort(uint16_t port) {
  if (family() == AF_INET6)
    u.v6.sin6_port = htons(port);
  else
    u.v4.sin_port = htons(port);
}

std::string SocketAddress::toString() const {
  char host[INET6_ADDRSTRLEN] = "?";
  if (family() == AF_INET) {
    inet_ntop(AF_INET, &u.v4.sin_addr, host, sizeof(host));
    return std::string(host) + ":" + std::to_string(port());
  }
  if (family() == AF_INET6) {
    inet_ntop(AF_INET6, &u.v6.sin6_addr, host, sizeof(host));
    return "[" + std::string(host) + "]:" + std::to_string(port());
  }
  return "<no address>";
}

Result<SocketAddress> SocketAddress::parse(const std::string& text) {
  std::string host;
  std::string port;
  if (!text.empty() && text[0] == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return errorStatus(ncclInvalidArgument, "address \"%s\": expected [ipv6]:port", text.c_str());
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0)
      return errorStatus(ncclInvalidArgument, "address \"%s\": expected host:port", text.c_str());
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
  if (rc != 0 || found == nullptr)
    return errorStatus(ncclInvalidArgument, "address \"%s\": cannot resolve host \"%s\" (%s)", text.c_str(),
                       host.c_str(), gai_strerror(rc));
  SocketAddress out;
  std::memcpy(&out.u, found->ai_addr, std::min<size_t>(found->ai_addrlen, sizeof(out.u)));
  freeaddrinfo(found);
  return out;
}

bool interfaceMatches(const std::string& spec, const std::string& name) {
  std::string list = spec;
  bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list.erase(0, 1);
  bool exact = !list.empty() && list[0] == '=';
  if (exact) list.erase(0, 1);
  bool matched = false;
  size_t pos = 0;
  while (pos <= list.size() && !matched) {
    size_t comma = list.find(',', pos);
    if (comma == std::string::npos) comma = list.size();
    std::string item = list.substr(pos, comma - pos);
    if (!item.empty()) matched = exact ? name == item : name.compare(0, item.size(), item) == 0;
    pos = comma + 1;
  }
  return exclude ? !matched : matched;
}

namespace {

bool familyAllowed(int family, const std::string& wanted) {
  if (wanted.empty()) return true;
  if (wanted == "AF_INET") return family == AF_INET;
  if (wanted == "AF_INET6") return family == AF_INET6;
  return true;
}

std::vector<NetInterface> scanInterfaces(const std::string& spec, const std::string& family, size_t maxCount) {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* it = list; it != nullptr && out.size() < maxCount; it = it->ifa_next) {
    if (it->ifa_addr == nullptr || !(it->ifa_flags & IFF_UP)) continue;
    int fam = it->ifa_addr->sa_family;
    if ((fam != AF_INET && fam != AF_INET6) || !familyAllowed(fam, family)) continue;
    if (fam == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(it->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&v6->sin6_addr)) continue;  // needs a scope id; not routable
    }
    if (!interfaceMatches(spec, it->ifa_name)) continue;
    bool duplicate = false;
    for (const NetInterface& known : out) duplicate |= known.name == it->ifa_name;
    if (duplicate) continue;  // one address per interface, the first (v4 usually)
    NetInterface entry;
    entry.name = it->ifa_name;
    std::memcpy(&entry.address.u, it->ifa_addr, fam == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in));
    out.push_back(entry);
  }
  freeifaddrs(list);
  return out;
}

}  // namespace

std::vector<NetInterface> findInterfaces(const std::string& spec, const std::string& family, size_t maxCount) {
  if (!spec.empty()) return scanInterfaces(spec, family, maxCount);
  std::vector<NetInterface> found = scanInterfaces("ib", family, maxCount);
  if (found.empty()) found = scanInterfaces("^docker,lo,virbr", family, maxCount);
  if (found.empty()) found = scanInterfaces("lo", family, maxCount);
  return found;
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

void Socket::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

Result<Socket> Socket::listen(const SocketAddress& address, int backlog) {
  Socket sock(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!sock.valid()) return errorStatus(ncclSystemError, "socket(): %s", strerror(errno));
  int one = 1;
  setsockopt(sock.fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(sock.fd_, &address.u.sa, address.length()) != 0)
    return errorStatus(ncclSystemError, "bind to %s: %s", address.toString().c_str(), strerror(errno));
  if (::listen(sock.fd_, backlog) != 0)
    return errorStatus(ncclSystemError, "listen on %s: %s", address.toString().c_str(), strerror(errno));
  return sock;
}

Result<Socket> Socket::connectOnce(const SocketAddress& address, int timeoutMs, int* error) {
  if (error != nullptr) *error = 0;
  Socket sock(::socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!sock.valid()) return errorStatus(ncclSystemError, "socket(): %s", strerror(errno));
  int one = 1;
  setsockopt(sock.fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  int err = 0;
  if (::connect(sock.fd_, &address.u.sa, address.length()) != 0) {
    err = errno;
    if (err == EINPROGRESS) {
      pollfd pfd{sock.fd_, POLLOUT, 0};
      int rc;
      do rc = ::poll(&pfd, 1, timeoutMs);
      while (rc < 0 && errno == EINTR);
      if (rc == 0) {
        if (error != nullptr) *error = ETIMEDOUT;
        return errorStatus(ncclRemoteError, "connect to %s: no answer within %d ms", address.toString().c_str(),
                           timeoutMs);
      }
      socklen_t len = sizeof(err);
      if (rc < 0 || getsockopt(sock.fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
    }
  }
  if (err != 0) {
    if (error != nullptr) *error = err;
    return errorStatus(ncclRemoteError, "connect to %s: %s", address.toString().c_str(), strerror(err));
  }
  // Back to blocking mode: callers use MSG_DONTWAIT where they must not block.
  fcntl(sock.fd_, F_SETFL, fcntl(sock.fd_, F_GETFL) & ~O_NONBLOCK);
  return sock;
}

Result<Socket> Socket::connect(const SocketAddress& address, Deadline deadline, const std::atomic<uint32_t>* stop) {
  constexpr int kAttemptMs = 1000;
  int delayMs = 1;
  for (;;) {
    const int left = deadline.remainingMsForPoll();
    int err = 0;
    Result<Socket> sock = connectOnce(address, left < 0 || left > kAttemptMs ? kAttemptMs : std::max(left, 1), &err);
    if (sock.ok()) return sock;
    // Refused or unreachable may be a peer not listening yet: try again.
    const bool retryable = err == ECONNREFUSED || err == ETIMEDOUT || err == EHOSTUNREACH || err == ENETUNREACH ||
                           err == EAGAIN || err == EINTR || err == ECONNRESET;
    if (!retryable || deadline.expired() || (stop != nullptr && stop->load(std::memory_order_relaxed) != 0))
      return sock;
    std::this_thread::sleep_for(std::chrono::milliseconds(delayMs));
    delayMs = std::min(delayMs * 2, 100);
  }
}

Result<Socket> Socket::accept(Deadline deadline) const {
  for (;;) {
    pollfd pfd{fd_, POLLIN, 0};
    int rc = ::poll(&pfd, 1, deadline.remainingMsForPoll());
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return errorStatus(ncclSystemError, "poll on listening socket: %s", strerror(errno));
    if (rc == 0) return errorStatus(ncclRemoteError, "timed out waiting for a connection");
    int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      return errorStatus(ncclSystemError, "accept: %s", strerror(errno));
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return Socket(fd);
  }
}

Result<bool> Socket::waitReadable(int timeoutMs) const {
  for (;;) {
    pollfd pfd{fd_, POLLIN, 0};
    int rc = ::poll(&pfd, 1, timeoutMs);
    if (rc < 0 && errno == EINTR) continue;
    if (rc < 0) return errorStatus(ncclSystemError, "poll: %s", strerror(errno));
    return rc > 0;
  }
}

Status Socket::sendAll(const void* data, size_t len, Deadline deadline) const {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    ssize_t n = ::send(fd_, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd pfd{fd_, POLLOUT, 0};
      int rc = ::poll(&pfd, 1, deadline.remainingMsForPoll());
      if (rc == 0) return errorStatus(ncclRemoteError, "timed out sending (peer not reading)");
      continue;
    }
    return errorStatus(ncclRemoteError, "send: %s", n == 0 ? "connection closed" : strerror(errno));
  }
  return okStatus();
}

Status Socket::recvAll(void* data, size_t len, Deadline deadline) const {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    ssize_t n = ::recv(fd_, p, len, MSG_DONTWAIT);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return errorStatus(ncclRemoteError, "connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd pfd{fd_, POLLIN, 0};
      int rc = ::poll(&pfd, 1, deadline.remainingMsForPoll());
      if (rc == 0) return errorStatus(ncclRemoteError, "timed out receiving");
      continue;
    }
    return errorStatus(ncclRemoteError, "recv: %s", strerror(errno));
  }
  return okStatus();
}

Result<size_t> Socket::sendSome(const void* data, size_t len) const {
  for (;;) {
    ssize_t n = ::send(fd_, data, len, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return errorStatus(ncclRemoteError, "send: %s", strerror(errno));
  }
}

Result<size_t> Socket::recvSome(void* data, size_t len) const {
  if (len == 0) return size_t{0};  // recv would return 0, which means "closed"
  for (;;) {
    ssize_t n = ::recv(fd_, data, len, MSG_DONTWAIT);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) return errorStatus(ncclRemoteError, "connection closed by peer");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return errorStatus(ncclRemoteError, "recv: %s", strerror(errno));
  }
}

Result<size_t> Socket::sendSome2(const void* first, size_t firstLen, const void* second, size_t secondLen) const {
  iovec iov[2] = {{const_cast<void*>(first), firstLen}, {const_cast<void*>(second), secondLen}};
  msghdr msg{};
  msg.msg_iov = iov;
  msg.msg_iovlen = 2;
  for (;;) {
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return size_t{0};
    return errorStatus(ncclRemoteError, "send: %s", strerror(errno));
  }
}

void Socket::shutdown() const {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

SocketAddress Socket::localAddress() const {
  SocketAddress out;
  socklen_t len = sizeof(out.u);
  getsockname(fd_, &out.u.sa, &len);
  return out;
}

SocketAddress Socket::peerAddress() const {
  SocketAddress out;
  socklen_t len = sizeof(out.u);
  getpeername(fd_, &out.u.sa, &len);
  return out;
}

}  // namespace weft
