// Primitives for the LL128 protocol (ll128_line.h): 128-byte lines of 120
// payload bytes and the step's flag, so it keeps LL's one hand-off per step
// (no tail counter) at 15/16 of the line memory instead of half.
//
// The frame (flow control, signatures, slices of one LL128 step:
// ll128StepBytes / 128 x 120 payload bytes) is prims_lines.h's. Per slice,
// the team walks the slice's lines in rounds: in each round, lane l of line
// `base + threadRank / kLL128Lanes` is thread threadRank (a line per thread
// on the host, eight threads per line on a GPU, so a warp holds four
// consecutive lines). Each thread loads its unit's input words, waits for
// each receive peer's unit (on a GPU the warp waits for all its lines
// together: only the flag lane can see the flag), combines them in source
// order, writes its output and stores the unit to every send peer. Every
// thread of the team takes part in every round, past the slice's last line
// too (it then moves nothing), so the warp's votes always have every lane.
#pragma once

#include "device/ll128_line.h"
#include "device/prims_lines.h"

namespace weft::device {

template <typename T, typename RedOp, typename FanT, typename Coop>
class Primitives<T, RedOp, FanT, ProtoLL128, Coop>
    : public LinePrims<Primitives<T, RedOp, FanT, ProtoLL128, Coop>, T, RedOp, FanT, Coop> {
  using Base = LinePrims<Primitives, T, RedOp, FanT, Coop>;
  friend Base;
  static constexpr int kMaxRecv = FanT::kMaxRecv;
  static constexpr int kMaxSend = FanT::kMaxSend;
  static_assert(sizeof(T) <= 8 && 8 % sizeof(T) == 0, "elements must tile an 8-byte word");
  static constexpr int kPerWord = 8 / static_cast<int>(sizeof(T));
  static constexpr int kWords = kLL128UnitWords;

  union Word {
    uint64_t bits;
    T elems[kPerWord];
  };

 public:
  using Base::Base;

 private:
  WEFT_HD static LineRegion& regionOf(FifoEnd& end) { return end.ll128; }
  WEFT_HD static int64_t slicePayloadBytes(int64_t stepBytes) {
    return stepBytes / kLL128LineBytes * kLL128PayloadBytes;
  }
  WEFT_HD static int64_t sliceLineBytes(int64_t n) {
    return divUp<int64_t>(n * static_cast<int64_t>(sizeof(T)), kLL128PayloadBytes) * kLL128LineBytes;
  }

  WEFT_HD void combine(Word* acc, const Word* in, const int* counts) const {
    for (int j = 0; j < kWords; ++j)
      for (int e = 0; e < counts[j]; ++e) acc[j].elems[e] = this->op_(acc[j].elems[e], in[j].elems[e]);
  }

  // Waits for receive peer i's unit (line, lane) of this slice; a thread
  // past the slice's lines (active false) takes part in the wait only.
  WEFT_HD bool loadPeerUnit(int i, int64_t line, int lane, bool active, Word* out) {
    const LineRegion& r = this->rxr(i);
    const char* at = lineStep(r) + line * kLL128LineBytes;
    const uint64_t flag = ll128Flag(r.step);
    uint64_t words[kWords] = {};
    const bool ok = this->coop_.waitWarp([&] { return !active || ll128LoadUnit(at, lane, flag, words); },
                                         [&] {
                                           return WaitSite{this->rxPeer(i), 0, this->channel_};
                                         });
    for (int j = 0; j < kWords; ++j) out[j].bits = words[j];
    return ok;
  }

  // One unit: sources in order (the own input at position ownPos among the
  // peers), then the outputs. False when a receive wait failed.
  template <bool Src, bool Dst>
  WEFT_HD bool moveUnit(const T* src, T* dst, int64_t n, int64_t line, int lane, bool active, int nr, int ns,
                        int ownPos, bool pre, bool post) {
    // Elements of each of this unit's words (0 past the slice and for the flag).
    int counts[kWords];
    for (int j = 0; j < kWords; ++j) {
      const int64_t first = ll128PayloadWord(line, lane, j) * kPerWord;
      counts[j] = !active || ll128IsFlag(lane, j)
                      ? 0
                      : static_cast<int>(maxOf<int64_t>(0, minOf<int64_t>(kPerWord, n - first)));
    }
    Word acc[kWords];
    for (int j = 0; j < kWords; ++j) acc[j].bits = 0;
    bool first = true;
    auto take = [&](const Word* in) {
      if (first)
        for (int j = 0; j < kWords; ++j) acc[j] = in[j];
      else
        combine(acc, in, counts);
      first = false;
    };
    auto addOwn = [&] {
      Word own[kWords];
      for (int j = 0; j < kWords; ++j) {
        own[j].bits = 0;
        if (counts[j] == 0) continue;
        const T* from = src + ll128PayloadWord(line, lane, j) * kPerWord;
        for (int e = 0; e < counts[j]; ++e) own[j].elems[e] = pre ? this->op_.pre(from[e]) : from[e];
      }
      take(own);
    };
    for (int i = 0; i < kMaxRecv && i < nr; ++i) {
      if (Src && i == ownPos) addOwn();
      Word in[kWords];
      if (!loadPeerUnit(i, line, lane, active, in)) return false;
      take(in);
    }
    if (Src && ownPos >= nr) addOwn();
    if (active)
      for (int j = 0; j < kWords; ++j) {
        if (post)
          for (int e = 0; e < counts[j]; ++e) acc[j].elems[e] = this->op_.post(acc[j].elems[e]);
        if (Dst && counts[j] > 0) {
          T* to = dst + ll128PayloadWord(line, lane, j) * kPerWord;
          for (int e = 0; e < counts[j]; ++e) to[e] = acc[j].elems[e];
        }
      }
    // The loops above run a different number of times per lane; the eight
    // lanes of a line must issue their stores as one instruction (the line
    // is seen whole only then), so the warp converges first. Every lane gets
    // here: `active` is shared by a line's lanes, and a failed wait returned
    // on every lane of the warp (waitWarp's answer is the warp's).
    this->coop_.warpSync();
    if (!active) return true;
    uint64_t words[kWords];
    for (int j = 0; j < kWords; ++j) words[j] = acc[j].bits;
    for (int i = 0; i < kMaxSend && i < ns; ++i) {
      const LineRegion& r = this->txr(i);
      ll128StoreUnit(lineStep(r) + line * kLL128LineBytes, lane, words, ll128Flag(r.step));
    }
    return true;
  }

  // Host: the send lines asked for owned kWriteAhead lines ahead of the
  // stores, as LL's producer does (prims_ll.h).
  static constexpr int64_t kWriteAhead = 2;

  // Out of line on the GPU (portable.h): inlined into every verb, it more
  // than doubled the build time of LL128's kernels.
  template <bool Src, bool Dst>
  WEFT_HD_OUTLINED bool moveSlice(const T* src, T* dst, int64_t n, int nr, int ns, int ownPos, bool pre, bool post) {
    const int64_t lines = divUp<int64_t>(n * static_cast<int64_t>(sizeof(T)), kLL128PayloadBytes);
    const int perRound = maxOf(1, this->coop_.size() / kLL128Lanes);
    const int lane = this->coop_.threadRank() % kLL128Lanes;
    const int64_t mine = this->coop_.threadRank() / kLL128Lanes;
    bool ok = true;
    // Every thread runs every round (see above); after a failed wait the
    // later waits fail at once.
#if !WEFT_DEVICE_PASS
    for (int64_t l = 0; ns > 0 && lane == 0 && l < kWriteAhead; ++l)
      this->prefetchSendUnit(l + mine, lines, kLL128LineBytes, ns);
#endif
    for (int64_t base = 0; base < lines; base += perRound) {
      const int64_t line = base + mine;
#if !WEFT_DEVICE_PASS
      if (ns > 0 && lane == 0) this->prefetchSendUnit(line + kWriteAhead, lines, kLL128LineBytes, ns);
#endif
      ok = moveUnit<Src, Dst>(src, dst, n, line, lane, line < lines, nr, ns, ownPos, pre, post) && ok;
    }
    return ok;
  }
};

}  // namespace weft::device
