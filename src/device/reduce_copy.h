// The one data loop: read up to kMaxSrcs inputs, combine them, write the
// result to up to kMaxDsts outputs. Every verb of every protocol ends here.
//
// Threads of a team take elements i = rank, rank + size, ... so a CUDA block
// coalesces; on the host the team is one thread (size() is a constant 1) and
// the loop is a plain contiguous loop the compiler vectorises. Sources and
// destinations may alias element-for-element (in-place collectives), so no
// restrict qualifiers.
#pragma once

#include <string.h>

#include "device/portable.h"

namespace weft::device {

constexpr int kMaxSrcs = 4;
constexpr int kMaxDsts = 4;

// 16 bytes moved as one unit: one 128-bit load or store per pointer.
struct alignas(16) Pack16 {
  uint32_t words[4];
};

template <typename T>
union PackOf {
  Pack16 pack;
  T elems[16 / sizeof(T)];
};

// The vector path: every pointer 16-byte aligned, nPacks whole packs. Each
// thread keeps Unroll packs in flight, spaced a team apart so that a warp's
// loads stay contiguous.
template <int NSrc, int NDst, int Unroll, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopyPacks(Coop& coop, const RedOp& op, const T* const* s, T* const* d, int64_t nPacks, int pre,
                             bool post) {
  constexpr int kElems = 16 / static_cast<int>(sizeof(T));
  const int64_t stride = coop.size();
  for (int64_t base = coop.threadRank(); base < nPacks; base += stride * Unroll) {
    PackOf<T> acc[Unroll];
    WEFT_UNROLL
    for (int u = 0; u < Unroll; ++u) {
      const int64_t idx = base + u * stride;
      if (idx < nPacks) acc[u].pack = reinterpret_cast<const Pack16*>(s[0])[idx];
      if (idx < nPacks && pre == 0)
        for (int e = 0; e < kElems; ++e) acc[u].elems[e] = op.pre(acc[u].elems[e]);
    }
    WEFT_UNROLL
    for (int k = 1; k < NSrc; ++k) {
      WEFT_UNROLL
      for (int u = 0; u < Unroll; ++u) {
        const int64_t idx = base + u * stride;
        if (idx >= nPacks) continue;
        PackOf<T> in;
        in.pack = reinterpret_cast<const Pack16*>(s[k])[idx];
        if (k == pre)
          for (int e = 0; e < kElems; ++e) in.elems[e] = op.pre(in.elems[e]);
        for (int e = 0; e < kElems; ++e) acc[u].elems[e] = op(acc[u].elems[e], in.elems[e]);
      }
    }
    WEFT_UNROLL
    for (int u = 0; u < Unroll; ++u) {
      const int64_t idx = base + u * stride;
      if (idx >= nPacks) continue;
      if (post)
        for (int e = 0; e < kElems; ++e) acc[u].elems[e] = op.post(acc[u].elems[e]);
      WEFT_UNROLL
      for (int k = 0; k < NDst; ++k) reinterpret_cast<Pack16*>(d[k])[idx] = acc[u].pack;
    }
  }
}

template <int NSrc, int NDst, typename T>
WEFT_HD bool allAligned16(const T* const* s, T* const* d) {
  uintptr_t bits = 0;
  for (int k = 0; k < NSrc; ++k) bits |= reinterpret_cast<uintptr_t>(s[k]);
  for (int k = 0; k < NDst; ++k) bits |= reinterpret_cast<uintptr_t>(d[k]);
  return (bits & 15) == 0;
}

#if !WEFT_DEVICE_PASS
// Host, one thread, a result for two or more outputs: each block of
// kHostBlockBytes is combined into the first output (the own buffer) and
// then memcpy'd to the others. Stored from one vector loop with two store
// streams, the stores into the output that is a peer's FIFO slot (or its
// user buffer) stalled the loop: the ring's recvReduceCopySend took 87 % of
// a 2-rank 32 KiB AllReduce, and a two-thread benchmark of that pattern ran
// 3-4x slower fused than split (one store stream each). Blocks were 2 KiB
// until 2026-11-28; in hours when the development VM's cores were far
// apart (a cache-line hand-off of ~240 ns rather than ~80), the FIFO ring
// ran 1.2-1.5x faster with 8 KiB blocks (2 ranks, 64 KiB-1 MiB) and
// 1.35-1.6x with 16 KiB; with near cores all three were level. 8 KiB keeps
// a block of each source and the result in a 32 KiB L1 between the passes
// (docs/performance.md, "The ring's two-output blocks").
constexpr int64_t kHostBlockBytes = 8192;

template <int NSrc, int NDst, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopyFixed(Coop& coop, const RedOp& op, const T* const* srcs, T* const* dsts, int64_t n,
                             int preSource, bool applyPost);

// memcpy out of line: with a length the compiler knows to be at most a
// block it expands the copy inline as `rep movsq`, which with 8 KiB blocks
// made the 2-rank FIFO ring ~7 % slower at 64 KiB-1 MiB (three alternated
// rounds, 1 MiB 83-85 against 77-78 us; level with 2 KiB blocks).
__attribute__((noinline)) inline void hostCopy(void* to, const void* from, size_t bytes) { memcpy(to, from, bytes); }

template <int NSrc, int NDst, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceThenCopy(Coop& coop, const RedOp& op, const T* const* srcs, T* const* dsts, int64_t n, int preSource,
                            bool applyPost) {
  constexpr int64_t kBlock = kHostBlockBytes / static_cast<int64_t>(sizeof(T));
  for (int64_t base = 0; base < n; base += kBlock) {
    const int64_t len = minOf(kBlock, n - base);
    const T* s[NSrc];
    for (int k = 0; k < NSrc; ++k) s[k] = srcs[k] + base;
    T* first[1] = {dsts[0] + base};
    reduceCopyFixed<NSrc, 1>(coop, op, s, first, len, preSource, applyPost);
    for (int k = 1; k < NDst; ++k)
      if (dsts[k] != dsts[0]) hostCopy(dsts[k] + base, dsts[0] + base, static_cast<size_t>(len) * sizeof(T));
  }
}
#endif

template <int NSrc, int NDst, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopyFixed(Coop& coop, const RedOp& op, const T* const* srcs, T* const* dsts, int64_t n,
                             int preSource, bool applyPost) {
  // Copies with nothing to compute go through memcpy on the host, once per
  // destination: it is faster than any loop we could write (with
  // non-temporal stores for big runs), and the second pass reads a source
  // that is at most one FIFO slot and still in cache. A fused byte loop with
  // two outputs ran at a third of that (AllGather, 32 KiB: 9 us vs 3 us).
#if !WEFT_DEVICE_PASS
  if constexpr (NSrc == 1 && !RedOp::kHasPre && !RedOp::kHasPost) {
    if (coop.size() == 1) {
      for (int k = 0; k < NDst; ++k)
        if (dsts[k] != srcs[0]) memcpy(dsts[k], srcs[0], static_cast<size_t>(n) * sizeof(T));
      return;
    }
  }
  if constexpr (NDst >= 2) {
    if (coop.size() == 1) return reduceThenCopy<NSrc, NDst>(coop, op, srcs, dsts, n, preSource, applyPost);
  }
#endif
  const T* s[NSrc];
  T* d[NDst];
  for (int k = 0; k < NSrc; ++k) s[k] = srcs[k];
  for (int k = 0; k < NDst; ++k) d[k] = dsts[k];
  const int pre = RedOp::kHasPre ? preSource : -1;
  const bool post = RedOp::kHasPost && applyPost;
  int64_t done = 0;
#if WEFT_DEVICE_PASS
  // A GPU team moves aligned data 16 bytes per load; the host's single
  // thread gets the same from the compiler's vectorised element loop.
  if (allAligned16<NSrc, NDst>(s, d)) {
    const int64_t nPacks = n * static_cast<int64_t>(sizeof(T)) / 16;
    reduceCopyPacks<NSrc, NDst, 4>(coop, op, s, d, nPacks, pre, post);
    done = nPacks * 16 / static_cast<int64_t>(sizeof(T));
  }
#endif
  for (int64_t i = done + coop.threadRank(); i < n; i += coop.size()) {
    T acc = pre == 0 ? op.pre(s[0][i]) : s[0][i];
    WEFT_UNROLL
    for (int k = 1; k < NSrc; ++k) acc = op(acc, k == pre ? op.pre(s[k][i]) : s[k][i]);
    if (post) acc = op.post(acc);
    WEFT_UNROLL
    for (int k = 0; k < NDst; ++k) d[k][i] = acc;
  }
}

template <int NSrc, int MinDsts, int MaxDsts, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopyDsts(Coop& coop, const RedOp& op, const T* const* srcs, T* const* dsts, int nDsts, int64_t n,
                            int preSource, bool applyPost) {
  if constexpr (MinDsts == MaxDsts) {
    reduceCopyFixed<NSrc, MaxDsts>(coop, op, srcs, dsts, n, preSource, applyPost);
  } else {
    if (nDsts == MaxDsts) return reduceCopyFixed<NSrc, MaxDsts>(coop, op, srcs, dsts, n, preSource, applyPost);
    reduceCopyDsts<NSrc, MinDsts, MaxDsts - 1>(coop, op, srcs, dsts, nDsts, n, preSource, applyPost);
  }
}

// Combines nSrcs inputs into nDsts outputs, in source order. srcs[preSource]
// is the rank's own input, the only one the pre-op applies to (-1: none; the
// peers' inputs arrive already scaled); the result is post-processed when
// applyPost is set. The bounds say how many sources and
// destinations the caller can pass; only those loops are instantiated (a
// ring verb knows its counts exactly, so it gets exactly one loop).
template <int MinSrcs, int MaxSrcs, int MinDsts, int MaxDsts, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopy(Coop& coop, const RedOp& op, const T* const* srcs, int nSrcs, T* const* dsts, int nDsts,
                        int64_t n, int preSource, bool applyPost) {
  static_assert(1 <= MinSrcs && MinSrcs <= MaxSrcs && MaxSrcs <= kMaxSrcs, "bad source bounds");
  static_assert(1 <= MinDsts && MinDsts <= MaxDsts && MaxDsts <= kMaxDsts, "bad destination bounds");
  if (n <= 0) return;
  if constexpr (MinSrcs == MaxSrcs) {
    reduceCopyDsts<MaxSrcs, MinDsts, MaxDsts>(coop, op, srcs, dsts, nDsts, n, preSource, applyPost);
  } else {
    if (nSrcs == MaxSrcs)
      return reduceCopyDsts<MaxSrcs, MinDsts, MaxDsts>(coop, op, srcs, dsts, nDsts, n, preSource, applyPost);
    reduceCopy<MinSrcs, MaxSrcs - 1, MinDsts, MaxDsts>(coop, op, srcs, nSrcs, dsts, nDsts, n, preSource, applyPost);
  }
}

}  // namespace weft::device
