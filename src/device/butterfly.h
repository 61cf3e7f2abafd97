// Butterfly (recursive doubling) AllReduce, for small messages: log2(p)
// rounds in which each participant exchanges its whole partial result with
// one partner (round i: new rank ^ 2^i) and both combine, plus a fold-in and
// fold-out for the ranks beyond the largest power of two (exchange.h). Every
// round moves the whole message, so the time is about
// log2(p) (alpha + S/B + S*C): few hand-offs, many bytes.
//
// Every rank ends with the same bits: in each round both partners hold the
// same two partials (by induction) and combine them in the same order, the
// lower logical rank's first; a folded rank gets a copy.
//   fold-in:  even send            odd recvReduceCopyInOrder
//   round i:  send / directSend    recvReduceCopyInOrder / recvReduceCopyResult
//   fold-out: odd directSend       even recv
#pragma once

#include "device/exchange.h"
#include "device/work.h"

namespace weft::device {

template <typename T>
class ButterflyAllReduce {
 public:
  WEFT_HD ButterflyAllReduce(const ExchangeView& ex, const T* in, T* out, int64_t len)
      : shape_(ex.nranks), me_(ex.logical), in_(in), out_(out), len_(len) {}

  WEFT_HD int stageCount() const { return shape_.rounds + 2; }
  WEFT_HD Stage stage(int s) const {
    const int foldPieces = shape_.rem > 0 ? 1 : 0;
    if (s == 0) return Stage{kFoldSlot, foldPieces, true};
    if (s == shape_.rounds + 1) return Stage{kFoldSlot, foldPieces, false};
    return Stage{s - 1, 1, false};
  }
  WEFT_HD int64_t pieceLength(int, int, int) const { return len_; }

  template <typename Prims>
  WEFT_HD void sendPiece(Prims& prims, int s, int) {
    if (s == 0) {
      if (shape_.foldSender(me_)) prims.send(in_, len_);
    } else if (s == shape_.rounds + 1) {
      if (shape_.foldReceiver(me_)) prims.directSend(out_, len_);
    } else if (shape_.newRank(me_) >= 0) {
      if (hasPartial(s))
        prims.directSend(out_, len_);
      else
        prims.send(in_, len_);
    }
  }

  template <typename Prims>
  WEFT_HD void recvPiece(Prims& prims, int s, int) {
    if (s == 0) {
      if (shape_.foldReceiver(me_)) prims.recvReduceCopyInOrder(in_, out_, len_, 1, false);
    } else if (s == shape_.rounds + 1) {
      if (shape_.foldSender(me_)) prims.recv(out_, len_);
    } else if (shape_.newRank(me_) >= 0) {
      const int ownAt = shape_.partner(me_, s - 1) < me_ ? 1 : 0;
      const bool last = s == shape_.rounds;
      if (hasPartial(s))
        prims.recvReduceCopyResult(out_, out_, len_, ownAt, last);
      else
        prims.recvReduceCopyInOrder(in_, out_, len_, ownAt, last);
    }
  }

 private:
  // Whether out_ holds this rank's partial when round stage s starts.
  WEFT_HD bool hasPartial(int s) const { return s > 1 || shape_.foldReceiver(me_); }

  ExchangeShape shape_;
  int me_;
  const T* in_;
  T* out_;
  int64_t len_;
};

// Butterfly AllReduce of this channel's share, chunk by chunk (a chunk fits
// in a FIFO, which the deadlock argument of exchange.h needs).
template <typename T, typename StagePrims, typename RelayPrims>
WEFT_HD void butterflyAllReduce(const ExchangeView& ex, const CollWork& work, StagePrims&& stagePrims,
                                RelayPrims&& relayPrims) {
  const T* src = static_cast<const T*>(work.sendbuff) + work.channelStart;
  T* dst = static_cast<T*>(work.recvbuff) + work.channelStart;
  const int64_t n = static_cast<int64_t>(work.channelCount);
  const int64_t chunk = static_cast<int64_t>(work.chunkElems);
  for (int64_t base = 0; base < n; base += chunk) {
    ButterflyAllReduce<T> algo(ex, src + base, dst + base, minOf(chunk, n - base));
    runExchange(algo, ex, stagePrims, relayPrims);
  }
}

}  // namespace weft::device
