// The alpha-beta-gamma cost model (tuning/cost_model.h).
#include <gtest/gtest.h>

#include "tuning/cost_model.h"

namespace weft::tuning {
namespace {

const SeedTerms kTerms{1.0, 1000.0, 0.001};  // 1 us, 1 GB/s, 1 ms per MB combined

TEST(SeedClosedForm, WorkedByHand) {
  // Ring, 4 ranks, 4000 B: 3 (2 + 2 x 1000/1000 + 1000 x 0.001) = 15.
  EXPECT_DOUBLE_EQ(seedClosedForm(ModelAlgo::kRing, 4000, 4, 1, kTerms), 15);
  // Butterfly, 8 ranks: 3 (1 + 4 + 4) = 27.
  EXPECT_DOUBLE_EQ(seedClosedForm(ModelAlgo::kButterfly, 4000, 8, 1, kTerms), 27);
  // Rabenseifner, 8 ranks: 6 + 2 x 7/8 x 4 + 7/8 x 4 = 16.5.
  EXPECT_DOUBLE_EQ(seedClosedForm(ModelAlgo::kHalvingDoubling, 4000, 8, 1, kTerms), 16.5);
  // Torus as the survey writes it, m = 2 groups of n = 2, S = 4000:
  // 2(1 + 2) + 2 + 2(1 + 2) + 2 = 16; with the column phase on S/n: 2(1 + 1) + 1 + 2(1 + 2) + 2 = 13.
  EXPECT_DOUBLE_EQ(seedClosedForm(ModelAlgo::kTorus2D, 4000, 4, 2, kTerms), 16);
  EXPECT_DOUBLE_EQ(torusClosedForm(4000, 2, 2, kTerms), 13);
  EXPECT_LT(seedClosedForm(ModelAlgo::kOneShot, 4000, 4, 1, kTerms), 0);
}

TEST(SeedClosedForm, TreeBoundIsLeastAtItsChunkCount) {
  const double s = 64e6;
  const double k = seedTreeChunks(s, 1024, kTerms);
  const double best = seedTreeBound(s, 1024, k, kTerms);
  EXPECT_DOUBLE_EQ(seedClosedForm(ModelAlgo::kTree, s, 1024, 1, kTerms), best);
  EXPECT_LT(best, seedTreeBound(s, 1024, k / 2, kTerms));
  EXPECT_LT(best, seedTreeBound(s, 1024, k * 2, kTerms));
}

LinkFigures uniformLinks() {
  LinkFigures l;
  l.intraLatUs = l.interLatUs = 1.0;
  l.intraGBs = l.interGBs = 1.0;
  l.reduceGBs = 1.0;
  return l;
}

TEST(Estimate, OneLinkTypeGivesTheClosedForms) {
  // One rank per node and one link type: the model is the textbook formula.
  const CommShape shape{16, 16, 1, 0, 0};
  for (double s : {8.0, 65536.0, 16e6}) {
    for (ModelAlgo a : {ModelAlgo::kRing, ModelAlgo::kButterfly, ModelAlgo::kHalvingDoubling}) {
      const AlgoEstimate e = estimateAllReduce(a, static_cast<int64_t>(s), shape, uniformLinks());
      ASSERT_TRUE(e.applies) << modelAlgoName(a);
      EXPECT_NEAR(e.us, seedClosedForm(a, s, 16, 1, kTerms), 1e-9 * e.us) << modelAlgoName(a) << " " << s;
      EXPECT_DOUBLE_EQ(e.us, e.latencyUs + e.wireUs + e.reduceUs);
    }
  }
}

TEST(Estimate, SaysWhatCannotRun) {
  const LinkFigures l;
  const EveryEstimate twoNodes = estimateEveryAlgorithm(1024, CommShape{8, 2, 4, 0, 0}, l);
  EXPECT_FALSE(twoNodes[static_cast<size_t>(ModelAlgo::kOneShot)].applies);
  EXPECT_TRUE(twoNodes[static_cast<size_t>(ModelAlgo::kHierarchicalRing)].applies);
  const EveryEstimate oneNode = estimateEveryAlgorithm(1024, CommShape{4, 1, 4, 0, 0}, l);
  EXPECT_TRUE(oneNode[static_cast<size_t>(ModelAlgo::kOneShot)].applies);
  EXPECT_FALSE(oneNode[static_cast<size_t>(ModelAlgo::kHierarchicalRing)].applies);
  const AlgoEstimate badTorus = estimateAllReduce(ModelAlgo::kTorus2D, 1024, CommShape{8, 2, 4, 3, 3}, l);
  EXPECT_FALSE(badTorus.applies);
  EXPECT_STRNE(badTorus.reason, "");
  EXPECT_FALSE(estimateAllReduce(ModelAlgo::kRing, 1024, CommShape{1, 1, 1, 0, 0}, l).applies);
}

TEST(Estimate, CheapestFollowsSizeAndMask) {
  const LinkFigures l;
  const CommShape big{512, 64, 8, 0, 0};
  const EveryEstimate small = estimateEveryAlgorithm(8, big, l);
  const ModelAlgo smallBest = cheapestAlgorithm(small);
  EXPECT_NE(smallBest, ModelAlgo::kRing);  // 1022 hops against log2 steps
  EXPECT_LT(small[static_cast<size_t>(ModelAlgo::kTree)].us, small[static_cast<size_t>(ModelAlgo::kRing)].us / 10);
  EXPECT_EQ(cheapestAlgorithm(small, 1u << static_cast<int>(ModelAlgo::kRing)), ModelAlgo::kRing);
  EXPECT_EQ(cheapestAlgorithm(small, 0), ModelAlgo::kCount);
  const EveryEstimate large = estimateEveryAlgorithm(int64_t{1} << 30, big, l);
  EXPECT_LT(large[static_cast<size_t>(ModelAlgo::kRing)].us, large[static_cast<size_t>(ModelAlgo::kButterfly)].us);
  EXPECT_NE(cheapestAlgorithm(large), ModelAlgo::kButterfly);
}

// The other collectives, one node of 4 ranks, one link type (alpha 1 us,
// 1 byte per ns, gamma 1 ns per byte), S = 4000 bytes of all ranks.
TEST(Estimate, OtherCollectivesWorkedByHand) {
  const CommShape four{4, 1, 4, 0, 0};
  auto us = [&](CollKind coll, Algorithm algo) {
    const AlgoEstimate e = estimateCollective(coll, algo, 4000, four, uniformLinks());
    EXPECT_TRUE(e.applies) << collKindName(coll) << " " << algorithmName(algo) << ": " << e.reason;
    return e.us;
  };
  // Ring: 3 steps of S/4 (+ the combining of 3/4 S).
  EXPECT_DOUBLE_EQ(us(CollKind::kAllGather, Algorithm::kRing), 3 + 3);
  EXPECT_DOUBLE_EQ(us(CollKind::kReduceScatter, Algorithm::kRing), 3 + 3 + 3);
  // A pipelined chain of 3 hops carrying S once (Reduce combines S).
  EXPECT_DOUBLE_EQ(us(CollKind::kBroadcast, Algorithm::kRing), 3 + 4);
  EXPECT_DOUBLE_EQ(us(CollKind::kReduce, Algorithm::kRing), 3 + 4 + 4);
  // One-shot: one hand-off; the broadcast root writes 3 copies.
  EXPECT_DOUBLE_EQ(us(CollKind::kAllGather, Algorithm::kOneShot), 1 + 3);
  EXPECT_DOUBLE_EQ(us(CollKind::kBroadcast, Algorithm::kOneShot), 1 + 12);
  // Halving-doubling: 2 rounds of 1 and 2 pieces (3 hand-offs) moving 3/4 S in all.
  EXPECT_DOUBLE_EQ(us(CollKind::kAllGather, Algorithm::kHalvingDoubling), 3 + 3);
  EXPECT_DOUBLE_EQ(us(CollKind::kReduceScatter, Algorithm::kHalvingDoubling), 3 + 3 + 3);
  // AllReduce is estimateAllReduce; what a collective has no schedule for is refused.
  EXPECT_DOUBLE_EQ(estimateCollective(CollKind::kAllReduce, Algorithm::kRing, 4000, four, uniformLinks()).us,
                   estimateAllReduce(Algorithm::kRing, 4000, four, uniformLinks()).us);
  EXPECT_FALSE(estimateCollective(CollKind::kBroadcast, Algorithm::kTree, 4000, four, uniformLinks()).applies);
  EXPECT_FALSE(estimateCollective(CollKind::kReduce, Algorithm::kOneShot, 4000, four, uniformLinks()).applies);
  EXPECT_FALSE(
      estimateCollective(CollKind::kAllGather, Algorithm::kOneShot, 4000, CommShape{4, 2, 2, 0, 0}, uniformLinks())
          .applies);
}

}  // namespace
}  // namespace weft::tuning
