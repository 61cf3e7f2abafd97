// Helpers for tests that drive network plugin tables directly: environment
// settings for one scope, the socket network on loopback, a connected pair of
// comms, byte patterns, and polling a request with a deadline.
#pragma once

#include <dirent.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "scoped_env.h"
#include "transport/net/net_v8.h"
#include "transport/net/socket_net.h"

namespace weft::testing {

// The socket network, initialised once per process on the loopback interface
// only (its interface list is cached at the first init). Device 0 is "lo".
inline const weftNet_v8_t& loopbackNet() {
  static const bool ready = [] {
    ScopedEnv ifname("NCCL_SOCKET_IFNAME", "=lo");
    return transport::socketNet().init(nullptr) == ncclSuccess;
  }();
  EXPECT_TRUE(ready) << transport::socketNetLastError();
  return transport::socketNet();
}

// Open file descriptors of this process (sockets included).
inline int openFdCount() {
  int count = 0;
  if (DIR* dir = opendir("/proc/self/fd")) {
    while (readdir(dir) != nullptr) ++count;
    closedir(dir);
  }
  return count - 3;  // ".", ".." and the directory's own descriptor
}

// Both ends of one socket network connection; closed on destruction.
struct CommPair {
  const weftNet_v8_t* api = nullptr;
  void* send = nullptr;
  void* recv = nullptr;
  void* sendMr = nullptr;
  void* recvMr = nullptr;

  CommPair() = default;
  CommPair(const CommPair&) = delete;
  CommPair& operator=(const CommPair&) = delete;
  ~CommPair() { close(); }
  void closeSend() {
    if (send) {
      EXPECT_EQ(api->closeSend(send), ncclSuccess);
    }
    send = nullptr;
  }
  void closeRecv() {
    if (recv) {
      EXPECT_EQ(api->closeRecv(recv), ncclSuccess);
    }
    recv = nullptr;
  }
  void close() {
    closeSend();
    closeRecv();
  }
};

// Listens, connects and accepts on loopback (one thread: connect does not
// wait for accept). The NCCL_SOCKET_* settings in force at listen apply.
inline void connectPair(CommPair* pair) {
  const weftNet_v8_t& api = loopbackNet();
  pair->api = &api;
  char handle[kNetHandleBytes] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(api.listen(0, handle, &listenComm), ncclSuccess) << transport::socketNetLastError();
  weftNetDeviceHandle_v8_t* devComm = nullptr;
  ASSERT_EQ(api.connect(0, handle, &pair->send, &devComm), ncclSuccess) << transport::socketNetLastError();
  ASSERT_NE(pair->send, nullptr);
  const Deadline deadline = Deadline::afterSec(10);
  while (pair->recv == nullptr && !deadline.expired())
    ASSERT_EQ(api.accept(listenComm, &pair->recv, &devComm), ncclSuccess) << transport::socketNetLastError();
  EXPECT_EQ(api.closeListen(listenComm), ncclSuccess);
  ASSERT_NE(pair->recv, nullptr) << "accept did not finish in 10 s";
  ASSERT_EQ(api.regMr(pair->send, nullptr, 0, kNetPtrHost, &pair->sendMr), ncclSuccess);
  ASSERT_EQ(api.regMr(pair->recv, nullptr, 0, kNetPtrHost, &pair->recvMr), ncclSuccess);
}

// Byte `offset` of message number `message`: differs between neighbouring
// bytes, pieces and messages, so a misplaced or stale byte shows.
inline uint8_t patternByte(uint64_t message, int64_t offset) {
  const uint64_t x = (static_cast<uint64_t>(offset) + 1) * 0x9E3779B97F4A7C15ull ^ (message * 0xC2B2AE3D27D4EB4Full);
  return static_cast<uint8_t>(x >> 56);
}

inline std::vector<uint8_t> patternMessage(uint64_t message, int64_t bytes) {
  std::vector<uint8_t> out(static_cast<size_t>(bytes));
  for (int64_t i = 0; i < bytes; ++i) out[static_cast<size_t>(i)] = patternByte(message, i);
  return out;
}

// The first offset in [0, bytes) where `data` is not message `message`'s
// pattern, or -1.
inline int64_t firstMismatch(const uint8_t* data, uint64_t message, int64_t bytes) {
  for (int64_t i = 0; i < bytes; ++i)
    if (data[i] != patternByte(message, i)) return i;
  return -1;
}

}  // namespace weft::testing
