// Tree algorithms, written only in primitive verbs, on one channel's share
// of the data. A channel's tree is this rank's parent (up) and up to three
// children (down); the planner picks the tree per channel (tree 0 or tree 1
// of the double binary tree, joined to the intra-node chains).
//
// AllReduce = reduce up the tree, then broadcast down it, each pipelined by
// chunk. The two phases use separate FIFOs (child->parent for up,
// parent->child for down), so one team can run them back to back: a rank
// finishes sending all its chunks up before it waits for the first chunk to
// come down, and nothing waits in a cycle.
//   up:   leaf send, middle recvReduceSend, root recvReduceCopy
//   down: root send, middle recvCopySend,  leaf recv
#pragma once

#include "device/portable.h"
#include "device/work.h"

namespace weft::device {

template <typename T, typename UpPrims, typename DownPrims>
WEFT_HD void treeAllReduce(UpPrims& up, DownPrims& down, const TreeView& tree, const CollWork& work) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const bool root = tree.up < 0;
  const bool leaf = tree.nDown == 0;
  if (root && leaf) return up.localCopy(src, dst, n);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    if (leaf)
      up.send(src + base, len);
    else if (root)
      up.recvReduceCopy(src + base, dst + base, len, true);
    else
      up.recvReduceSend(src + base, len);
  }
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    if (root)
      down.directSend(dst + base, len);
    else if (leaf)
      down.directRecv(dst + base, len);
    else
      down.directRecvCopySend(dst + base, len);
  }
}

}  // namespace weft::device
