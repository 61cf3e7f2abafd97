// The cuda backend's LL128 line access (device/ll128_line.h): lane l of a
// line (eight consecutive threads of a warp) stores and loads bytes
// [16 l, 16 l + 16) with one v2.u64 access; the warp's eight accesses to a
// 128-byte line travel as one transaction. The flag is lane 7's second
// word. volatile: no caching, the full width; ordering comes from the flag.
#pragma once

#include <cstdint>

namespace weft::device {

__device__ inline void ll128StoreUnit(char* line, int lane, const uint64_t* words, uint64_t flag) {
  const uint64_t second = lane == kLL128Lanes - 1 ? flag : words[1];
  asm volatile("st.volatile.global.v2.u64 [%0], {%1, %2};" ::"l"(line + 16 * lane), "l"(words[0]), "l"(second)
               : "memory");
}

// Every lane loads its 16 bytes; only the flag lane can tell whether they
// are the step's (its own check; the warp's vote decides for all).
__device__ inline bool ll128LoadUnit(const char* line, int lane, uint64_t flag, uint64_t* words) {
  uint64_t a, b;
  asm volatile("ld.volatile.global.v2.u64 {%0, %1}, [%2];" : "=l"(a), "=l"(b) : "l"(line + 16 * lane) : "memory");
  words[0] = a;
  words[1] = b;
  return lane != kLL128Lanes - 1 || b == flag;
}

}  // namespace weft::device
