// Recursive halving-doubling (Rabenseifner), for mid-size messages, on the
// shape of exchange.h (fold-in, participants, fold-out).
//
// AllReduce splits the data into p blocks, one per participant. Reduce-
// scatter by halving: with distance d = p/2, p/4, ..., 1 each participant
// sends the half of its current blocks that its partner (new rank ^ d) keeps
// and combines the half it keeps, so participant q ends owning block q fully
// reduced. Allgather by doubling: d = 1, 2, ..., p/2, each sends the blocks
// it owns and receives its partner's. Each rank sends about 2 S (p-1)/p in
// 2 log2(p) rounds: the ring's bytes in far fewer hand-offs.
// Combining is in logical-rank order (lower partial first); each block is
// finished at one rank and copied to the others, so every rank has the same bits.
//
// AllGather by doubling: the allgather half alone, blocks being the ranks'
// segments (a participant that folded a rank in owns two segments).
//
// A stage's pieces are blocks (AllReduce) or segments (AllGather), each at
// most a chunk, so a piece fits in a FIFO (exchange.h). In AllReduce a
// round's blocks are contiguous, so as many of them as fit in a chunk
// travel as one piece: when the whole round fits (small and mid messages)
// a round is one hand-off, 2 log2 p in all as Rabenseifner has it, rather
// than one per block (2 (p - 1), as many as the ring).
#pragma once

#include "device/exchange.h"
#include "device/work.h"

namespace weft::device {

// Stage numbering shared by both: 0 fold-in, 1..R halving (AllReduce only),
// then R doubling stages, then fold-out.
template <typename T>
class HalvingDoublingAllReduce {
 public:
  // m elements in p blocks of `block` (the last ones shorter or empty); a
  // piece is at most `chunk` elements.
  WEFT_HD HalvingDoublingAllReduce(const ExchangeView& ex, const T* in, T* out, int64_t m, int64_t block,
                                   int64_t chunk)
      : shape_(ex.nranks), me_(ex.logical), in_(in), out_(out), m_(m), block_(block), group_(1) {
    while (group_ * 2 <= shape_.p && (group_ * 2) * block_ <= chunk) group_ *= 2;
  }

  WEFT_HD int stageCount() const { return 2 * shape_.rounds + 2; }
  WEFT_HD Stage stage(int s) const {
    const int R = shape_.rounds;
    const int foldPieces = shape_.rem > 0 ? divUp<int>(shape_.p, group_) : 0;
    if (s == 0) return Stage{kFoldSlot, foldPieces, true};
    if (s == 2 * R + 1) return Stage{kFoldSlot, foldPieces, false};
    const int d = distance(s);
    return Stage{log2Of(d), divUp<int>(d, group_), false};
  }

  WEFT_HD int64_t pieceLength(int L, int s, int j) const {
    int64_t at = 0;
    return pieceRange(L, s, j, &at);
  }

  template <typename Prims>
  WEFT_HD void sendPiece(Prims& prims, int s, int j) {
    int64_t at = 0;
    const int64_t len = pieceRange(me_, s, j, &at);
    if (len <= 0) return;
    if (s == 0 || (halving(s) && !hasPartial(s)))
      prims.send(in_ + at, len);
    else
      prims.directSend(out_ + at, len);
  }

  template <typename Prims>
  WEFT_HD void recvPiece(Prims& prims, int s, int j) {
    const int from = source(s);
    if (from < 0) return;
    int64_t at = 0;
    const int64_t len = pieceRange(from, s, j, &at);
    if (len <= 0) return;
    if (s == 0) return prims.recvReduceCopyInOrder(in_ + at, out_ + at, len, 1, false);
    if (!halving(s)) return prims.recv(out_ + at, len);
    const int ownAt = from < me_ ? 1 : 0;
    const bool last = distance(s) == 1;
    if (hasPartial(s))
      prims.recvReduceCopyResult(out_ + at, out_ + at, len, ownAt, last);
    else
      prims.recvReduceCopyInOrder(in_ + at, out_ + at, len, ownAt, last);
  }

 private:
  WEFT_HD static int log2Of(int d) {
    int i = 0;
    while ((1 << i) < d) ++i;
    return i;
  }
  WEFT_HD bool halving(int s) const { return s >= 1 && s <= shape_.rounds; }
  // Distance of a halving or doubling stage.
  WEFT_HD int distance(int s) const { return halving(s) ? shape_.p >> s : 1 << (s - shape_.rounds - 1); }
  WEFT_HD bool hasPartial(int s) const { return s > 1 || shape_.foldReceiver(me_); }

  // The logical rank this rank receives from in stage s, or -1.
  WEFT_HD int source(int s) const {
    if (s == 0) return shape_.foldReceiver(me_) ? (me_ ^ 1) : -1;
    if (s == 2 * shape_.rounds + 1) return shape_.foldSender(me_) ? (me_ ^ 1) : -1;
    if (shape_.newRank(me_) < 0) return -1;
    return shape_.partner(me_, log2Of(distance(s)));
  }

  // First block that logical rank L sends as piece j of stage s; -1: none.
  WEFT_HD int sentBlock(int L, int s, int j) const {
    const int R = shape_.rounds;
    if (s == 0) return shape_.foldSender(L) ? j * group_ : -1;
    if (s == 2 * R + 1) return shape_.foldReceiver(L) ? j * group_ : -1;
    const int q = shape_.newRank(L);
    if (q < 0) return -1;
    const int d = distance(s);
    // Halving: the half the partner keeps. Doubling: the blocks L owns.
    const int first = halving(s) ? ((q ^ d) & ~(d - 1)) : (q & ~(d - 1));
    return first + j * group_;
  }

  // The elements [*at, *at + length) that logical rank L sends as piece j of
  // stage s: up to group_ consecutive blocks of the stage's (all p in a fold
  // stage, d in a round); 0 when none.
  WEFT_HD int64_t pieceRange(int L, int s, int j, int64_t* at) const {
    const int b = sentBlock(L, s, j);
    if (b < 0) return 0;
    const int stageBlocks = s == 0 || s == 2 * shape_.rounds + 1 ? shape_.p : distance(s);
    const int blocks = minOf(group_, stageBlocks - j * group_);
    *at = offset(b);
    return maxOf<int64_t>(0, minOf(offset(b + blocks), m_) - *at);
  }

  WEFT_HD int64_t offset(int b) const { return static_cast<int64_t>(b) * block_; }

  ExchangeShape shape_;
  int me_;
  const T* in_;
  T* out_;
  int64_t m_, block_;
  int group_;  // blocks per piece, a power of two
};

template <typename T, typename StagePrims, typename RelayPrims>
WEFT_HD void halvingDoublingAllReduce(const ExchangeView& ex, const CollWork& work, StagePrims&& stagePrims,
                                      RelayPrims&& relayPrims) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  const int64_t align = static_cast<int64_t>(work.alignElems);
  const int p = ExchangeShape(ex.nranks).p;
  for (int64_t base = 0; base < n; base += chunk * p) {
    const int64_t m = minOf(chunk * p, n - base);
    // Shrink the blocks at the tail so every participant still gets a share.
    const int64_t block = minOf(chunk, roundUp(divUp(m, static_cast<int64_t>(p)), align));
    HalvingDoublingAllReduce<T> algo(ex, src + base, dst + base, m, block, chunk);
    runExchange(algo, ex, stagePrims, relayPrims);
  }
}

// AllGather by recursive doubling of one chunk of this channel's share of
// every segment. Piece j of a doubling stage of distance d is segment j % 2
// of block first + j / 2 (a block holds a folded pair's two segments).
template <typename T>
class DoublingAllGather {
 public:
  WEFT_HD DoublingAllGather(const ExchangeView& ex, T* dst, int64_t segStride, int64_t len)
      : shape_(ex.nranks), me_(ex.logical), physical_(ex.physical), dst_(dst), stride_(segStride), len_(len) {}

  WEFT_HD int stageCount() const { return shape_.rounds + 2; }
  WEFT_HD Stage stage(int s) const {
    if (s == 0) return Stage{kFoldSlot, shape_.rem > 0 ? 1 : 0, true};
    if (s == shape_.rounds + 1) return Stage{kFoldSlot, shape_.rem > 0 ? 2 * shape_.p : 0, false};
    return Stage{s - 1, 2 << (s - 1), false};
  }
  WEFT_HD int64_t pieceLength(int L, int s, int j) const { return sentSegment(L, s, j) >= 0 ? len_ : 0; }

  template <typename Prims>
  WEFT_HD void sendPiece(Prims& prims, int s, int j) {
    const int seg = sentSegment(me_, s, j);
    if (seg >= 0) prims.directSend(segment(seg), len_);
  }

  template <typename Prims>
  WEFT_HD void recvPiece(Prims& prims, int s, int j) {
    int from = -1;
    if (s == 0)
      from = shape_.foldReceiver(me_) ? (me_ ^ 1) : -1;
    else if (s == shape_.rounds + 1)
      from = shape_.foldSender(me_) ? (me_ ^ 1) : -1;
    else if (shape_.newRank(me_) >= 0)
      from = shape_.partner(me_, s - 1);
    if (from < 0) return;
    const int seg = sentSegment(from, s, j);
    if (seg >= 0) prims.recv(segment(seg), len_);
  }

 private:
  // Logical rank whose segment is piece `sub` of participant block q; -1: none.
  WEFT_HD int blockSegment(int q, int sub) const {
    if (q < shape_.rem) return 2 * q + sub;
    return sub == 0 ? q + shape_.rem : -1;
  }

  // Logical rank whose segment L sends as piece j of stage s; -1: none.
  WEFT_HD int sentSegment(int L, int s, int j) const {
    if (s == 0) return shape_.foldSender(L) ? L : -1;
    if (s == shape_.rounds + 1) {
      if (!shape_.foldReceiver(L)) return -1;
      const int seg = blockSegment(j / 2, j % 2);
      return seg == (L ^ 1) ? -1 : seg;  // the folded rank has its own segment
    }
    const int q = shape_.newRank(L);
    if (q < 0) return -1;
    const int d = 1 << (s - 1);
    return blockSegment((q & ~(d - 1)) + j / 2, j % 2);
  }

  WEFT_HD T* segment(int L) const { return dst_ + static_cast<int64_t>(physical_[L]) * stride_; }

  ExchangeShape shape_;
  int me_;
  const int32_t* physical_;
  T* dst_;  // this chunk's place in rank 0's segment
  int64_t stride_;
  int64_t len_;
};

template <typename T, typename StagePrims, typename RelayPrims>
WEFT_HD void doublingAllGather(const ExchangeView& ex, const CollWork& work, StagePrims&& stagePrims,
                               RelayPrims&& relayPrims) {
  const T* src = static_cast<const T*>(work.sendbuff);
  T* dst = static_cast<T*>(work.recvbuff);
  const int64_t count = static_cast<int64_t>(work.count);
  const int64_t start = static_cast<int64_t>(work.channelStart);
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  T* mine = dst + static_cast<int64_t>(ex.physical[ex.logical]) * count + start;
  const bool inPlace = src + start == mine;
  for (int64_t base = 0; base < n; base += chunk) {
    const int64_t len = minOf(chunk, n - base);
    if (!inPlace) {
      auto prims = stagePrims(kFoldSlot);
      prims.localCopy(src + start + base, mine + base, len);
    }
    DoublingAllGather<T> algo(ex, dst + start + base, count, len);
    runExchange(algo, ex, stagePrims, relayPrims);
  }
}

}  // namespace weft::device
