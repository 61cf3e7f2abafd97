// Primitives: the verbs every algorithm is written in.
//
//   Primitives<T, RedOp, Fan, Proto, Coop>
//     T      element type            RedOp  reduction functor (reduce_ops.h)
//     Fan    most peers received from / sent to (ring 1/1, tree up to 3)
//     Proto  protocol policy: ProtoSimple (prims_simple.h), ProtoLL (prims_ll.h),
//            ProtoLL128 (prims_ll128.h)
//     Coop   the executing team (backend/host/host_coop.h, backend/cuda/)
//
// Verbs (n elements; src is this rank's input, dst its output):
//   send(src)                 recv(dst)
//   recvReduceSend(src)       recvReduceCopy(src, dst)
//   recvReduceCopyInOrder(src, dst, ownAt)  (inputs combined in rank order)
//   recvReduceCopyResult(partial, dst, ownAt)  (the same on a partial result)
//   recvSend()                (forward a peer's data to another: a relay)
//   recvReduceCopySend(src, dst)                 recvCopySend(dst)
//   copySend(src, dst)        localCopy(src, dst)
//   directSend / directRecv / directRecvCopySend: the same data movement
//     written for peers whose user buffer is mapped; until a transport
//     provides such mappings they go through the FIFO like their plain forms.
//     directSend sends a result (no pre-op), send an input (pre-op applied).
// `post` marks the verb that produces a final result (SumPostDiv divides there).
#pragma once

#include "device/portable.h"
#include "device/step_fifo.h"

namespace weft::device {

// Bulk slots with head/tail counters.
struct ProtoSimple {};
// Lines that carry their data with the step flag (ll_line.h).
struct ProtoLL {};
// 128-byte lines of 120 payload bytes and the step flag (ll128_line.h).
struct ProtoLL128 {};

template <int MaxRecvPeers, int MaxSendPeers>
struct Fan {
  static constexpr int kMaxRecv = MaxRecvPeers;
  static constexpr int kMaxSend = MaxSendPeers;
};

template <typename T, typename RedOp, typename FanT, typename Proto, typename Coop>
class Primitives;

// Why a wait failed, for messages that name the culprit.
struct WaitSite {
  int32_t peer;    // rank waited on
  int32_t isSend;  // 1: waiting for the peer to free a slot; 0: for data
  int32_t channel;
};

// A received step of another call than `ours` (device/signature.h) is
// recorded on the team, whose wait then fails. Unsigned steps (hash 0) pass.
template <typename Coop>
WEFT_HD void checkStepSignature(Coop& coop, const FifoEnd& end, uint32_t ours, int channel) {
  const uint32_t theirs = fifoSignatureHash(end);
  if (theirs != 0 && theirs != ours) coop.recordMismatch(WaitSite{end.peer, 0, channel}, fifoSignature(end));
}

}  // namespace weft::device

#include "device/prims_ll.h"
#include "device/prims_ll128.h"
#include "device/prims_simple.h"
