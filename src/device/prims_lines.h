// The frame both line protocols share (LL: prims_ll.h, LL128:
// prims_ll128.h). Each connection has a region of flagged lines per protocol
// (step_fifo.h LineRegion): the consumer polls the lines themselves (no tail
// counter) and the producer publishes without a fence; its only wait is for
// a free step (the region's head, released by the consumer once it read
// the step).
//
// One verb call moves n elements in slices of one step's payload. Per
// slice: wait until every send peer has a free step and sign it (the call's
// hash as one LL pack, device/signature.h), wait for every receive peer's
// signature, let the protocol move the slice (its line format: the derived
// class's moveSlice), agree, then release the steps read.
#pragma once

#include "device/ll_line.h"
#include "device/prefetch.h"
#include "device/primitives.h"
#include "device/step_fifo.h"

namespace weft::device {

// Producer flow control: like fifoCanProduce, on the region's head. Acquire
// pairs with the consumer's release: its reads of the lines we are about to
// overwrite happened before.
WEFT_HD bool lineCanProduce(LineRegion& r) {
  if (r.seen + kLineSteps > r.step) return true;
  r.seen = loadAcquire(r.head);
  return r.seen + kLineSteps > r.step;
}

// Release: every read of the step's lines is done before the producer may
// overwrite them.
WEFT_HD void lineRelease(LineRegion& r) {
  r.step += 1;
  storeRelease(r.head, r.step);
}

// fifoSavePosition for a line region's working copy (step_fifo.h says why
// only the fields that moved are written): a line object moves nothing else.
WEFT_HD void lineSavePosition(LineRegion* orig, const LineRegion& local) {
  if (orig->step != local.step) orig->step = local.step;
  if (orig->seen != local.seen) orig->seen = local.seen;
}

WEFT_HD char* lineStep(const LineRegion& r) {
  return r.lines + static_cast<int64_t>(r.step % kLineSteps) * r.stepBytes;
}

// Call signatures of line steps (device/signature.h). The producer writes,
// per step, the call in full and then one LL pack whose payload is the
// call's hash (0: unchecked), so the pack arrives like the data: no
// counter, no fence. The consumer compares the hash before it releases the
// step. The full words are not ordered with the pack; they serve only to
// name a mismatch, and are believed only when they hash to the pack's
// payload.
static_assert(sizeof(FifoControl::lineSigPacks[0][0]) == kLLPackLineBytes, "one LL pack per slot");

WEFT_HD char* lineSigPack(const LineRegion& r) {
  return reinterpret_cast<char*>(r.sigPacks + (r.step % kLineSteps) * 2);
}

WEFT_HD void lineSign(LineRegion& r, const CallSignature& sig, uint32_t hash) {
  uint64_t* full = r.sigs + (r.step % kLineSteps) * 2;
  if (hash != 0) {
    storeRelaxed(&full[0], sig.word);
    storeRelaxed(&full[1], sig.count);
  }
  llStorePack(lineSigPack(r), hash, llFlag(r.step));
}

// The call a mismatched step came from, if its words have arrived (they
// hash to `hash`); word 0 (not readable) otherwise.
WEFT_HD CallSignature lineSignature(const LineRegion& r, uint32_t hash) {
  const uint64_t* full = r.sigs + (r.step % kLineSteps) * 2;
  for (int tries = 0; tries < 1024; ++tries) {
    const CallSignature sig{loadRelaxed(&full[0]), loadRelaxed(&full[1])};
    if (callHash(sig) == hash) return sig;
  }
  return CallSignature{0, 0};
}

// The verbs of primitives.h over line regions. Derived provides
//   static LineRegion& regionOf(FifoEnd&)            its region of each end
//   static int64_t slicePayloadBytes(int64_t stepBytes)
//   static int64_t sliceLineBytes(int64_t n)         line bytes n elements take
//   template <bool Src, bool Dst> bool moveSlice(src, dst, n, nr, ns, ownPos, pre, post)
// and reads the protected state below.
template <typename Derived, typename T, typename RedOp, typename FanT, typename Coop>
class LinePrims {
 protected:
  static constexpr int kMaxRecv = FanT::kMaxRecv;
  static constexpr int kMaxSend = FanT::kMaxSend;

  // A working copy of what a team of several threads uses of an end: its
  // protocol's line region and the peer's rank (for messages), not the whole
  // FifoEnd (a quarter of its bytes: fewer registers on the GPU). A team of
  // one thread (Coop::kOneThread: every host rank) works on the end in place,
  // as prims_simple.h does: no copy and no write-back per call.
  static constexpr bool kInPlace = Coop::kOneThread;
  struct LineEnd {
    LineRegion r;
    int32_t peer;
  };
  // This thread's view of receive link i and send link i, and their peers.
  WEFT_HD LineRegion& rxr(int i) { return kInPlace ? Derived::regionOf(*recvOrig_[i]) : recv_[i].r; }
  WEFT_HD LineRegion& txr(int i) { return kInPlace ? Derived::regionOf(*sendOrig_[i]) : send_[i].r; }
  WEFT_HD const LineRegion& rxr(int i) const { return kInPlace ? Derived::regionOf(*recvOrig_[i]) : recv_[i].r; }
  WEFT_HD const LineRegion& txr(int i) const { return kInPlace ? Derived::regionOf(*sendOrig_[i]) : send_[i].r; }
  WEFT_HD int32_t rxPeer(int i) const { return kInPlace ? recvOrig_[i]->peer : recv_[i].peer; }
  WEFT_HD int32_t txPeer(int i) const { return kInPlace ? sendOrig_[i]->peer : send_[i].peer; }

 public:
  WEFT_HD LinePrims(Coop& coop, const RedOp& op, int channel, FifoEnd* const* recvEnds, int nRecv,
                    FifoEnd* const* sendEnds, int nSend)
      : coop_(coop), op_(op), channel_(channel), nRecv_(nRecv), nSend_(nSend) {
    int64_t stepBytes = 0;
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) {
      recvOrig_[i] = recvEnds[i];
      if constexpr (!kInPlace) recv_[i] = LineEnd{Derived::regionOf(*recvEnds[i]), recvEnds[i]->peer};
      const int64_t b = rxr(i).stepBytes;
      stepBytes = stepBytes == 0 ? b : minOf(stepBytes, b);
    }
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
      sendOrig_[i] = sendEnds[i];
      if constexpr (!kInPlace) send_[i] = LineEnd{Derived::regionOf(*sendEnds[i]), sendEnds[i]->peer};
      const int64_t b = txr(i).stepBytes;
      stepBytes = stepBytes == 0 ? b : minOf(stepBytes, b);
    }
    // Both ends of a connection see the same stepBytes, so they cut the
    // same slices.
    slicePayload_ = Derived::slicePayloadBytes(stepBytes);
  }

  // The barrier after the write-back: algorithms make objects over the
  // same ends one after another (exchange pieces, one-shot peers), and every
  // thread of the next one must load the positions the leader saved here.
  WEFT_HD ~LinePrims() {
    if constexpr (!kInPlace) {
      if (coop_.leader()) {
        for (int i = 0; i < kMaxRecv && i < nRecv_; ++i)
          lineSavePosition(&Derived::regionOf(*recvOrig_[i]), recv_[i].r);
        for (int i = 0; i < kMaxSend && i < nSend_; ++i)
          lineSavePosition(&Derived::regionOf(*sendOrig_[i]), send_[i].r);
      }
      coop_.sync();
    }
  }

  LinePrims(const LinePrims&) = delete;
  LinePrims& operator=(const LinePrims&) = delete;

  // The verbs of prims_simple.h, with the same meaning (primitives.h).
  WEFT_HD void send(const T* src, int64_t n) { genericOp<false, true, true, false>(src, nullptr, n, true, false); }
  WEFT_HD void recv(T* dst, int64_t n) { genericOp<true, false, false, true>(nullptr, dst, n, false, false); }
  WEFT_HD void recvReduceSend(const T* src, int64_t n) {
    genericOp<true, true, true, false>(src, nullptr, n, true, false);
  }
  WEFT_HD void recvReduceCopy(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, false, true, true>(src, dst, n, true, post);
  }
  WEFT_HD void recvReduceCopyInOrder(const T* src, T* dst, int64_t n, int ownAt, bool post) {
    genericOp<true, false, true, true>(src, dst, n, true, post, ownAt);
  }
  WEFT_HD void recvReduceCopySend(const T* src, T* dst, int64_t n, bool post) {
    genericOp<true, true, true, true>(src, dst, n, true, post);
  }
  WEFT_HD void recvCopySend(T* dst, int64_t n) { genericOp<true, true, false, true>(nullptr, dst, n, false, false); }
  WEFT_HD void copySend(const T* src, T* dst, int64_t n) {
    genericOp<false, true, true, true>(src, dst, n, true, false);
  }
  WEFT_HD void directSend(const T* result, int64_t n) {
    genericOp<false, true, true, false>(result, nullptr, n, false, false);
  }
  // The line protocols have no direct mode: the direct verbs are their plain forms.
  WEFT_HD void directRecv(T* dst, int64_t n) { recv(dst, n); }
  WEFT_HD void directRecvCopySend(T* dst, int64_t n) { recvCopySend(dst, n); }
  WEFT_HD void directCopySend(const T* from, T* dst, int64_t n) {
    if (from == dst)
      send(from, n);
    else
      copySend(from, dst, n);
  }
  WEFT_HD void directRecvReduceCopySend(const T* src, T* dst, int64_t n, bool post) {
    recvReduceCopySend(src, dst, n, post);
  }
  WEFT_HD void directReadSend(const T* src, int64_t n) { send(src, n); }
  WEFT_HD void directReadsDone() {}

  WEFT_HD void localCopy(const T* src, T* dst, int64_t n) {
    for (int64_t i = coop_.threadRank(); i < n; i += coop_.size()) dst[i] = op_.post(op_.pre(src[i]));
    coop_.sync();
  }

 private:
  WEFT_HD bool sendReady(int ns) {
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!lineCanProduce(txr(i))) return false;
    return true;
  }

  WEFT_HD WaitSite sendCulprit(int ns) {
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!lineCanProduce(txr(i))) return WaitSite{txPeer(i), 1, channel_};
    return WaitSite{-1, 1, channel_};
  }

  // Leader, after every send peer's step is free: this call signs it.
  WEFT_HD void signSteps(int ns) {
    const uint32_t hash = coop_.callSignatureHash();
    for (int i = 0; i < kMaxSend && i < ns; ++i) lineSign(txr(i), coop_.callSignature(), hash);
  }

  // Leader: whether every receive peer's signature pack for this step has
  // come; a pack from another call records the mismatch (the wait then fails).
  // Host: while it polls the signatures, the thread also loads each peer's
  // data lines of the step (up to kTouchLines of 64 bytes): the producer
  // writes them within nanoseconds of the signature, and a poll that asks
  // for every line has their transfers in flight at once instead of one
  // after another (the data waits then find them here). The values are not
  // used.
  static constexpr int64_t kTouchLines = 4;
  WEFT_HD void touchDataLines(int nr, int64_t lineBytes) const {
#if !WEFT_DEVICE_PASS
    const int64_t lines = minOf<int64_t>(kTouchLines, divUp<int64_t>(lineBytes, 64));
    for (int i = 0; i < kMaxRecv && i < nr; ++i)
      for (int64_t l = 0; l < lines; ++l)
        (void)__atomic_load_n(reinterpret_cast<const uint64_t*>(lineStep(rxr(i)) + l * 64), __ATOMIC_RELAXED);
#endif
  }

  // After a step is released: the next step's first data line and its
  // signature pack, asked for now. A producer that runs ahead (a root's
  // Broadcast, call after call) has written them already, and their
  // transfer overlaps the rest of this call and the next call's start: 8 B
  // Broadcast at 2 ranks 0.23-0.27 -> 0.13-0.17 us (docs/performance.md,
  // "Small Broadcast"). One that has not leaves this cache a copy its write
  // invalidates, as it would the copy from kLineSteps steps ago. The first
  // line only: asking for the first four took the 8 B gain away again
  // (0.26-0.28 us, three rounds, same hour) and made 64 B no faster.
  WEFT_HD static void prefetchStep(const LineRegion& r) {
    prefetchForRead(lineStep(r));
    prefetchForRead(lineSigPack(r));
  }

  WEFT_HD bool signaturesArrived(int nr, int64_t lineBytes) {
    const uint32_t ours = coop_.callSignatureHash();
    touchDataLines(nr, lineBytes);
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      const LineRegion& r = rxr(i);
      uint64_t theirs = 0;
      if (!llLoadPack(lineSigPack(r), llFlag(r.step), &theirs)) return false;
      const auto hash = static_cast<uint32_t>(theirs);
      if (hash != 0 && hash != ours) {
        coop_.recordMismatch(WaitSite{rxPeer(i), 0, channel_}, lineSignature(r, hash));
        return true;
      }
    }
    return true;
  }

  WEFT_HD WaitSite signatureCulprit(int nr) {
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      const LineRegion& r = rxr(i);
      uint64_t theirs = 0;
      if (!llLoadPack(lineSigPack(r), llFlag(r.step), &theirs)) return WaitSite{rxPeer(i), 0, channel_};
    }
    return WaitSite{-1, 0, channel_};
  }

  // Out of line on the GPU (portable.h): once per combination instead of
  // inlined at every verb of every algorithm; with LL128 beside LL, inlining
  // took the float kernels' build from 69 s to 90 s, out of line it stays at
  // 71 s. A call per verb call costs nothing beside a step's hand-off.
  template <bool Recv, bool Send, bool Src, bool Dst>
  WEFT_HD_OUTLINED void genericOp(const T* src, T* dst, int64_t nelem, bool pre, bool post, int ownAt = 0) {
    const int nr = Recv ? nRecv_ : 0;
    const int ns = Send ? nSend_ : 0;
    const int64_t sliceElems = slicePayload_ / static_cast<int64_t>(sizeof(T));
    const int ownPos = Src ? minOf(ownAt, nr) : -1;
    const bool applyPre = Src && pre && RedOp::kHasPre;
    const bool applyPost = post && RedOp::kHasPost;
    for (int64_t offset = 0; offset < nelem; offset += sliceElems) {
      const int64_t n = minOf(sliceElems, nelem - offset);
      bool ok = ns == 0 || coop_.waitUntil([&] { return sendReady(ns); }, [&] { return sendCulprit(ns); });
      if (ok && ns > 0 && coop_.leader()) signSteps(ns);
      if (ok && nr > 0 && coop_.callSignatureHash() != 0)
        ok = coop_.waitUntil([&] { return signaturesArrived(nr, Derived::sliceLineBytes(n)); },
                             [&] { return signatureCulprit(nr); });
      // ok is the team's (waitUntil's answer is shared): every thread moves
      // its part of the slice, or none does.
      if (ok)
        ok = static_cast<Derived*>(this)->template moveSlice<Src, Dst>(
            Src ? src + offset : nullptr, Dst ? dst + offset : nullptr, n, nr, ns, ownPos, applyPre, applyPost);
      // Every thread has read its lines before the leader frees the step.
      ok = coop_.agree(ok);
      advance(nr, ns, ok);
    }
  }

  // Producers only count (the flags published the data); consumers release.
  WEFT_HD void advance(int nr, int ns, bool ok) {
    for (int i = 0; i < kMaxSend && i < ns; ++i) txr(i).step += 1;
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      if (ok && coop_.leader()) {
        lineRelease(rxr(i));
        prefetchStep(rxr(i));
      } else {
        rxr(i).step += 1;
      }
    }
  }

 protected:
  // Host, producers: asks for send unit `unit` of this step (of unitBytes
  // line bytes; past `units` nothing) owned on every send link, ahead of
  // the stores (prims_ll.h, prims_ll128.h say why).
  WEFT_HD void prefetchSendUnit(int64_t unit, int64_t units, int64_t unitBytes, int ns) {
    if (unit >= units) return;
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      for (int64_t b = 0; b < unitBytes; b += 64) prefetchForWrite(lineStep(txr(i)) + unit * unitBytes + b);
  }

  Coop& coop_;
  RedOp op_;
  int channel_;
  int nRecv_;
  int nSend_;
  int64_t slicePayload_ = 0;
  LineEnd recv_[kInPlace ? 1 : (kMaxRecv > 0 ? kMaxRecv : 1)];  // the copies (unused in place)
  LineEnd send_[kInPlace ? 1 : (kMaxSend > 0 ? kMaxSend : 1)];
  FifoEnd* recvOrig_[kMaxRecv > 0 ? kMaxRecv : 1];
  FifoEnd* sendOrig_[kMaxSend > 0 ? kMaxSend : 1];
};

}  // namespace weft::device
