// Primitives for the LL protocol (ll_line.h): every pack of payload travels
// with its step flag in the same store, so the consumer polls the data
// itself (no tail counter) and the producer publishes without a fence. Half
// of the line memory is payload, and every element is touched once per
// peer in registers, which is why LL serves small messages: its win is one
// hand-off less per step, not bandwidth.
//
// One verb call moves n elements in slices of one LL step (llStepBytes / 2
// payload bytes). Per slice: wait until every send peer has a free LL step
// (the only counter: llHead, released by the consumer after it read a
// step), then each thread of the team takes packs p = rank, rank + size,
// ...: loads its own input, waits for each receive peer's pack to carry the
// step's flag, combines them in source order, writes its output and stores
// the pack with the flag to every send peer. Finally the consumer releases
// the step it read.
#pragma once

#include "device/ll_line.h"
#include "device/primitives.h"
#include "device/step_fifo.h"

namespace weft::device {

// Producer flow control of the LL region: like fifoCanProduce, on llHead.
// Acquire pairs with the consumer's release: its reads of the lines we are
// about to overwrite happened before.
WEFT_HD bool llCanProduce(FifoEnd& end) {
  if (end.llSeen + kFifoSteps > end.llStep) return true;
  end.llSeen = loadAcquire(end.llHead);
  return end.llSeen + kFifoSteps > end.llStep;
}

// Release: every read of the step's lines is done before the producer may
// overwrite them.
WEFT_HD void llRelease(FifoEnd& end) {
  end.llStep += 1;
  storeRelease(end.llHead, end.llStep);
}

WEFT_HD char* llStepLines(const FifoEnd& end) {
  return end.llLines + static_cast<int64_t>(end.llStep % kFifoSteps) * end.llStepBytes;
}

// Call signatures of LL steps (device/signature.h). The producer writes, per
// step, the call in full and then one LL pack whose payload is the call's
// hash (0: unchecked), so the pack arrives like the data: no counter, no
// fence. The consumer compares the hash before it releases the step. The
// full words are not ordered with the pack; they serve only to name a
// mismatch, and are believed only when they hash to the pack's payload.
static_assert(sizeof(FifoControl::llSigPacks[0]) == kLLPackLineBytes, "one LL pack per slot");

WEFT_HD char* llSigPack(const FifoEnd& end) {
  return reinterpret_cast<char*>(fifoControl(end)->llSigPacks[end.llStep % kFifoSteps]);
}

WEFT_HD void llSign(FifoEnd& end, const CallSignature& sig, uint32_t hash) {
  FifoControl* control = fifoControl(end);
  const uint64_t slot = end.llStep % kFifoSteps;
  if (hash != 0) {
    storeRelaxed(&control->llSigs[slot][0], sig.word);
    storeRelaxed(&control->llSigs[slot][1], sig.count);
  }
  llStorePack(llSigPack(end), hash, llFlag(end.llStep));
}

// The call a mismatched LL step came from, if its words have arrived (they
// hash to `hash`); word 0 (not readable) otherwise.
WEFT_HD CallSignature llSignature(const FifoEnd& end, uint32_t hash) {
  const FifoControl* control = fifoControl(end);
  const uint64_t slot = end.llStep % kFifoSteps;
  for (int tries = 0; tries < 1024; ++tries) {
    const CallSignature sig{loadRelaxed(&control->llSigs[slot][0]), loadRelaxed(&control->llSigs[slot][1])};
    if (callHash(sig) == hash) return sig;
  }
  return CallSignature{0, 0};
}

template <typename T, typename RedOp, typename FanT, typename Coop>
class Primitives<T, RedOp, FanT, ProtoLL, Coop> {
  static constexpr int kMaxRecv = FanT::kMaxRecv;
  static constexpr int kMaxSend = FanT::kMaxSend;
  static_assert(sizeof(T) <= kLLPackDataBytes, "an element must fit in one LL pack");
  static constexpr int kPerPack = kLLPackDataBytes / static_cast<int>(sizeof(T));

  union Pack {
    uint64_t bits;
    T elems[kPerPack];
  };

 public:
  WEFT_HD Primitives(Coop& coop, const RedOp& op, int channel, FifoEnd* const* recvEnds, int nRecv,
                     FifoEnd* const* sendEnds, int nSend)
      : coop_(coop), op_(op), channel_(channel), nRecv_(nRecv), nSend_(nSend) {
    int64_t stepBytes = 0;
    for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) {
      recvOrig_[i] = recvEnds[i];
      recv_[i] = *recvEnds[i];
      stepBytes = stepBytes == 0 ? recv_[i].llStepBytes : minOf(stepBytes, recv_[i].llStepBytes);
    }
    for (int i = 0; i < kMaxSend && i < nSend_; ++i) {
      sendOrig_[i] = sendEnds[i];
      send_[i] = *sendEnds[i];
      stepBytes = stepBytes == 0 ? send_[i].llStepBytes : minOf(stepBytes, send_[i].llStepBytes);
    }
    // Both ends of a connection see the same llStepBytes, so they cut the
    // same slices.
    slicePacks_ = stepBytes / kLLPackLineBytes;
  }

  // The barrier after the write-back: algorithms make objects over the
  // same ends one after another (exchange pieces, one-shot peers), and every
  // thread of the next one must load the positions the leader saved here.
  WEFT_HD ~Primitives() {
    if (coop_.leader()) {
      for (int i = 0; i < kMaxRecv && i < nRecv_; ++i) fifoSavePosition(recvOrig_[i], recv_[i]);
      for (int i = 0; i < kMaxSend && i < nSend_; ++i) fifoSavePosition(sendOrig_[i], send_[i]);
    }
    coop_.sync();
  }

  Primitives(const Primitives&) = delete;
  Primitives& operator=(const Primitives&) = delete;

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
  // LL has no direct mode: the direct verbs are their plain forms.
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

  WEFT_HD void localCopy(const T* src, T* dst, int64_t n) {
    for (int64_t i = coop_.threadRank(); i < n; i += coop_.size()) dst[i] = op_.post(op_.pre(src[i]));
    coop_.sync();
  }

 private:
  WEFT_HD bool sendReady(int ns) {
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!llCanProduce(send_[i])) return false;
    return true;
  }

  WEFT_HD WaitSite sendCulprit(int ns) {
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      if (!llCanProduce(send_[i])) return WaitSite{send_[i].peer, 1, channel_};
    return WaitSite{-1, 1, channel_};
  }

  // Leader, after every send peer's step is free: this call signs it.
  WEFT_HD void signSteps(int ns) {
    const uint32_t hash = coop_.callSignatureHash();
    for (int i = 0; i < kMaxSend && i < ns; ++i) llSign(send_[i], coop_.callSignature(), hash);
  }

  // Leader: whether every receive peer's signature pack for this step has
  // come; a pack from another call records the mismatch (the wait then fails).
  // Host: while it polls the signatures, the thread also loads each peer's
  // data lines of the step (up to kTouchLines of 64 bytes, `packs` packs):
  // the producer writes them within nanoseconds of the signature, and a poll
  // that asks for every line has their transfers in flight at once instead
  // of one after another (the data waits below then find them here). The
  // values are not used.
  static constexpr int64_t kTouchLines = 4;
  WEFT_HD void touchDataLines(int nr, int64_t packs) const {
#if !WEFT_DEVICE_PASS
    const int64_t lines = minOf<int64_t>(kTouchLines, divUp<int64_t>(packs * kLLPackLineBytes, 64));
    for (int i = 0; i < kMaxRecv && i < nr; ++i)
      for (int64_t l = 0; l < lines; ++l)
        (void)__atomic_load_n(reinterpret_cast<const uint64_t*>(llStepLines(recv_[i]) + l * 64), __ATOMIC_RELAXED);
#endif
  }

  WEFT_HD bool signaturesArrived(int nr, int64_t packs) {
    const uint32_t ours = coop_.callSignatureHash();
    touchDataLines(nr, packs);
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      uint64_t theirs = 0;
      if (!llLoadPack(llSigPack(recv_[i]), llFlag(recv_[i].llStep), &theirs)) return false;
      const auto hash = static_cast<uint32_t>(theirs);
      if (hash != 0 && hash != ours) {
        coop_.recordMismatch(WaitSite{recv_[i].peer, 0, channel_}, llSignature(recv_[i], hash));
        return true;
      }
    }
    return true;
  }

  WEFT_HD WaitSite signatureCulprit(int nr) {
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      uint64_t theirs = 0;
      if (!llLoadPack(llSigPack(recv_[i]), llFlag(recv_[i].llStep), &theirs))
        return WaitSite{recv_[i].peer, 0, channel_};
    }
    return WaitSite{-1, 0, channel_};
  }

  WEFT_HD static void loadElems(Pack& pack, const T* from, int count) {
    for (int e = 0; e < count; ++e) pack.elems[e] = from[e];
  }

  WEFT_HD void combine(Pack& acc, const Pack& in, int count) const {
    for (int e = 0; e < count; ++e) acc.elems[e] = op_(acc.elems[e], in.elems[e]);
  }

  // Waits for receive peer i's pack p of this slice; false when the wait failed.
  WEFT_HD bool loadPeerPack(int i, int64_t p, Pack* out) {
    const char* at = llStepLines(recv_[i]) + p * kLLPackLineBytes;
    const uint32_t flag = llFlag(recv_[i].llStep);
    uint64_t bits = 0;
    const bool ok = coop_.waitEach([&] { return llLoadPack(at, flag, &bits); },
                                   [&] {
                                     return WaitSite{recv_[i].peer, 0, channel_};
                                   });
    out->bits = bits;
    return ok;
  }

  // One pack: sources in order (the own input at position ownPos among the
  // peers), then the outputs. False when a receive wait failed.
  template <bool Src, bool Dst>
  WEFT_HD bool movePack(const T* src, T* dst, int64_t p, int count, int nr, int ns, int ownPos, bool pre, bool post) {
    Pack acc;
    acc.bits = 0;
    bool first = true;
    auto addOwn = [&] {
      Pack own;
      own.bits = 0;
      loadElems(own, src + p * kPerPack, count);
      if (pre)
        for (int e = 0; e < count; ++e) own.elems[e] = op_.pre(own.elems[e]);
      if (first)
        acc = own;
      else
        combine(acc, own, count);
      first = false;
    };
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      if (Src && i == ownPos) addOwn();
      Pack in;
      if (!loadPeerPack(i, p, &in)) return false;
      if (first)
        acc = in;
      else
        combine(acc, in, count);
      first = false;
    }
    if (Src && ownPos >= nr) addOwn();
    if (post)
      for (int e = 0; e < count; ++e) acc.elems[e] = op_.post(acc.elems[e]);
    if (Dst)
      for (int e = 0; e < count; ++e) dst[p * kPerPack + e] = acc.elems[e];
    for (int i = 0; i < kMaxSend && i < ns; ++i)
      llStorePack(llStepLines(send_[i]) + p * kLLPackLineBytes, acc.bits, llFlag(send_[i].llStep));
    return true;
  }

  template <bool Recv, bool Send, bool Src, bool Dst>
  WEFT_HD void genericOp(const T* src, T* dst, int64_t nelem, bool pre, bool post, int ownAt = 0) {
    const int nr = Recv ? nRecv_ : 0;
    const int ns = Send ? nSend_ : 0;
    const int64_t sliceElems = slicePacks_ * kPerPack;
    const int ownPos = Src ? minOf(ownAt, nr) : -1;
    const bool applyPre = Src && pre && RedOp::kHasPre;
    const bool applyPost = post && RedOp::kHasPost;
    for (int64_t offset = 0; offset < nelem; offset += sliceElems) {
      const int64_t n = minOf(sliceElems, nelem - offset);
      bool ok = ns == 0 || coop_.waitUntil([&] { return sendReady(ns); }, [&] { return sendCulprit(ns); });
      if (ok && ns > 0 && coop_.leader()) signSteps(ns);
      const int64_t packs = divUp<int64_t>(n, kPerPack);
      if (ok && nr > 0 && coop_.callSignatureHash() != 0)
        ok = coop_.waitUntil([&] { return signaturesArrived(nr, packs); }, [&] { return signatureCulprit(nr); });
      for (int64_t p = coop_.threadRank(); ok && p < packs; p += coop_.size()) {
        const int count = static_cast<int>(minOf<int64_t>(kPerPack, n - p * kPerPack));
        ok = movePack<Src, Dst>(Src ? src + offset : nullptr, Dst ? dst + offset : nullptr, p, count, nr, ns, ownPos,
                                applyPre, applyPost);
      }
      // Every thread has read its packs before the leader frees the step.
      ok = coop_.agree(ok);
      advance(nr, ns, ok);
    }
  }

  // Producers only count (the flags published the data); consumers release.
  WEFT_HD void advance(int nr, int ns, bool ok) {
    for (int i = 0; i < kMaxSend && i < ns; ++i) send_[i].llStep += 1;
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      if (ok && coop_.leader())
        llRelease(recv_[i]);
      else
        recv_[i].llStep += 1;
    }
  }

  Coop& coop_;
  RedOp op_;
  int channel_;
  int nRecv_;
  int nSend_;
  int64_t slicePacks_ = 0;
  FifoEnd recv_[kMaxRecv > 0 ? kMaxRecv : 1];
  FifoEnd send_[kMaxSend > 0 ? kMaxSend : 1];
  FifoEnd* recvOrig_[kMaxRecv > 0 ? kMaxRecv : 1];
  FifoEnd* sendOrig_[kMaxSend > 0 ? kMaxSend : 1];
};

}  // namespace weft::device
