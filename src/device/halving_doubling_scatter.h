// ReduceScatter by recursive halving (the first half of Rabenseifner's
// AllReduce), on the shape of exchange.h (fold-in, participants, fold-out).
//
// The k segments of the input (one per rank, `count` elements apart) are
// grouped into p blocks, one per participant: participant q's block holds
// the segments of the logical ranks it stands for (2q and 2q+1 when a rank
// folded into it, else q + rem). Fold-in: the even rank of each fold pair
// hands all k of its segments to the odd one, which combines them with its
// own. Halving: with distance d = p/2, ..., 1 each participant sends the
// blocks its partner (new rank ^ d) keeps and combines the ones it keeps,
// so after the last round participant q holds its block fully reduced.
// Fold-out: the odd rank hands the even one its finished segment.
// Each rank sends about S (p-1)/p in log2(p) rounds, against the ring's
// k-1 hand-offs of S/k.
//
// Partial results of segments other than the rank's own have nowhere to
// live in the user's buffers (the output is one segment), so they go to a
// scratch area of the exchange view: k pieces of `len` elements, one per
// logical rank. The loop's pieces are sized so that k of them fit in it.
#pragma once

#include "device/exchange.h"
#include "device/work.h"

namespace weft::device {

// One round of pieces `len` long at element `base` of every segment.
// Stages: 0 fold-in, 1..R halving, R+1 fold-out.
template <typename T>
class HalvingReduceScatter {
 public:
  WEFT_HD HalvingReduceScatter(const ExchangeView& ex, const T* in, T* out, T* scratch, int64_t stride, int64_t len)
      : shape_(ex.nranks),
        me_(ex.logical),
        physical_(ex.physical),
        in_(in),
        out_(out),
        scratch_(scratch),
        stride_(stride),
        len_(len) {}

  WEFT_HD int stageCount() const { return shape_.rounds + 2; }
  WEFT_HD Stage stage(int s) const {
    if (s == 0) return Stage{kFoldSlot, shape_.rem > 0 ? shape_.k : 0, true};
    if (s == shape_.rounds + 1) return Stage{kFoldSlot, shape_.rem > 0 ? 1 : 0, false};
    const int d = distance(s);
    return Stage{log2Of(d), 2 * d, false};
  }
  WEFT_HD int64_t pieceLength(int L, int s, int j) const { return sentSegment(L, s, j) >= 0 ? len_ : 0; }

  template <typename Prims>
  WEFT_HD void sendPiece(Prims& prims, int s, int j) {
    const int seg = sentSegment(me_, s, j);
    if (seg < 0) return;
    if (s == 0 || (s == 1 && !shape_.foldReceiver(me_)))
      prims.send(input(seg), len_);  // the rank's own input: pre-op applied here
    else
      prims.directSend(partial(seg), len_);  // a partial (or, folding out, a result): no pre-op
  }

  template <typename Prims>
  WEFT_HD void recvPiece(Prims& prims, int s, int j) {
    const int from = source(s);
    if (from < 0) return;
    const int seg = sentSegment(from, s, j);
    if (seg < 0) return;
    if (s == shape_.rounds + 1) return prims.recv(out_, len_);
    // The lower logical rank's partial first, as the AllReduce combines.
    const int ownAt = from < me_ ? 1 : 0;
    const bool last = s == shape_.rounds;
    T* dst = last && seg == me_ ? out_ : partial(seg);
    if (s == 0) return prims.recvReduceCopyInOrder(input(seg), dst, len_, ownAt, false);
    if (s > 1 || shape_.foldReceiver(me_)) return prims.recvReduceCopyResult(partial(seg), dst, len_, ownAt, last);
    prims.recvReduceCopyInOrder(input(seg), dst, len_, ownAt, last);
  }

 private:
  WEFT_HD static int log2Of(int d) {
    int i = 0;
    while ((1 << i) < d) ++i;
    return i;
  }
  WEFT_HD int distance(int s) const { return shape_.p >> s; }

  // The logical rank this rank receives from in stage s, or -1.
  WEFT_HD int source(int s) const {
    if (s == 0) return shape_.foldReceiver(me_) ? (me_ ^ 1) : -1;
    if (s == shape_.rounds + 1) return shape_.foldSender(me_) ? (me_ ^ 1) : -1;
    if (shape_.newRank(me_) < 0) return -1;
    return shape_.partner(me_, log2Of(distance(s)));
  }

  // Logical rank whose segment is piece `sub` of participant q's block; -1: none.
  WEFT_HD int blockSegment(int q, int sub) const {
    if (q < shape_.rem) return 2 * q + sub;
    return sub == 0 ? q + shape_.rem : -1;
  }

  // Logical rank whose segment L sends as piece j of stage s; -1: none.
  WEFT_HD int sentSegment(int L, int s, int j) const {
    if (s == 0) return shape_.foldSender(L) ? j : -1;
    if (s == shape_.rounds + 1) return shape_.foldReceiver(L) && j == 0 ? (L ^ 1) : -1;
    const int q = shape_.newRank(L);
    if (q < 0) return -1;
    const int d = distance(s);
    // The d blocks the partner keeps, two pieces per block.
    return blockSegment(((q ^ d) & ~(d - 1)) + j / 2, j % 2);
  }

  WEFT_HD const T* input(int L) const { return in_ + static_cast<int64_t>(physical_[L]) * stride_; }
  WEFT_HD T* partial(int L) const { return scratch_ + static_cast<int64_t>(L) * len_; }

  ExchangeShape shape_;
  int me_;
  const int32_t* physical_;
  const T* in_;  // this round's place in rank 0's segment
  T* out_;
  T* scratch_;
  int64_t stride_;
  int64_t len_;
};

// Elements of each piece: a chunk, or less so that k pieces fit in the
// scratch area; a multiple of the alignment, at least one alignment unit
// (the core sizes the area for that). Every rank computes the same.
WEFT_HD int64_t scatterPieceElems(const ExchangeView& ex, const CollWork& work, int64_t elemBytes) {
  const int64_t align = static_cast<int64_t>(work.alignElems);
  const int64_t fit = static_cast<int64_t>(ex.scratchBytes) / elemBytes / ex.nranks / align * align;
  return maxOf(align, minOf(static_cast<int64_t>(work.chunkElems), fit));
}

template <typename T, typename StagePrims, typename RelayPrims>
WEFT_HD void halvingReduceScatter(const ExchangeView& ex, const CollWork& work, StagePrims&& stagePrims,
                                  RelayPrims&& relayPrims) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  T* scratch = static_cast<T*>(ex.scratch);
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int64_t piece = scatterPieceElems(ex, work, static_cast<int64_t>(sizeof(T)));
  const int64_t stride = static_cast<int64_t>(work.count);
  for (int64_t base = 0; base < n; base += piece) {
    HalvingReduceScatter<T> algo(ex, src + base, dst + base, scratch, stride, minOf(piece, n - base));
    runExchange(algo, ex, stagePrims, relayPrims);
  }
}

}  // namespace weft::device
