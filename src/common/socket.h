// TCP sockets with deadlines, addresses, and NCCL-style interface selection.
// Used by bootstrap now and by the socket net plugin later.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"

namespace weft {

// An IPv4 or IPv6 socket address in a fixed-size, trivially copyable form, so
// it can travel inside ncclUniqueId and bootstrap messages.
struct SocketAddress {
  union {
    sockaddr sa;
    sockaddr_in v4;
    sockaddr_in6 v6;
  } u{};

  int family() const { return u.sa.sa_family; }
  socklen_t length() const;
  uint16_t port() const;
  void setPort(uint16_t port);
  bool valid() const { return family() == AF_INET || family() == AF_INET6; }
  std::string toString() const;  // "1.2.3.4:5" or "[::1]:5"

  // Parses "host:port", "[v6]:port" or "v6addr:port"; resolves host names.
  static Result<SocketAddress> parse(const std::string& text);
};

struct NetInterface {
  std::string name;
  SocketAddress address;  // port 0
};

// Interfaces selected by NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY semantics:
// "eth,ib" prefixes, "^docker" excluded prefixes, "=eth0" exact names. With no
// spec: ib* first, then any up interface but lo/docker/virbr, then lo.
std::vector<NetInterface> findInterfaces(const std::string& spec, const std::string& family, size_t maxCount = 16);

// True when `name` matches an NCCL_SOCKET_IFNAME spec (exposed for tests).
bool interfaceMatches(const std::string& spec, const std::string& name);

// An owned TCP socket. Blocking operations take a deadline and fail with
// ncclRemoteError (peer gone) or ncclSystemError (local failure), never hang.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() { close(); }
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  // Listens on `address` (port 0: any free port).
  static Result<Socket> listen(const SocketAddress& address, int backlog = 16384);
  // Connects, retrying refused or unreachable attempts until the deadline.
  // Each attempt is bounded (an unanswered SYN does not block for the
  // kernel's two minutes); a non-zero `*stop` ends the retries early.
  static Result<Socket> connect(const SocketAddress& address, Deadline deadline,
                                const std::atomic<uint32_t>* stop = nullptr);
  // One attempt, bounded by timeoutMs. On failure `*error` (optional) is the
  // errno: ECONNREFUSED says nothing listens there (a process that listened
  // before is gone), ETIMEDOUT that nothing answered in time.
  static Result<Socket> connectOnce(const SocketAddress& address, int timeoutMs, int* error = nullptr);

  Result<Socket> accept(Deadline deadline) const;
  Status sendAll(const void* data, size_t len, Deadline deadline) const;
  Status recvAll(void* data, size_t len, Deadline deadline) const;
  // Non-blocking: the bytes moved now (0 when the call would block). The
  // peer closing the connection is an error (ncclRemoteError).
  Result<size_t> sendSome(const void* data, size_t len) const;
  Result<size_t> recvSome(void* data, size_t len) const;
  // sendSome of two buffers back to back in one call (one segment for a
  // small header and its payload).
  Result<size_t> sendSome2(const void* first, size_t firstLen, const void* second, size_t secondLen) const;
  // Ends both directions: wakes any thread blocked on this socket.
  void shutdown() const;
  // Waits until readable; false on timeout.
  Result<bool> waitReadable(int timeoutMs) const;

  SocketAddress localAddress() const;
  SocketAddress peerAddress() const;
  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void close();

 private:
  int fd_ = -1;
};

}  // namespace weft
