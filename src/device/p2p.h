// Point-to-point: one send and one receive progressed together. Neither
// side blocks the other, so pairs matched across ranks (rank r sends to r+d
// while receiving from r-d) can never wait on each other in a cycle.
#pragma once

#include <string.h>

#include "device/primitives.h"
#include "device/reduce_copy.h"
#include "device/reduce_ops.h"
#include "device/step_fifo.h"
#include "device/work.h"

namespace weft::device {

template <typename Coop>
WEFT_HD void copyBytes(Coop& coop, const char* src, char* dst, int64_t bytes) {
  const char* srcs[1] = {src};
  char* dsts[1] = {dst};
  reduceCopy<1, 1, 1, 1>(coop, FuncCopy<char>(), srcs, 1, dsts, 1, bytes, -1, false);
}

template <typename Coop>
WEFT_HD void runSendRecv(Coop& coop, const P2pWork& work, int channel) {
  const bool hasSend = work.sendEnd != nullptr && work.sendBytes > 0;
  const bool hasRecv = work.recvEnd != nullptr && work.recvBytes > 0;
  FifoEnd send = hasSend ? *work.sendEnd : FifoEnd{};
  FifoEnd recv = hasRecv ? *work.recvEnd : FifoEnd{};
  const int64_t sendBytes = hasSend ? static_cast<int64_t>(work.sendBytes) : 0;
  const int64_t recvBytes = hasRecv ? static_cast<int64_t>(work.recvBytes) : 0;
  int64_t sent = 0;
  int64_t received = 0;
  // Steps carry the send's size; the receiver expects its own, which the
  // call signature holds (device/signature.h).
  const uint32_t ours = coop.callSignatureHash();
  const CallSignature sendSig{coop.callSignature().word, static_cast<uint64_t>(sendBytes)};
  const uint32_t sendHash = callHash(sendSig);
  while (sent < sendBytes || received < recvBytes) {
    int readyMask = 0;
    auto anyReady = [&] {
      readyMask =
          (sent < sendBytes && fifoCanProduce(send) ? 1 : 0) | (received < recvBytes && fifoCanConsume(recv) ? 2 : 0);
      if ((readyMask & 2) != 0 && ours != 0) checkStepSignature(coop, recv, ours, channel);
      return readyMask != 0;
    };
    auto culprit = [&] {
      if (received < recvBytes) return WaitSite{recv.peer, 0, channel};
      return WaitSite{send.peer, 1, channel};
    };
    if (!coop.waitUntil(anyReady, culprit)) break;
    readyMask = coop.broadcastFromLeader(readyMask);
    if (readyMask & 1) {
      const int64_t n = minOf(send.stepBytes, sendBytes - sent);
      copyBytes(coop, work.sendbuff + sent, fifoSlot(send), n);
      coop.sync();
      if (coop.leader()) {
        coop.publishFence();
        if (sendHash != 0) fifoSign(send, sendSig, sendHash);
        fifoPublish(send, n);
      } else {
        send.step += 1;
      }
      sent += n;
    }
    if (readyMask & 2) {
      const int64_t n = minOf(recv.stepBytes, recvBytes - received);
      copyBytes(coop, fifoSlot(recv), work.recvbuff + received, n);
      coop.sync();
      if (coop.leader()) {
        fifoRelease(recv);
      } else {
        recv.step += 1;
      }
      received += n;
    }
  }
  if (coop.leader()) {
    if (hasSend) fifoSavePosition(work.sendEnd, send);
    if (hasRecv) fifoSavePosition(work.recvEnd, recv);
  }
}

}  // namespace weft::device
