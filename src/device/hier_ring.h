// Hierarchical ring AllReduce, for communicators of several nodes (hosts or
// WEFT_RANKS_PER_NODE groups) of m ranks each: the data is split into m
// segments, one per local index.
//   1. reduce-scatter around the node's ring: local rank i ends with
//      segment i reduced over its node;
//   2. allreduce of segment i around the ring of the N ranks with local
//      index i, one per node (m such rings run in parallel);
//   3. allgather around the node's ring.
// Only 1/m of the data crosses between nodes per rank: about
// 2(m+N) alpha + 2 S/B_intra + 2 S/(m B_inter) instead of the flat ring's
// 2 mN alpha with every byte on the slowest link.
// Phases 1 and 3 are ring loops over uneven segments (the last may be
// shorter or empty; sender and receiver agree on each piece's length, and
// an empty piece moves nothing on either side). Phase 2 is ringAllReduce on
// partial results, so its primitives carry the functor without its pre-op
// (NoPreOp): the pre-op was applied when phase 1 read the inputs.
#pragma once

#include <type_traits>

#include "device/portable.h"
#include "device/ring.h"
#include "device/work.h"

namespace weft::device {

// A functor without its pre-op, for combining partial results.
template <typename RedOp>
struct NoPreOp : RedOp {
  static constexpr bool kHasPre = false;
  WEFT_HD explicit NoPreOp(const RedOp& op) : RedOp(op) {}
  template <typename U>
  WEFT_HD U pre(U x) const {
    return x;
  }
};

// The functor that combines partial results: RedOp itself when it has no
// pre-op (no second instantiation of the verbs for an identical functor).
template <typename RedOp>
using PartialOp = std::conditional_t<RedOp::kHasPre, NoPreOp<RedOp>, RedOp>;

template <typename T, typename IntraPrims, typename InterPrims>
WEFT_HD void hierRingAllReduce(IntraPrims& intra, InterPrims& inter, const HierView& h, const CollWork& work) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  const int m = h.perNode;
  const int64_t seg = roundUp(divUp(n, static_cast<int64_t>(m)), static_cast<int64_t>(work.alignElems));
  auto segOffset = [&](int j) { return minOf(n, j * seg); };
  auto segLength = [&](int j) { return minOf(n, (j + 1) * seg) - segOffset(j); };
  // This chunk of segment j: `base` elements in, at most `chunk` long.
  auto piece = [&](int j, int64_t base) { return maxOf<int64_t>(0, minOf(chunk, segLength(j) - base)); };
  for (int64_t base = 0; base < seg; base += chunk) {
    int j = ringMod(h.local - 1, m);
    intra.send(src + segOffset(j) + base, piece(j, base));
    for (int s = 2; s < m; ++s) {
      j = ringMod(h.local - s, m);
      intra.recvReduceSend(src + segOffset(j) + base, piece(j, base));
    }
    j = h.local;
    intra.recvReduceCopy(src + segOffset(j) + base, dst + segOffset(j) + base, piece(j, base), false);
  }
  CollWork across = work;
  across.sendbuff = dst + segOffset(h.local);
  across.recvbuff = dst + segOffset(h.local);
  across.channelStart = 0;
  across.channelCount = static_cast<uint64_t>(segLength(h.local));
  const RingView ring{h.nodes, h.node, -1, -1, nullptr};
  ringAllReduce<T>(inter, ring, across);
  for (int64_t base = 0; base < seg; base += chunk) {
    int j = h.local;
    intra.directSend(dst + segOffset(j) + base, piece(j, base));
    for (int s = 1; s < m - 1; ++s) {
      j = ringMod(h.local - s, m);
      intra.recvCopySend(dst + segOffset(j) + base, piece(j, base));
    }
    j = ringMod(h.local + 1, m);
    intra.recv(dst + segOffset(j) + base, piece(j, base));
  }
}

}  // namespace weft::device
