// LL lines: data and its step flag in one store that the reader sees whole,
// so a reader that finds the flag it expects also holds the data; nothing
// else orders them (no tail counter, no fence). See docs/fifo-protocol.md.
//
// The unit of the LL protocol is a pack: 8 bytes of payload in 16 bytes of
// line memory, the same on every backend, so sizes and offsets agree:
//   host: two 8-byte lines {4 bytes of data, 4-byte flag}. An aligned 8-byte
//         store is single-copy atomic on x86-64 and AArch64 alike; 16-byte
//         stores are so only on some CPUs (AVX-enumerating x86, AArch64 with
//         LSE2), and GCC makes 16-byte __atomic stores locked or out-of-line.
//   cuda: one 16-byte line {data lo, flag, data hi, flag} written by one
//         st.volatile.v4 (one memory transaction), read by one ld.volatile.v4.
// The flag of step s is the low 32 bits of s + 1: a line left from step
// s - kLineSteps (or the zeroed memory of a step never written) never
// matches, and since every slot is written before step 2^32 - 1 (flag 0),
// the wrap of the 32-bit flag is harmless.
#pragma once

#include "device/portable.h"

#if WEFT_DEVICE_PASS
#include "device/backend/cuda/ll_access.cuh"
#endif

namespace weft::device {

constexpr int kLLPackLineBytes = 16;  // line memory per pack
constexpr int kLLPackDataBytes = 8;   // payload per pack

WEFT_HD constexpr uint32_t llFlag(uint64_t step) { return static_cast<uint32_t>(step + 1); }

#if !WEFT_DEVICE_PASS
// Relaxed atomics: each 8-byte line is read and written whole (plain mov /
// str on both ISAs); a line's own contents are all that a reader relies on.
// Always inlined: two stores, and a call per pack costs more than they do
// (GCC once left the store out of line in one-shot's publish loop: LL
// AllReduce at 2 ranks, 512 B-4 KiB, took 1.3-1.5x as long).
[[gnu::always_inline]] inline void llStorePack(char* at, uint64_t data, uint32_t flag) {
  uint64_t* line = reinterpret_cast<uint64_t*>(at);
  const uint64_t tag = static_cast<uint64_t>(flag) << 32;
  __atomic_store_n(&line[0], tag | (data & 0xffffffffu), __ATOMIC_RELAXED);
  __atomic_store_n(&line[1], tag | (data >> 32), __ATOMIC_RELAXED);
}

// True, with the payload in *data, when both lines carry `flag`.
[[gnu::always_inline]] inline bool llLoadPack(const char* at, uint32_t flag, uint64_t* data) {
  const uint64_t* line = reinterpret_cast<const uint64_t*>(at);
  const uint64_t lo = __atomic_load_n(&line[0], __ATOMIC_RELAXED);
  if (static_cast<uint32_t>(lo >> 32) != flag) return false;
  const uint64_t hi = __atomic_load_n(&line[1], __ATOMIC_RELAXED);
  if (static_cast<uint32_t>(hi >> 32) != flag) return false;
  *data = (lo & 0xffffffffu) | (hi << 32);
  return true;
}
#endif

}  // namespace weft::device
