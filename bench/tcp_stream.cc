// The limit for Weft's socket transport: a plain TCP exchange between two
// processes on loopback, measured the way `weft-perf sendrecv -np 2` measures
// Weft: per size, every iteration each process sends `size` bytes to the
// other and receives `size` bytes from it (both directions at once, one
// connection each way), and the median iteration time is reported with the
// bytes one rank sent per second. Nothing but non-blocking send/recv on
// TCP_NODELAY sockets, polled without sleeping: no framing, no copies, no
// threads.
//   tcp_stream [iters] [maxBytes]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

int listenLoopback(uint16_t* port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd, 4) != 0) std::exit(2);
  socklen_t len = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  *port = ntohs(a.sin_port);
  return fd;
}

int connectLoopback(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) std::exit(2);
  return fd;
}

void noDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

// Sends `bytes` on out while receiving `bytes` on in, whichever is ready,
// polling without sleeping (as Weft's waits do while data is due).
void exchange(int out, int in, const char* src, char* dst, size_t bytes) {
  size_t sent = 0, got = 0;
  while (sent < bytes || got < bytes) {
    if (sent < bytes) {
      ssize_t n = send(out, src + sent, bytes - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
    }
    if (got < bytes) {
      ssize_t n = recv(in, dst + got, bytes - got, MSG_DONTWAIT);
      if (n == 0) std::exit(3);
      if (n > 0) got += static_cast<size_t>(n);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::atoi(argv[1]) : 20;
  const size_t maxBytes = argc > 2 ? std::strtoull(argv[2], nullptr, 0) : size_t{64} << 20;
  uint16_t port0 = 0, port1 = 0;
  const int l0 = listenLoopback(&port0), l1 = listenLoopback(&port1);
  const pid_t child = fork();
  const bool parent = child != 0;
  // parent -> child on port0's connection, child -> parent on port1's.
  int out, in;
  if (parent) {
    out = connectLoopback(port0);
    in = accept(l1, nullptr, nullptr);
  } else {
    in = accept(l0, nullptr, nullptr);
    out = connectLoopback(port1);
  }
  noDelay(out);
  noDelay(in);
  std::vector<char> src(maxBytes, 1), dst(maxBytes, 0);
  if (parent) std::printf("# tcp_stream: 2 processes, loopback, both directions at once, median of %d\n", iters);
  if (parent) std::printf("%12s %12s %12s\n", "bytes", "time(us)", "GB/s");
  for (size_t bytes = 8; bytes <= maxBytes; bytes *= 8) {
    std::vector<double> samples;
    for (int it = 0; it < iters + 3; ++it) {
      const auto t0 = std::chrono::steady_clock::now();
      exchange(out, in, src.data(), dst.data(), bytes);
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      if (it >= 3) samples.push_back(us);
    }
    std::sort(samples.begin(), samples.end());
    const double us = samples[samples.size() / 2];
    if (parent) std::printf("%12zu %12.2f %12.3f\n", bytes, us, static_cast<double>(bytes) / (us * 1e3));
  }
  if (parent) waitpid(child, nullptr, 0);
  return 0;
}
