// Call signatures: what a sender says about the call a FIFO step belongs to,
// so that the receiver can check that both ranks are in the same call.
//
// Every step a producer publishes carries two words beside its size
// (FifoControl::sigs): a packed description of the call (collective,
// datatype, op, algorithm, root, sequence number) and its element count (for
// send/recv, the bytes). The consumer compares them with its own call before
// it reads the slot; a difference is a mismatched call (different count, type,
// op or root on two ranks, or one rank a call behind), and the wait fails
// naming both sides' arguments (core/failure.cc) instead of mixing unrelated
// data.
//
// A word of 0 means "not checked": steps delivered by the network transport
// (the proxy moves the slot bytes, not the signature), and communicators with
// WEFT_CHECK_CALLS=0, whose producers write nothing.
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

WEFT_HD constexpr CallFields unpackCallWord(uint64_t word) {
  return CallFields{static_cast<int>((word >> 56) & 0xf),         static_cast<int>((word >> 52) & 0xf),
                    static_cast<int>((word >> 48) & 0xf),         static_cast<int>((word >> 44) & 0xf),
                    static_cast<int>((word >> 20) & 0xfffff) - 1, static_cast<uint32_t>(word & kCallSeqMask)};
}

}  // namespace weft::device
