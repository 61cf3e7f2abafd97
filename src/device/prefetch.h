// Cache hints for the host's line protocols: ask for a line before the
// code needs it, so that its transfer from the core that last wrote it
// overlaps other work instead of stalling a load or a store. Hints only:
// they change no value and no ordering, and the device pass compiles them
// away (there the line protocols' lines meet in L2, not in two cores'
// caches).
#pragma once

#include "device/portable.h"

#if !WEFT_DEVICE_PASS && defined(__x86_64__)
#include <cpuid.h>
#endif

namespace weft::device {

#if !WEFT_DEVICE_PASS && defined(__x86_64__)
// PREFETCHW (CPUID 0x80000001, ECX bit 8): every AMD64 processor, Intel
// since Broadwell. Asked once, at load; where it is missing the write hint
// is skipped rather than relying on the opcode decoding as a no-op.
inline bool cpuHasPrefetchW() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001u, &a, &b, &c, &d) != 0 && (c & (1u << 8)) != 0;
}
inline const bool kHostPrefetchW = cpuHasPrefetchW();
#endif

// The line at p will be read soon.
WEFT_HD void prefetchForRead(const void* p) {
#if WEFT_DEVICE_PASS
  (void)p;
#else
  __builtin_prefetch(p, 0, 3);
#endif
}

// The line at p will be written soon: fetch it owned, so that the stores
// find it writable instead of each waiting for the other core to give it up.
WEFT_HD void prefetchForWrite(const void* p) {
#if WEFT_DEVICE_PASS
  (void)p;
#elif defined(__x86_64__)
  if (kHostPrefetchW) asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 1, 3);  // AArch64: PRFM PSTL1KEEP
#endif
}

}  // namespace weft::device
