// LL128 lines: 128 bytes, 120 of payload (15 words of 8 bytes) and an 8-byte
// flag, the step's, in the last word. Where a 128-byte store is seen whole,
// a reader that finds the flag holds the whole line; see
// docs/fifo-protocol.md.
//
// A line is handled by kLL128Lanes threads, each owning kLL128UnitWords
// consecutive words (a unit); the flag is the last word of the last unit:
//   cuda: 8 lanes of 16 bytes, as NCCL does it. Eight consecutive threads of
//         a warp store one line with st.volatile.v2.u64 each, which the GPU
//         issues as one 128-byte transaction; the reader's eight loads come
//         back as one, so the flag lane seeing the flag means every lane's
//         words are the step's. Safe only where that holds (one GPU, NVLink:
//         the planner's ll128Possible).
//   host: no CPU promises that a 128-byte store is seen whole, so the host
//         emulates LL128 safely instead: one thread owns the line, stores
//         the 15 payload words, then the flag with release; the reader
//         loads the flag with acquire, then the words. The ordering costs
//         nothing on x86-64 (every store is a release there) and one
//         stlr/ldar pair per line on AArch64.
// The flag of step s is s + 1, all 64 bits: a line left from an earlier step
// (or the zeroed memory of a step never written) never matches. The region
// holds LL128 lines only (step_fifo.h LineRegion), so no line is read in a
// format it was not written in.
#pragma once

#include "device/portable.h"

namespace weft::device {

constexpr int kLL128LineBytes = 128;
constexpr int kLL128LineWords = 16;
constexpr int kLL128PayloadWords = 15;
constexpr int kLL128PayloadBytes = kLL128PayloadWords * 8;

WEFT_HD constexpr uint64_t ll128Flag(uint64_t step) { return step + 1; }

#if WEFT_DEVICE_PASS
constexpr int kLL128Lanes = 8;
#else
constexpr int kLL128Lanes = 1;
#endif
constexpr int kLL128UnitWords = kLL128LineWords / kLL128Lanes;

// The global payload word a unit's word j holds: line * 15 + lane * unit
// words + j (the flag lane's last word is the flag, no payload).
WEFT_HD constexpr int64_t ll128PayloadWord(int64_t line, int lane, int j) {
  return line * kLL128PayloadWords + static_cast<int64_t>(lane) * kLL128UnitWords + j;
}
WEFT_HD constexpr bool ll128IsFlag(int lane, int j) { return lane * kLL128UnitWords + j == kLL128LineWords - 1; }

}  // namespace weft::device

#if WEFT_DEVICE_PASS
#include "device/backend/cuda/ll128_access.cuh"
#else
namespace weft::device {

// Stores one line (lane 0 owns it all): the payload words, then the flag
// with release, so a reader that acquires the flag sees the payload.
inline void ll128StoreUnit(char* line, int /*lane*/, const uint64_t* words, uint64_t flag) {
  uint64_t* w = reinterpret_cast<uint64_t*>(line);
  for (int j = 0; j < kLL128PayloadWords; ++j) __atomic_store_n(&w[j], words[j], __ATOMIC_RELAXED);
  __atomic_store_n(&w[kLL128PayloadWords], flag, __ATOMIC_RELEASE);
}

// True, with the payload in words[0..14], when the line carries `flag`.
inline bool ll128LoadUnit(const char* line, int /*lane*/, uint64_t flag, uint64_t* words) {
  const uint64_t* w = reinterpret_cast<const uint64_t*>(line);
  if (__atomic_load_n(&w[kLL128PayloadWords], __ATOMIC_ACQUIRE) != flag) return false;
  for (int j = 0; j < kLL128PayloadWords; ++j) words[j] = __atomic_load_n(&w[j], __ATOMIC_RELAXED);
  return true;
}

}  // namespace weft::device
#endif
