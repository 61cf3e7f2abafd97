// How a wait ends badly, and how a kernel tells the host about its long
// waits. Plain data shared by both backends and by core.
//
// A cuda kernel runs with no host thread watching it (the call returned at
// launch), so each block has a WaitReport in pinned host memory mapped into
// the device (core/cuda_watch.cc):
//   - a wait that has lasted kWaitAnnounceNs is announced: `word` holds
//     kWaiting and the site (peer, direction, channel), so the host can check
//     that the peer waited on still exists; the word goes back to kIdle when
//     the block's waits are over, never over a failure record
//     (cuda_coop.cuh);
//   - a wait that outlasts the timeout (WEFT_TIMEOUT) is recorded as failed:
//     `kind` and `waitedNs` first, then `word` with kFailed (release), then
//     the communicator's abort flag, which stops the other blocks.
// The word is one 64-bit store, single-copy atomic on both sides, so the
// host never reads a state with another wait's site.
#pragma once

#include <stdint.h>

#include "device/portable.h"
#include "device/primitives.h"
#include "device/signature.h"

namespace weft::device {

// kPeerFailed: another rank reported a failure (a failure notice, core/failure.h).
// kMismatch: a step from site.peer belongs to another call (device/signature.h).
enum class WaitFailure : uint8_t { kNone = 0, kAborted, kTimeout, kPeerExited, kNetwork, kPeerFailed, kMismatch };

struct WaitFailureInfo {
  WaitFailure kind = WaitFailure::kNone;
  WaitSite site{-1, 0, -1};
  int64_t waitedNs = 0;
  CallSignature theirs{0, 0};  // kMismatch: the peer's call
  CallSignature ours{0, 0};    // kMismatch: this rank's call
};

enum class WaitState : uint32_t { kIdle = 0, kWaiting = 1, kFailed = 2 };

struct WaitReport {
  uint64_t word;     // packWaitWord(state, site)
  int64_t waitedNs;  // kFailed: how long the wait lasted
  uint32_t kind;     // kFailed: a WaitFailure
  uint32_t pad;
  uint64_t theirs[2];  // kMismatch: the peer's CallSignature
  uint64_t ours[2];    // kMismatch: this rank's
};

// A kernel's wait is announced once it has lasted this long: short waits
// (a slower peer, a pipeline filling) write nothing to host memory.
constexpr int64_t kWaitAnnounceNs = 1000000;  // 1 ms

// word: bits 0-1 state, bit 2 isSend, bits 8-23 channel, bits 32-63 peer.
WEFT_HD uint64_t packWaitWord(WaitState state, const WaitSite& site) {
  return static_cast<uint64_t>(state) | (site.isSend ? 4u : 0u) |
         (static_cast<uint64_t>(static_cast<uint16_t>(site.channel)) << 8) |
         (static_cast<uint64_t>(static_cast<uint32_t>(site.peer)) << 32);
}

WEFT_HD WaitState waitWordState(uint64_t word) { return static_cast<WaitState>(word & 3u); }

WEFT_HD WaitSite waitWordSite(uint64_t word) {
  WaitSite site;
  site.peer = static_cast<int32_t>(static_cast<uint32_t>(word >> 32));
  site.isSend = (word & 4u) != 0 ? 1 : 0;
  site.channel = static_cast<int32_t>(static_cast<int16_t>((word >> 8) & 0xffffu));
  return site;
}

}  // namespace weft::device
