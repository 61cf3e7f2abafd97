// Primitives for the Simple protocol: bulk slots and head/tail counters
// (step_fifo.h). One verb call moves n elements in slices of at most one
// slot; each slice waits for every peer, moves data with one reduceCopy,
// then publishes (sends) and releases (receives).
#pragma once

#include "device/primitives.h"
#include "device/reduce_copy.h"
#include "device/step_fifo.h"

namespace weft::device {

template <typename T, typename RedOp, typename FanT, typename Coop>
class Primitives<T, RedOp, FanT, ProtoSimple, Coop> {
  static constexpr int kMaxRecv = FanT::kMaxRecv;
  static constexpr int kMaxSend = FanT::kMaxSend;
  static_assert(kMaxRecv + 1 <= kMaxSrcs && kMaxSend + 1 <= kMaxDsts, "fan exceeds reduceCopy limits");
  // Every loop over the peers is bounded by the fan as well as the count.
  // Besides letting the compiler unroll, this keeps the code of different
  // fans different. Without the fan bound GCC 12 -O2 folded (-fipa-icf)
  // Fan<3,3>'s send verb with an identical-looking one of a smaller fan
  // whose loops were optimised for its one-entry array: one-shot ranks
  // published to their first peer only and hung (-fno-ipa-icf, or these
  // bounds, fixed it; tests/unit/oneshot_test.cc catches it).

 public:
  // Copies the FIFO ends (each thread keeps its own positions); the leader
  // writes positions back when the object goes away.
  WEFT_HD Primitives(Coop& coop, const RedOp& op, int channel, FifoEnd* const* recvEnds, int nRecv,
                     FifoEnd* const* sendEnds, int nSend)
      : coop_(coop), op_(op), channel_(channel), nRecv_(nRecv), nSend_(nSend) {
    int64_t stepBytes = 0;
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) {
      recvOrig_[i] = recvEnds[i];
      recv_[i] = *recvEnds[i];
      stepBytes = stepBytes == 0 ? recv_[i].stepBytes : minOf(stepBytes, recv_[i].stepBytes);
    }
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
      sendOrig_[i] = sendEnds[i];
      send_[i] = *sendEnds[i];
      stepBytes = stepBytes == 0 ? send_[i].stepBytes : minOf(stepBytes, send_[i].stepBytes);
    }
    stepElems_ = stepBytes / static_cast<int64_t>(sizeof(T));
  }

  WEFT_HD ~Primitives() {
    if (!coop_.leader()) return;
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) fifoSavePosition(recvOrig_[i], recv_[i]);
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) fifoSavePosition(sendOrig_[i], send_[i]);
  }

  Primitives(const Primitives&) = delete;
  Primitives& operator=(const Primitives&) = delete;

  WEFT_HD void send(const T* src, int64_t n) { genericOp<false, true, true, false>(src, nullptr, n, true, false); }
  WEFT_HD void recv(T* dst, int64_t n) { genericOp<true, false, false, true>(nullptr, dst, n, false, false); }
  WEFT_HD void recvReduceSend(const T* src, int64_t n) {
    genericOp<true, true, true, false>(src, nullptr, n, true, false);
  }
  WEFT_HD void recvReduceCopy(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, false, true, true>(src, dst, n, true, post);
  }
  // recvReduceCopy with every input combined in a fixed order (rank order),
  // the own input at position ownAt: every rank computes the same bits.
  WEFT_HD void recvReduceCopyInOrder(const T* src, T* dst, int64_t n, int ownAt, bool post) {
    genericOp<true, false, true, true>(src, dst, n, true, post, ownAt);
  }
  // recvReduceCopyInOrder of a partial result (no pre-op: it was applied when
  // the inputs were first read), for algorithms that combine partials.
  WEFT_HD void recvReduceCopyResult(const T* partial, T* dst, int64_t n, int ownAt, bool post) {
    genericOp<true, false, true, true>(partial, dst, n, false, post, ownAt);
  }
  // Forwards what one peer sent to another, unchanged (a relay).
  WEFT_HD void recvSend(int64_t n) { genericOp<true, true, false, false>(nullptr, nullptr, n, false, false); }
  WEFT_HD void recvReduceCopySend(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, true, true, true>(src, dst, n, true, post);
  }
  WEFT_HD void recvCopySend(T* dst, int64_t n) { genericOp<true, true, false, true>(nullptr, dst, n, false, false); }
  WEFT_HD void copySend(const T* src, T* dst, int64_t n) {
    genericOp<false, true, true, true>(src, dst, n, true, false);
  }
  // directSend sends a finished result (the tree root's output on the way
  // down), so unlike send it never applies the pre-op (PreMulSum's scalar
  // was applied when the inputs were first read).
  WEFT_HD void directSend(const T* result, int64_t n) {
    genericOp<false, true, true, false>(result, nullptr, n, false, false);
  }
  // Direct verbs: like their plain forms, except that after beginDirect a
  // link whose peer shares this address space carries only the step
  // signals: the sender writes into the receiver's user buffer at the
  // offset of its own output `dst`, and the receiver finds the data there.
  //   directCopySend      copySend (from may equal dst: in place)
  //   directRecvCopySend  recvCopySend          directRecv  recv
  //   directRecvReduceCopySend  recvReduceCopySend, received through the slot
  WEFT_HD void directCopySend(const T* from, T* dst, int64_t n) {
    genericOp<false, true, true, true, false, true>(from, dst, n, false, false);
  }
  WEFT_HD void directRecv(T* dst, int64_t n) {
    genericOp<true, false, false, true, true, false>(nullptr, dst, n, false, false);
  }
  WEFT_HD void directRecvCopySend(T* dst, int64_t n) {
    genericOp<true, true, false, true, true, true>(nullptr, dst, n, false, false);
  }
  WEFT_HD void directRecvReduceCopySend(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, true, true, true, false, true>(src, dst, n, true, post);
  }

  // Enters direct mode for one call whose outputs lie in ownBase's buffer.
  // Receive links in one address space post ownBase with the next sequence
  // number: the buffer is ready for this call, since the call has begun.
  // Send links wait for their peer's post of the same number before any
  // write reaches its buffer. Every rank of a direct call calls this on the
  // same links, so the sequence numbers agree. False when the wait failed.
  WEFT_HD bool beginDirect(T* ownBase) {
    direct_ = true;
    ownBase_ = ownBase;
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) {
      if (!recv_[i].sameProcess) continue;
      recv_[i].directCalls += 1;
      if (!coop_.leader()) continue;
      storeRelaxed(recv_[i].directBase, static_cast<uint64_t>(reinterpret_cast<uintptr_t>(ownBase)));
      storeRelease(recv_[i].directSeq, recv_[i].directCalls);  // the base before the number
    }
    for (int i = 0; i < kMaxSend && i < nSend_; ++i)
      if (send_[i].sameProcess) send_[i].directCalls += 1;
    return coop_.waitUntil([&] { return peersPosted(); }, [&] { return firstUnposted(); });
  }

  // No peers: dst = post(pre(src)). Single-rank collectives end here.
  WEFT_HD void localCopy(const T* src, T* dst, int64_t n) {
    const T* srcs[1] = {src};
    T* dsts[1] = {dst};
    reduceCopy<1, 1, 1, 1>(coop_, op_, srcs, 1, dsts, 1, n, 0, true);
    coop_.sync();
  }

 private:
  // How many inputs and outputs a verb can have: its own buffer if it reads
  // or writes one, plus one slot per peer (at least one peer when it talks).
  template <bool Recv, bool Src>
  static constexpr int kVerbMinSrcs = (Src ? 1 : 0) + (Recv ? 1 : 0);
  template <bool Recv, bool Src>
  static constexpr int kVerbMaxSrcs = (Src ? 1 : 0) + (Recv ? kMaxRecv : 0);
  template <bool Send, bool Dst>
  static constexpr int kVerbMinDsts = (Dst ? 1 : 0) + (Send ? 1 : 0);
  template <bool Send, bool Dst>
  static constexpr int kVerbMaxDsts = (Dst ? 1 : 0) + (Send ? kMaxSend : 0);

  WEFT_HD bool peersPosted() {
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
      if (!send_[i].sameProcess) continue;
      if (loadAcquire(send_[i].directSeq) != send_[i].directCalls) return false;
      peerBase_[i] = reinterpret_cast<T*>(static_cast<uintptr_t>(loadRelaxed(send_[i].directBase)));
    }
    return true;
  }

  WEFT_HD WaitSite firstUnposted() {
    for (int i = 0; i < kMaxSend && i < nSend_; ++i)
      if (send_[i].sameProcess && loadAcquire(send_[i].directSeq) != send_[i].directCalls)
        return WaitSite{send_[i].peer, 1, channel_};
    return WaitSite{-1, 1, channel_};
  }

  WEFT_HD bool recvIsDirect(int i) const { return direct_ && recv_[i].sameProcess; }
  WEFT_HD bool sendIsDirect(int i) const { return direct_ && send_[i].sameProcess; }

  WEFT_HD bool ready(int nr, int ns) {
    for (int i = 0; i < kMaxRecv && i < nr; ++i)
      if (!fifoCanConsume(recv_[i])) return false;
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!fifoCanProduce(send_[i])) return false;
    if (nr > 0 && coop_.callSignatureHash() != 0) checkSignatures(nr);
    return true;
  }

  // Every step received must belong to this call (device/signature.h); a
  // step of another call is recorded on the team, whose wait then fails.
  WEFT_HD void checkSignatures(int nr) {
    const uint32_t ours = coop_.callSignatureHash();
    for (int i = 0; i < kMaxRecv && i < nr; ++i) checkStepSignature(coop_, recv_[i], ours, channel_);
  }

  // The first peer not ready: whom a timeout blames.
  WEFT_HD WaitSite culprit(int nr, int ns) {
    for (int i = 0; i < kMaxRecv && i < nr; ++i)
      if (!fifoCanConsume(recv_[i])) return WaitSite{recv_[i].peer, 0, channel_};
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!fifoCanProduce(send_[i])) return WaitSite{send_[i].peer, 1, channel_};
    return WaitSite{-1, 0, channel_};
  }

  // ownAt: where the own input goes among the sources (the peers' slots fill
  // the other positions in fan order); reductions run in source order.
  // DirectRecv / DirectSend: the verb may take its input from (or write its
  // output to) user buffers on links in direct mode; both need Dst, whose
  // offset from ownBase_ locates the peer's position.
  template <bool Recv, bool Send, bool Src, bool Dst, bool DirectRecv = false, bool DirectSend = false>
  WEFT_HD void genericOp(const T* src, T* dst, int64_t nelem, bool pre, bool post, int ownAt = 0) {
    static_assert(Dst || !(DirectRecv || DirectSend), "direct verbs locate the peer's data by their output");
    const int nr = Recv ? nRecv_ : 0;
    const int ns = Send ? nSend_ : 0;
    for (int64_t offset = 0; offset < nelem; offset += stepElems_) {
      const int64_t n = minOf(stepElems_, nelem - offset);
      const bool ok = coop_.waitUntil([&] { return ready(nr, ns); }, [&] { return culprit(nr, ns); });
      if (ok) {
        const T* srcs[kMaxSrcs] = {};
        T* dsts[kMaxDsts] = {};
        int nSrcs = 0;
        int nDsts = 0;
        const int ownPos = Src ? minOf(ownAt, nr) : -1;
        for (int i = 0; i < kMaxRecv && i < nr; ++i) {
          if (i == ownPos) srcs[nSrcs++] = src + offset;
          // A direct receive found its data already in place at dst.
          srcs[nSrcs++] = DirectRecv && recvIsDirect(i) ? dst + offset : reinterpret_cast<const T*>(fifoSlot(recv_[i]));
        }
        if (Src && ownPos == nr) srcs[nSrcs++] = src + offset;
        if (Dst) dsts[nDsts++] = dst + offset;
        for (int i = 0; i < kMaxSend && i < ns; ++i)
          dsts[nDsts++] = DirectSend && sendIsDirect(i) ? peerBase_[i] + (dst + offset - ownBase_)
                                                        : reinterpret_cast<T*>(fifoSlot(send_[i]));
        reduceCopy<kVerbMinSrcs<Recv, Src>, kVerbMaxSrcs<Recv, Src>, kVerbMinDsts<Send, Dst>, kVerbMaxDsts<Send, Dst>>(
            coop_, op_, srcs, nSrcs, dsts, nDsts, n, Src && pre ? ownPos : -1, post);
        coop_.sync();
      }
      advance(nr, ns, n * static_cast<int64_t>(sizeof(T)), ok);
    }
  }

  // Every thread moves its copy of the positions; only the leader touches the
  // shared counters, after the team's writes are fenced (see the Coop).
  WEFT_HD void advance(int nr, int ns, int64_t bytes, bool publish) {
    if (publish && coop_.leader()) {
      coop_.publishFence();
      const uint32_t hash = coop_.callSignatureHash();
      for (int i = 0; i < kMaxSend && i < ns; ++i) {
        if (hash != 0) fifoSign(send_[i], coop_.callSignature(), hash);
        fifoPublish(send_[i], bytes);
      }
      for (int i = 0; i < kMaxRecv && i < nr; ++i) fifoRelease(recv_[i]);
      return;
    }
    for (int i = 0; i < kMaxSend && i < ns; ++i) send_[i].step += 1;
    for (int i = 0; i < kMaxRecv && i < nr; ++i) recv_[i].step += 1;
  }

  Coop& coop_;
  RedOp op_;
  int channel_;
  int nRecv_;
  int nSend_;
  int64_t stepElems_ = 0;
  bool direct_ = false;
  T* ownBase_ = nullptr;
  T* peerBase_[kMaxSend > 0 ? kMaxSend : 1] = {};
  FifoEnd recv_[kMaxRecv > 0 ? kMaxRecv : 1];
  FifoEnd send_[kMaxSend > 0 ? kMaxSend : 1];
  FifoEnd* recvOrig_[kMaxRecv > 0 ? kMaxRecv : 1];
  FifoEnd* sendOrig_[kMaxSend > 0 ? kMaxSend : 1];
};

}  // namespace weft::device
