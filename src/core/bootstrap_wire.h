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
  SocketAddress prev;  // and of rank - 1, whose liveness the rank checks while it waits for its ring connection
};

// Prefix of every connection between ranks.
struct PeerHeader {
  uint64_t secret;
  int32_t from;
  int32_t tag;
  uint64_t bytes;
};

constexpr int32_t kRingTag = -1;    // the connection becomes the ring link from `from`
constexpr int32_t kProbeTag = -2;   // a liveness probe: no body, dropped on arrival
constexpr int32_t kNoticeTag = -3;  // a FailureNotice follows

// The largest message a peer may announce (a bootstrap message is a few KiB).
constexpr uint64_t kMaxMessageBytes = 1ull << 30;

// Body of a kNoticeTag message: rank `origin` failed (or aborted); `reporter`
// found out and tells everyone. `afterInit`: the reporter had passed init's
// final barrier, so every rank has entered it and sent what it needs.
struct FailureNotice {
  int32_t origin;
  int32_t reporter;
  int32_t afterInit;
  char why[500];
};
static_assert(sizeof(FailureNotice) == 512, "the notice's size is part of the bootstrap wire format");

}  // namespace weft::core::wire
