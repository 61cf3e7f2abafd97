// Messages on bootstrap connections (fixed-size PODs; all ranks run the same
// library build, so no byte-order conversion).
#pragma once

#include <cstdint>

#include "common/socket.h"

namespace weft::core::wire {

constexpr uint64_t kHelloMagic = 0x5765667448656c6full;  // "WeftHello"

// Rank -> root.
struct Hello {
  uint64_t magic;
  uint64_t secret;
  int32_t rank;
  int32_t nranks;
  SocketAddress listen;
};

// Root -> rank.
struct Welcome {
  int32_t status;  // 0 ok; otherwise `message` says why
  char message[252];
  SocketAddress next;  // the listen address of rank + 1
};

// Prefix of every connection between ranks.
struct PeerHeader {
  uint64_t secret;
  int32_t from;
  int32_t tag;
  uint64_t bytes;
};

constexpr int32_t kRingTag = -1;

}  // namespace weft::core::wire
