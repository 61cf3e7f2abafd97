// One-shot collectives, for small messages among the few ranks of one node:
// every rank talks to every other rank directly (the channel's flat FIFOs,
// peers in rank order without this rank), one hand-off instead of the
// ring's k-1 or 2(k-1).
//
// AllReduce: every rank sends its input (pre-scaled) to every other rank,
// then combines all inputs itself, at the price of k-1 copies of the data per
// rank, so the planner keeps it for small sizes. Inputs are combined in rank
// order on every rank, so every rank gets the same bits even for
// floating-point sums.
//   send (fan-out to every peer) -> recvReduceCopyInOrder (fan-in from every peer)
// AllGather and ReduceScatter move the same bytes as their rings, in one
// hand-off: the own segment to every peer at once, then each peer's segment
// from its FIFO (AllGather); each peer's segment to that peer, then every
// peer's copy of the own segment combined in rank order (ReduceScatter).
// Broadcast: the root writes to every peer, the others read from the root.
// The verbs with one peer come from `peerRecv(i)` / `peerSend(i)`: primitives
// over flat peer i alone, made for the call (their ends are disjoint from the
// fan-out or fan-in object's).
// A chunk is at most a FIFO's depth (the planner clamps chunkSteps to
// kFifoSteps), so its sends find free slots once the peers have consumed
// the previous chunk, which needs only their own sends: nothing waits in a
// cycle.
#pragma once

#include "device/portable.h"
#include "device/work.h"

namespace weft::device {

template <typename T, typename Prims>
WEFT_HD void oneShotAllReduce(Prims& prims, const CollWork& work, int ownAt) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    prims.send(src + base, len);
    prims.recvReduceCopyInOrder(src + base, dst + base, len, ownAt, true);
  }
}

// Rank of flat peer i: peers are the other ranks in rank order.
WEFT_HD int flatPeerRank(int i, int ownAt) { return i < ownAt ? i : i + 1; }

// AllGather and ReduceScatter work on one segment of `count` elements per
// rank; this channel owns [start, start + n) of every segment.
template <typename T>
struct RankSegments {
  const T* src;
  T* dst;
  int64_t count, start, n, chunk;
  WEFT_HD explicit RankSegments(const CollWork& w)
      : src(static_cast<const T*>(w.sendbuff)),
        dst(static_cast<T*>(w.recvbuff)),
        count(static_cast<int64_t>(w.count)),
        start(static_cast<int64_t>(w.channelStart)),
        n(static_cast<int64_t>(w.channelCount)),
        chunk(static_cast<int64_t>(w.chunkElems)) {}
  // Element `base` of this channel's share of rank r's segment.
  WEFT_HD int64_t at(int r, int64_t base) const { return r * count + start + base; }
};

template <typename T, typename FanOut, typename PeerRecv>
WEFT_HD void oneShotAllGather(FanOut& out, PeerRecv&& peerRecv, int nPeers, const CollWork& work, int ownAt) {
  const RankSegments<T> g(work);
  const bool inPlace = g.src + g.start == g.dst + g.at(ownAt, 0);
  for (int64_t base = 0; base < g.n; base += g.chunk) {
    const int64_t len = minOf(g.chunk, g.n - base);
    if (inPlace)
      out.send(g.dst + g.at(ownAt, base), len);
    else
      out.copySend(g.src + g.start + base, g.dst + g.at(ownAt, base), len);
    for (int i = 0; i < nPeers; ++i) {
      auto in = peerRecv(i);
      in.recv(g.dst + g.at(flatPeerRank(i, ownAt), base), len);
    }
  }
}

template <typename T, typename FanIn, typename PeerSend>
WEFT_HD void oneShotReduceScatter(FanIn& in, PeerSend&& peerSend, int nPeers, const CollWork& work, int ownAt) {
  const RankSegments<T> g(work);
  for (int64_t base = 0; base < g.n; base += g.chunk) {
    const int64_t len = minOf(g.chunk, g.n - base);
    for (int i = 0; i < nPeers; ++i) {
      auto out = peerSend(i);
      out.send(g.src + g.at(flatPeerRank(i, ownAt), base), len);
    }
    in.recvReduceCopyInOrder(g.src + g.at(ownAt, base), g.dst + g.start + base, len, ownAt, true);
  }
}

template <typename T, typename FanOut, typename PeerRecv>
WEFT_HD void oneShotBroadcast(FanOut& out, PeerRecv&& peerRecv, const CollWork& work, int ownAt) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  const int root = work.root;
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    if (root == ownAt) {
      if (src == dst)
        out.send(src + base, len);
      else
        out.copySend(src + base, dst + base, len);
    } else {
      auto in = peerRecv(root < ownAt ? root : root - 1);
      in.recv(dst + base, len);
    }
  }
}

}  // namespace weft::device
