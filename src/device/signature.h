// Call signatures: what a sender says about the call a FIFO step belongs to,
// so that the receiver can check that both ranks are in the same call.
//
// Every step a producer publishes carries two words in its FIFO's control
// page (FifoControl::sigs): a packed description of the call (collective,
// datatype, op, algorithm, root, sequence number) and its element count (for
// send/recv, the bytes), and a 32-bit hash of both beside `tail`
// (FifoControl::sigHash). The consumer compares the hash with its own call's
// before it reads the slot (the line came with `tail`: no extra transfer); a difference is a mismatched call (different
// count, type, op or root on two ranks, or one rank a call behind), and the wait fails naming both sides' arguments
// (core/failure.cc) instead of mixing unrelated data.
//
// LL and LL128 steps (prims_lines.h) have no tail: their hash travels as one
// LL pack of its own per step (FifoControl::lineSigPacks), flagged like the
// data.
//
// A word of 0 means "not checked": communicators with WEFT_CHECK_CALLS=0,
// whose producers write nothing. Steps that cross the network carry their
// signature behind the payload (transport/net/net_wire.h).
#pragma once

#include <stdint.h>

#include "device/portable.h"

namespace weft::device {

struct CallSignature {
  uint64_t word;   // packCallWord(); 0: unchecked
  uint64_t count;  // collective: work.count; send/recv: bytes
};

// word: bit 63 set; bits 56-59 func, 52-55 datatype (ncclDataType_t),
// 48-51 op kind, 44-47 algorithm, 20-39 root + 1 (0: none), 0-19 sequence.
constexpr uint64_t kCallWordValid = 1ull << 63;
constexpr uint64_t kCallSeqMask = (1ull << 20) - 1;

struct CallFields {
  int func;
  int dtype;
  int op;
  int algo;
  int root;      // -1: none
  uint32_t seq;  // low 20 bits kept
};

WEFT_HD constexpr uint64_t packCallWord(const CallFields& f) {
  return kCallWordValid | (static_cast<uint64_t>(f.func & 0xf) << 56) | (static_cast<uint64_t>(f.dtype & 0xf) << 52) |
         (static_cast<uint64_t>(f.op & 0xf) << 48) | (static_cast<uint64_t>(f.algo & 0xf) << 44) |
         (static_cast<uint64_t>(static_cast<uint32_t>(f.root + 1) & 0xfffffu) << 20) | (f.seq & kCallSeqMask);
}

// `word` with its sequence field set to the low bits of `seq`, the other
// fields kept; 0 (unchecked) stays 0. A repeated call's signature (the same
// call but its sequence number: core/launch.cc runRepeat).
WEFT_HD constexpr uint64_t withCallSeq(uint64_t word, uint64_t seq) {
  return word == 0 ? 0 : (word & ~kCallSeqMask) | (seq & kCallSeqMask);
}

WEFT_HD constexpr CallFields unpackCallWord(uint64_t word) {
  return CallFields{static_cast<int>((word >> 56) & 0xf),         static_cast<int>((word >> 52) & 0xf),
                    static_cast<int>((word >> 48) & 0xf),         static_cast<int>((word >> 44) & 0xf),
                    static_cast<int>((word >> 20) & 0xfffff) - 1, static_cast<uint32_t>(word & kCallSeqMask)};
}

// 32 bits of (word, count) that every step carries in its FIFO's tail line
// (step_fifo.h): never 0 for a signed call, 0 for none.
WEFT_HD constexpr uint32_t callHash(const CallSignature& sig) {
  if (sig.word == 0) return 0;
  uint64_t x = sig.word ^ (sig.count * 0x9E3779B97F4A7C15ull);
  x ^= x >> 29;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 32;
  return static_cast<uint32_t>(x) | 1u;
}

}  // namespace weft::device
