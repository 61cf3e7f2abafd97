// Primitives for the LL protocol (ll_line.h): every pack of payload travels
// with its step flag in the same store, so the consumer polls the data
// itself (no tail counter) and the producer publishes without a fence. Half
// of the line memory is payload, and every element is touched once per
// peer in registers, which is why LL serves small messages: its win is one
// hand-off less per step, not bandwidth.
//
// The frame (flow control, signatures, slices of one LL step: llStepBytes
// / 2 payload bytes) is prims_lines.h's. Per slice, each thread of the team
// takes packs p = rank, rank + size, ...: loads its own input, waits for
// each receive peer's pack to carry the step's flag, combines them in source
// order, writes its output and stores the pack with the flag to every send
// peer.
#pragma once

#include "device/ll_line.h"
#include "device/prims_lines.h"

namespace weft::device {

template <typename T, typename RedOp, typename FanT, typename Coop>
class Primitives<T, RedOp, FanT, ProtoLL, Coop>
    : public LinePrims<Primitives<T, RedOp, FanT, ProtoLL, Coop>, T, RedOp, FanT, Coop> {
  using Base = LinePrims<Primitives, T, RedOp, FanT, Coop>;
  friend Base;
  static constexpr int kMaxRecv = FanT::kMaxRecv;
  static constexpr int kMaxSend = FanT::kMaxSend;
  static_assert(sizeof(T) <= kLLPackDataBytes, "an element must fit in one LL pack");
  static constexpr int kPerPack = kLLPackDataBytes / static_cast<int>(sizeof(T));

  union Pack {
    uint64_t bits;
    T elems[kPerPack];
  };

 public:
  using Base::Base;

 private:
  WEFT_HD static LineRegion& regionOf(FifoEnd& end) { return end.ll; }
  WEFT_HD static int64_t slicePayloadBytes(int64_t stepBytes) {
    return stepBytes / kLLPackLineBytes * kLLPackDataBytes;
  }
  WEFT_HD static int64_t sliceLineBytes(int64_t n) { return divUp<int64_t>(n, kPerPack) * kLLPackLineBytes; }

  // A whole pack moves as one 8-byte word on the host (the element loop of
  // a uint8 Broadcast took about 16 instructions a pack more, callgrind at
  // 256 B); on the GPU element by element, since a user buffer of small
  // elements need not be 8-byte aligned there.
  WEFT_HD static void loadElems(Pack& pack, const T* from, int count) {
#if !WEFT_DEVICE_PASS
    if (count == kPerPack) {
      memcpy(pack.elems, from, sizeof(T) * kPerPack);
      return;
    }
#endif
    for (int e = 0; e < count; ++e) pack.elems[e] = from[e];
  }

  WEFT_HD static void storeElems(T* to, const Pack& pack, int count) {
#if !WEFT_DEVICE_PASS
    if (count == kPerPack) {
      memcpy(to, pack.elems, sizeof(T) * kPerPack);
      return;
    }
#endif
    for (int e = 0; e < count; ++e) to[e] = pack.elems[e];
  }

  WEFT_HD void combine(Pack& acc, const Pack& in, int count) const {
    for (int e = 0; e < count; ++e) acc.elems[e] = this->op_(acc.elems[e], in.elems[e]);
  }

  // Waits for receive peer i's pack p of this slice; false when the wait failed.
  WEFT_HD bool loadPeerPack(int i, int64_t p, Pack* out) {
    const LineRegion& r = this->rxr(i);
    const char* at = lineStep(r) + p * kLLPackLineBytes;
    const uint32_t flag = llFlag(r.step);
    uint64_t bits = 0;
    const bool ok = this->coop_.waitEach([&] { return llLoadPack(at, flag, &bits); },
                                         [&] {
                                           return WaitSite{this->rxPeer(i), 0, this->channel_};
                                         });
    out->bits = bits;
    return ok;
  }

  // Combines one pack's sources in order into *acc: the own input (own())
  // at position ownPos among the receive peers, peer(i, &pack) giving peer
  // i's (false when its wait failed). False when a wait failed.
  template <bool Src, int kR, typename Own, typename Peer>
  WEFT_HD bool combineInOrder(Pack* acc, int nr, int ownPos, int count, Own&& own, Peer&& peer) const {
    bool first = true;
    auto add = [&](const Pack& in) {
      if (first)
        *acc = in;
      else
        combine(*acc, in, count);
      first = false;
    };
    for (int i = 0; i < kR && i < nr; ++i) {
      if (Src && i == ownPos) add(own());
      Pack in;
      if (!peer(i, &in)) return false;
      add(in);
    }
    if (Src && ownPos >= nr) add(own());
    return true;
  }

  // The own input's pack p (count elements), with the pre-op when `pre`.
  WEFT_HD Pack ownPack(const T* src, int64_t p, int count, bool pre) const {
    Pack own;
    own.bits = 0;
    loadElems(own, src + p * kPerPack, count);
    if (pre)
      for (int e = 0; e < count; ++e) own.elems[e] = this->op_.pre(own.elems[e]);
    return own;
  }

  // A combined pack's post-op (when `post`) and its copy to the output.
  template <bool Dst>
  WEFT_HD void finishPack(Pack& acc, T* dst, int64_t p, int count, bool post) const {
    if (post)
      for (int e = 0; e < count; ++e) acc.elems[e] = this->op_.post(acc.elems[e]);
    if (Dst) storeElems(dst + p * kPerPack, acc, count);
  }

  // One pack: sources in order (the own input at position ownPos among the
  // peers), then the outputs. False when a receive wait failed.
  template <bool Src, bool Dst>
  WEFT_HD bool movePack(const T* src, T* dst, int64_t p, int count, int nr, int ns, int ownPos, bool pre, bool post) {
    Pack acc;
    acc.bits = 0;
    if (!combineInOrder<Src, kMaxRecv>(
            &acc, nr, ownPos, count, [&] { return ownPack(src, p, count, pre); },
            [&](int i, Pack* in) { return loadPeerPack(i, p, in); }))
      return false;
    finishPack<Dst>(acc, dst, p, count, post);
    for (int i = 0; i < kMaxSend && i < ns; ++i) {
      const LineRegion& r = this->txr(i);
      llStorePack(lineStep(r) + p * kLLPackLineBytes, acc.bits, llFlag(r.step));
    }
    return true;
  }

  // Host: the producer asks for its send lines kWriteAhead lines ahead of
  // its stores, owned. The consumer read each of them kLineSteps steps ago
  // and its copy is likely still there, so without the hint the first store
  // to every line waits for the other core to give the line up, one line
  // after another (stores become visible in order). Ring LL at 2 ranks,
  // 4 KiB: AllReduce 17 -> 8.2 us, AllGather 8.0 -> 5.1, Broadcast
  // 6.5-7.4 -> 3.8-4.1 (docs/performance.md, "Small Broadcast").
  static constexpr int64_t kPacksPerLine = 64 / kLLPackLineBytes;
  static constexpr int64_t kWriteAhead = 4;

  template <bool Src, bool Dst>
  WEFT_HD bool moveSlice(const T* src, T* dst, int64_t n, int nr, int ns, int ownPos, bool pre, bool post) {
    const int64_t packs = divUp<int64_t>(n, kPerPack);
    bool ok = true;
#if !WEFT_DEVICE_PASS
    const int64_t lines = divUp<int64_t>(packs, kPacksPerLine);
    for (int64_t l = 0; ns > 0 && l < kWriteAhead; ++l) this->prefetchSendUnit(l, lines, 64, ns);
    if (this->coop_.size() == 1) {
      // One peer each way (a Broadcast, a ring, 2-rank one-shots): loops
      // the compiler unrolls whatever the fan. With the fan's bounds at
      // nr = 1 (one-shot's Fan<kMaxFlatPeers, kMaxFlatPeers>), the arrays
      // stay in memory and LL AllReduce of 512 B at 2 ranks took 1.05
      // against 0.58 us.
      constexpr int kR = kMaxRecv < 1 ? kMaxRecv : 1;
      constexpr int kS = kMaxSend < 1 ? kMaxSend : 1;
      if (nr <= kR && ns <= kS) return soloSlice<Src, Dst, kR, kS>(src, dst, n, lines, nr, ns, ownPos, pre, post);
      return soloSlice<Src, Dst, kMaxRecv, kMaxSend>(src, dst, n, lines, nr, ns, ownPos, pre, post);
    }
#endif
    for (int64_t p = this->coop_.threadRank(); ok && p < packs; p += this->coop_.size()) {
#if !WEFT_DEVICE_PASS
      if (ns > 0 && p % kPacksPerLine == 0) this->prefetchSendUnit(p / kPacksPerLine + kWriteAhead, lines, 64, ns);
#endif
      const int count = static_cast<int>(minOf<int64_t>(kPerPack, n - p * kPerPack));
      ok = movePack<Src, Dst>(src, dst, p, count, nr, ns, ownPos, pre, post);
    }
    return ok;
  }

#if !WEFT_DEVICE_PASS
  // Host, a team of one thread (every rank of the host backend): the slice's
  // packs in order, the line addresses and flags worked out once for the
  // slice, each whole pack one word from each source, combined in
  // movePack's order, and a receive wait entered only when the first look
  // at the line finds it not yet written. Through movePack, a pack took
  // about 45 instructions at either end of an LL Broadcast of 128 B
  // (callgrind: the address and flag per pack, the generic wait, and every
  // store through a byte pointer made the compiler load the region's fields
  // again). The last, partial pack goes through movePack.
  // kR, kS: bounds of the peer loops (nr <= kR, ns <= kS). moveSlice has
  // asked for the first kWriteAhead of the slice's `lines` send lines.
  template <bool Src, bool Dst, int kR, int kS>
  bool soloSlice(const T* src, T* dst, int64_t n, int64_t lines, int nr, int ns, int ownPos, bool pre, bool post) {
    const int64_t whole = n / kPerPack;
    const char* inAt[kR > 0 ? kR : 1] = {};
    uint32_t inFlag[kR > 0 ? kR : 1] = {};
    for (int i = 0; i < kR && i < nr; ++i) {
      inAt[i] = lineStep(this->rxr(i));
      inFlag[i] = llFlag(this->rxr(i).step);
    }
    char* outAt[kS > 0 ? kS : 1] = {};
    uint32_t outFlag[kS > 0 ? kS : 1] = {};
    for (int i = 0; i < kS && i < ns; ++i) {
      outAt[i] = lineStep(this->txr(i));
      outFlag[i] = llFlag(this->txr(i).step);
    }
    for (int64_t p = 0; p < whole; ++p) {
      if (ns > 0 && p % kPacksPerLine == 0) this->prefetchSendUnit(p / kPacksPerLine + kWriteAhead, lines, 64, ns);
      Pack acc;
      acc.bits = 0;
      if (!combineInOrder<Src, kR>(
              &acc, nr, ownPos, kPerPack, [&] { return ownPack(src, p, kPerPack, pre); },
              [&](int i, Pack* in) {
                return llLoadPack(inAt[i] + p * kLLPackLineBytes, inFlag[i], &in->bits) || loadPeerPack(i, p, in);
              }))
        return false;
      finishPack<Dst>(acc, dst, p, kPerPack, post);
      for (int i = 0; i < kS && i < ns; ++i) llStorePack(outAt[i] + p * kLLPackLineBytes, acc.bits, outFlag[i]);
    }
    if (whole * kPerPack == n) return true;
    return movePack<Src, Dst>(src, dst, whole, static_cast<int>(n - whole * kPerPack), nr, ns, ownPos, pre, post);
  }
#endif
};

}  // namespace weft::device
