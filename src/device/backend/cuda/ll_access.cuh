// The cuda backend's LL line access (device/ll_line.h): one 16-byte line
// {data lo, flag, data hi, flag} per pack, stored and loaded as one v4
// access, which the GPU performs as a single transaction: a reader sees
// both flags match only with the data stored beside them. volatile here is
// the access width and the no-caching guarantee the protocol relies on, not
// ordering: the flags carry the ordering.
#pragma once

#include <cstdint>

namespace weft::device {

__device__ inline void llStorePack(char* at, uint64_t data, uint32_t flag) {
  const uint32_t lo = static_cast<uint32_t>(data);
  const uint32_t hi = static_cast<uint32_t>(data >> 32);
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(at), "r"(lo), "r"(flag), "r"(hi), "r"(flag)
               : "memory");
}

__device__ inline bool llLoadPack(const char* at, uint32_t flag, uint64_t* data) {
  uint32_t lo, flagLo, hi, flagHi;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(lo), "=r"(flagLo), "=r"(hi), "=r"(flagHi)
               : "l"(at)
               : "memory");
  if (flagLo != flag || flagHi != flag) return false;
  *data = static_cast<uint64_t>(lo) | (static_cast<uint64_t>(hi) << 32);
  return true;
}

}  // namespace weft::device
