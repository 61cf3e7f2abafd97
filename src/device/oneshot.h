// One-shot AllReduce, for small messages among the few ranks of one node:
// every rank sends its input (pre-scaled) to every other rank, then combines
// all inputs itself. One step of latency instead of the ring's 2(k-1), at the
// price of k-1 copies of the data per rank, so the planner keeps it for small
// sizes. Inputs are combined in rank order on every rank, so every rank gets
// the same bits even for floating-point sums.
//   send (fan-out to every peer) -> recvReduceCopyInOrder (fan-in from every peer)
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

}  // namespace weft::device
