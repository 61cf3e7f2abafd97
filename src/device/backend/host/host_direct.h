// What the host team asks of the communicator in direct mode between
// processes (prims_simple.h, reach kReachShared): where its own buffers lie,
// how to reach a peer's posted output or input, and cross-memory writes.
// The core implements it (core/direct_peers.h); without one the team posts
// bare addresses and writes through the slots, except to its own process.
#pragma once

#include <cstdint>

#include "device/step_fifo.h"

namespace weft::device {

class HostDirect {
 public:
  virtual ~HostDirect() = default;
  // The post for an output buffer of `bytes` at `base` in this process.
  virtual DirectPost describe(const void* base, uint64_t bytes) = 0;
  // How this rank writes into `peer`'s posted buffer, and at which address
  // (*addr: a pointer here for kPointer, the peer's address for kCrossMemory).
  virtual DirectWay resolve(int peer, const DirectPost& post, uint64_t* addr) = 0;
  // Where this rank reads `peer`'s posted input in place (direct reads,
  // device/direct_reads.h): true with *addr a pointer here (its own process,
  // or its mapping of the posted segment), false when it cannot.
  virtual bool resolveRead(int peer, const DirectPost& post, uint64_t* addr) = 0;
  // Copies `bytes` from `from` to `remote` in peer's process. False when the
  // kernel refused; the bytes are then in `slot` instead.
  virtual bool crossWrite(int peer, const void* from, uint64_t remote, void* slot, uint64_t bytes) = 0;
};

}  // namespace weft::device
