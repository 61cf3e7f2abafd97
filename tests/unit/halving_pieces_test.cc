// Halving-doubling AllReduce's schedule (device/halving_doubling.h): a
// round's blocks travel as one piece while they fit in a chunk, so a small
// message takes one hand-off per round (2 log2 p), a large one a piece per
// block (each a chunk: the FIFO bound of device/exchange.h); either way the
// pieces of a stage cover exactly the blocks the textbook schedule sends,
// none longer than a chunk.
#include <gtest/gtest.h>

#include <vector>

#include "device/halving_doubling.h"

namespace weft::device {
namespace {

struct Sent {
  int pieces = 0;         // pieces with data
  int64_t elements = 0;   // elements in them
  int64_t longest = 0;    // the longest piece
};

// What logical rank L sends over the whole schedule of k ranks, m elements
// in blocks of `block`, pieces of at most `chunk`.
Sent sentBy(int k, int L, int64_t m, int64_t block, int64_t chunk) {
  ExchangeView ex{};
  ex.nranks = k;
  ex.logical = L;
  std::vector<float> in(static_cast<size_t>(m)), out(static_cast<size_t>(m));
  HalvingDoublingAllReduce<float> algo(ex, in.data(), out.data(), m, block, chunk);
  Sent sent;
  for (int s = 0; s < algo.stageCount(); ++s) {
    const Stage st = algo.stage(s);
    for (int j = 0; j < st.pieces; ++j) {
      const int64_t len = algo.pieceLength(L, s, j);
      if (len <= 0) continue;
      sent.pieces += 1;
      sent.elements += len;
      sent.longest = len > sent.longest ? len : sent.longest;
    }
  }
  return sent;
}

TEST(HalvingPieces, SmallMessagesTakeOneHandOffPerRound) {
  // 8 ranks, 64 elements in blocks of 8, chunks of 1024: 3 halving and 3
  // doubling rounds, one piece each; 4 + 2 + 1 blocks sent each way.
  for (int L = 0; L < 8; ++L) {
    const Sent s = sentBy(8, L, 64, 8, 1024);
    EXPECT_EQ(s.pieces, 6) << "rank " << L;
    EXPECT_EQ(s.elements, 2 * 7 * 8) << "rank " << L;
  }
}

TEST(HalvingPieces, LargeMessagesKeepAPiecePerChunk) {
  // Blocks of a whole chunk: a piece per block, 2 (p - 1) = 14 at 8 ranks.
  for (int L = 0; L < 8; ++L) {
    const Sent s = sentBy(8, L, 8 * 1024, 1024, 1024);
    EXPECT_EQ(s.pieces, 14) << "rank " << L;
    EXPECT_EQ(s.longest, 1024) << "rank " << L;
  }
  // In between: blocks of 256, chunks of 1024: up to 4 blocks a piece; the
  // round of 4 blocks is one piece, so still 6, none beyond a chunk.
  const Sent mid = sentBy(16, 5, 16 * 256, 256, 1024);
  EXPECT_EQ(mid.pieces, 2 * (1 + 1 + 1 + 2));  // rounds of 8 blocks take 2 pieces
  EXPECT_LE(mid.longest, 1024);
  EXPECT_EQ(mid.elements, 2 * 15 * 256);
}

TEST(HalvingPieces, FoldedRanksSendTheirWholeInputOnce) {
  // 6 ranks: p = 4, ranks 0 and 2 fold into 1 and 3. A folded rank sends
  // its m elements in (one piece: they fit a chunk) and receives the result.
  const Sent folded = sentBy(6, 0, 40, 10, 1024);
  EXPECT_EQ(folded.pieces, 1);
  EXPECT_EQ(folded.elements, 40);
  // Its partner sends 2 log2 4 = 4 round pieces and the result back out.
  const Sent partner = sentBy(6, 1, 40, 10, 1024);
  EXPECT_EQ(partner.pieces, 4 + 1);
  EXPECT_EQ(partner.elements, 2 * 3 * 10 + 40);
}

}  // namespace
}  // namespace weft::device
