// Pairwise-exchange algorithms (butterfly, recursive halving-doubling): the
// ranks' shared shape, this rank's view of its partners, and the driver that
// runs an algorithm's stages.
//
// Ranks are renumbered into logical ranks (the core's exchange plan chooses
// the order so that no partnered pair shares a broken link). k logical ranks
// = p (the largest power of two <= k) participants plus rem = k - p folded
// ranks: each even logical rank below 2*rem first hands its data to the odd
// rank above it (fold-in), sits out the rounds and gets the result back at
// the end (fold-out). Participant q (its "new rank") exchanges in round i with
// q ^ 2^i; each pair's connections sit in slot i of the view, the fold
// pair's in slot kFoldSlot.
//
// A pair whose link is broken and could not be avoided exchanges through a
// relay: the two ends' slot points at the relay, which forwards each piece
// (recvSend) between its own send and its own receive of the stage.
//
// Deadlock freedom: every rank walks the same sequence of (stage, piece)
// steps; in one step a rank sends at most one piece (at most a chunk, which
// fits in a FIFO) on each connection, the relays forward, then it receives.
// The core's plan never uses a directed connection twice in one stage. So
// once every rank has finished the steps before (s, j), every FIFO used in
// (s, j) is empty: the sends complete, then the forwards, then the receives.
#pragma once

#include "device/portable.h"
#include "device/step_fifo.h"

namespace weft::device {

// Rounds for up to 2^16 participants, plus the fold pair's slot.
constexpr int kMaxExchangeRounds = 16;
constexpr int kFoldSlot = kMaxExchangeRounds;
constexpr int kExchangeSlots = kMaxExchangeRounds + 1;
// Pieces one rank forwards for others (each duty is one direction).
constexpr int kMaxRelayDuties = 8;

// This rank forwards what logical rank `from` sends to `to` in slot `slot`.
struct RelayDuty {
  int32_t slot;
  int32_t from;  // logical ranks
  int32_t to;
  FifoEnd* recv;  // from `from`
  FifoEnd* send;  // to `to`
};

struct ExchangeView {
  int32_t nranks;
  int32_t logical;          // this rank's logical rank
  const int32_t* physical;  // logical rank -> rank (nranks entries; a device copy on the cuda backend)
  // Per slot: the connection to the partner, or to the relay between us;
  // null where this rank has no partner in that slot.
  FifoEnd* send[kExchangeSlots];
  FifoEnd* recv[kExchangeSlots];
  int32_t nRelays;
  RelayDuty relays[kMaxRelayDuties];
  // Partial results of the halving ReduceScatter (halving_doubling_scatter.h),
  // memory of the channel (device memory on the cuda backend); null until a
  // ReduceScatter needs it.
  void* scratch;
  uint64_t scratchBytes;
};

// Who does what in a k-rank exchange, from logical ranks.
struct ExchangeShape {
  int k, p, rounds, rem;
  WEFT_HD explicit ExchangeShape(int nranks) : k(nranks), p(1), rounds(0), rem(0) {
    while (p * 2 <= k) {
      p *= 2;
      rounds += 1;
    }
    rem = k - p;
  }
  // Participant number of logical rank L; -1 for a folded (even, < 2 rem) rank.
  WEFT_HD int newRank(int L) const {
    if (L >= 2 * rem) return L - rem;
    return (L & 1) ? L / 2 : -1;
  }
  WEFT_HD int logicalOf(int q) const { return q < rem ? 2 * q + 1 : q + rem; }
  WEFT_HD bool foldSender(int L) const { return L < 2 * rem && (L & 1) == 0; }
  WEFT_HD bool foldReceiver(int L) const { return L < 2 * rem && (L & 1) == 1; }
  // The fold partner of L (L ^ 1 below 2 rem), else -1.
  WEFT_HD int foldPartner(int L) const { return L < 2 * rem ? (L ^ 1) : -1; }
  // Logical partner of participant L in round slot i.
  WEFT_HD int partner(int L, int slot) const { return logicalOf(newRank(L) ^ (1 << slot)); }
};

// One stage: which slot's connections it uses, how many piece steps it has,
// and for the fold slot whether data goes in (even -> odd) or out.
struct Stage {
  int slot;
  int pieces;
  bool foldIn;
};

// Runs `algo`'s stages. Algo provides (logical ranks):
//   int stageCount()        Stage stage(int s)
//   int64_t pieceLength(int L, int s, int j)   what L sends in step (s, j)
//   void sendPiece(Prims&, int s, int j)       this rank's own send
//   void recvPiece(Prims&, int s, int j)       this rank's own receive
// stagePrims(slot) and relayPrims(duty) make primitives over one slot's ends
// or one duty's ends (made per use: no two live objects share an end).
template <typename Algo, typename StagePrims, typename RelayPrims>
WEFT_HD void runExchange(Algo& algo, const ExchangeView& ex, StagePrims&& stagePrims, RelayPrims&& relayPrims) {
  const int stages = algo.stageCount();
  for (int s = 0; s < stages; ++s) {
    const Stage st = algo.stage(s);
    for (int j = 0; j < st.pieces; ++j) {
      {
        auto prims = stagePrims(st.slot);
        algo.sendPiece(prims, s, j);
      }
      for (int d = 0; d < ex.nRelays; ++d) {
        const RelayDuty& duty = ex.relays[d];
        if (duty.slot != st.slot) continue;
        // In the fold slot one direction moves per stage: in, from the even rank.
        if (st.slot == kFoldSlot && ((duty.from & 1) == 0) != st.foldIn) continue;
        const int64_t len = algo.pieceLength(duty.from, s, j);
        if (len <= 0) continue;
        auto prims = relayPrims(d);
        prims.recvSend(len);
      }
      {
        auto prims = stagePrims(st.slot);
        algo.recvPiece(prims, s, j);
      }
    }
  }
}

}  // namespace weft::device
