// Ring algorithms, written only in primitive verbs. Each runs on one
// channel's share of the data (work.channelStart/channelCount) and is the
// same code on the host and in a CUDA block.
#pragma once

#include "device/portable.h"
#include "device/work.h"

namespace weft::device {

// AllReduce on k ranks = reduce-scatter then allgather around the ring.
// Each loop iteration covers k segments of realChunk elements; segment j is
// finished (fully reduced) at ring position j and then travels k-1 hops.
//   send -> recvReduceSend x(k-2) -> recvReduceCopySend -> recvCopySend x(k-2) -> recv
// In direct mode the first send may leave its input to be read in place by
// the next rank (directReadSend): this call cannot end before it has been,
// since the segment's final value, which this rank receives, is made from it.
template <typename T, typename Prims>
WEFT_HD void ringAllReduce(Prims& prims, const RingView& ring, const CollWork& work) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int k = ring.nranks;
  if (k == 1) return prims.localCopy(src, dst, n);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  const int64_t align = static_cast<int64_t>(work.alignElems);
  for (int64_t base = 0; base < n; base += chunk * k) {
    // Shrink the chunk at the tail so every rank still gets a share.
    const int64_t realChunk = minOf(chunk, roundUp(divUp(n - base, static_cast<int64_t>(k)), align));
    auto segOffset = [&](int j) { return base + j * realChunk; };
    auto segLength = [&](int j) { return maxOf<int64_t>(0, minOf(realChunk, n - segOffset(j))); };
    int j = ringMod(ring.index - 1, k);
    prims.directReadSend(src + segOffset(j), segLength(j));
    for (int s = 2; s < k; ++s) {
      j = ringMod(ring.index - s, k);
      prims.recvReduceSend(src + segOffset(j), segLength(j));
    }
    // From here on every segment is final: in direct mode it goes straight
    // into the next rank's output buffer.
    j = ring.index;
    prims.directRecvReduceCopySend(src + segOffset(j), dst + segOffset(j), segLength(j), true);
    for (int s = 1; s < k - 1; ++s) {
      j = ringMod(ring.index - s, k);
      prims.directRecvCopySend(dst + segOffset(j), segLength(j));
    }
    j = ringMod(ring.index + 1, k);
    prims.directRecv(dst + segOffset(j), segLength(j));
  }
}

// ReduceScatter: rank r ends with the reduction of every rank's segment r.
// The segment finishing at position p starts at p+1 and gathers k-1 inputs.
// In direct mode the first send may leave its input to be read in place by
// the next rank (directReadSend); nothing of that segment comes back to
// this rank, so the call ends by waiting for those reads (directReadsDone).
template <typename T, typename Prims>
WEFT_HD void ringReduceScatter(Prims& prims, const RingView& ring, const CollWork& work) {
  const T* src = static_cast<const T*>(work.sendbuff);
  T* dst = static_cast<T*>(work.recvbuff);
  const int64_t count = static_cast<int64_t>(work.count);
  const int64_t start = static_cast<int64_t>(work.channelStart);
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int k = ring.nranks;
  auto rankOffset = [&](int position) { return static_cast<int64_t>(ring.userRanks[position]) * count + start; };
  if (k == 1) return prims.localCopy(src + start, dst + start, n);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    prims.directReadSend(src + rankOffset(ringMod(ring.index - 1, k)) + base, len);
    for (int s = 2; s < k; ++s) prims.recvReduceSend(src + rankOffset(ringMod(ring.index - s, k)) + base, len);
    prims.recvReduceCopy(src + rankOffset(ring.index) + base, dst + start + base, len, true);
  }
  prims.directReadsDone();
}

// AllGather: every rank's segment travels k-1 hops. In place when sendbuff
// is already this rank's segment of recvbuff.
template <typename T, typename Prims>
WEFT_HD void ringAllGather(Prims& prims, const RingView& ring, const CollWork& work) {
  const T* src = static_cast<const T*>(work.sendbuff);
  T* dst = static_cast<T*>(work.recvbuff);
  const int64_t count = static_cast<int64_t>(work.count);
  const int64_t start = static_cast<int64_t>(work.channelStart);
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int k = ring.nranks;
  auto rankOffset = [&](int position) { return static_cast<int64_t>(ring.userRanks[position]) * count + start; };
  const T* mine = dst + rankOffset(ring.index) - start;
  const bool inPlace = src == mine;
  if (k == 1) {
    if (!inPlace) prims.localCopy(src + start, dst + rankOffset(0), n);
    return;
  }
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    T* myDst = dst + rankOffset(ring.index) + base;
    prims.directCopySend(inPlace ? myDst : src + start + base, myDst, len);
    for (int s = 1; s < k - 1; ++s) prims.directRecvCopySend(dst + rankOffset(ringMod(ring.index - s, k)) + base, len);
    prims.directRecv(dst + rankOffset(ringMod(ring.index + 1, k)) + base, len);
  }
}

// Broadcast from `root` along the ring; the rank before the root only receives.
template <typename T, typename Prims>
WEFT_HD void ringBroadcast(Prims& prims, const RingView& ring, const CollWork& work, int rank) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const bool isRoot = rank == work.root;
  if (ring.nranks == 1) {
    if (src != dst) prims.localCopy(src, dst, n);
    return;
  }
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    if (isRoot)
      prims.directCopySend(src + base, dst + base, len);
    else if (ring.next == work.root)
      prims.directRecv(dst + base, len);
    else
      prims.directRecvCopySend(dst + base, len);
  }
}

// Reduce to `root`: the chain starts at the rank after the root.
template <typename T, typename Prims>
WEFT_HD void ringReduce(Prims& prims, const RingView& ring, const CollWork& work, int rank) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  if (ring.nranks == 1) return prims.localCopy(src, dst, n);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    if (ring.prev == work.root)
      prims.send(src + base, len);
    else if (rank == work.root)
      prims.recvReduceCopy(src + base, dst + base, len, true);
    else
      prims.recvReduceSend(src + base, len);
  }
}

}  // namespace weft::device
