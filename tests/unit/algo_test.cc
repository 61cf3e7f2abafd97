// NCCL_ALGO parsing and the first cost model's choices.
#include <gtest/gtest.h>

#include "tuning/algo.h"

namespace weft::tuning {
namespace {

AlgoFilter parseOk(const std::string& text) {
  auto f = AlgoFilter::parse(text);
  EXPECT_TRUE(f.ok()) << f.status().message();
  return f.ok() ? f.value() : AlgoFilter();
}

TEST(AlgoFilter, EmptyAllowsEverything) {
  AlgoFilter f = parseOk("");
  EXPECT_TRUE(f.allows(CollKind::kAllReduce, Algorithm::kRing));
  EXPECT_TRUE(f.allows(CollKind::kAllReduce, Algorithm::kTree));
}

TEST(AlgoFilter, ListExclusionAndPerCollective) {
  AlgoFilter ring = parseOk("Ring");
  EXPECT_TRUE(ring.allows(CollKind::kAllReduce, Algorithm::kRing));
  EXPECT_FALSE(ring.allows(CollKind::kAllReduce, Algorithm::kTree));
  AlgoFilter noTree = parseOk("^TREE");
  EXPECT_TRUE(noTree.allows(CollKind::kBroadcast, Algorithm::kRing));
  EXPECT_FALSE(noTree.allows(CollKind::kAllReduce, Algorithm::kTree));
  AlgoFilter per = parseOk("allreduce:tree;broadcast:ring");
  EXPECT_FALSE(per.allows(CollKind::kAllReduce, Algorithm::kRing));
  EXPECT_TRUE(per.allows(CollKind::kAllReduce, Algorithm::kTree));
  EXPECT_TRUE(per.allows(CollKind::kBroadcast, Algorithm::kRing));
  EXPECT_TRUE(per.allows(CollKind::kAllGather, Algorithm::kTree));  // untouched collectives keep everything
}

TEST(AlgoFilter, UnknownNamesAreErrorsNamingThem) {
  auto bad = AlgoFilter::parse("Ring,Butterfly");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find("Butterfly"), std::string::npos);
  auto badColl = AlgoFilter::parse("alltoall:ring");
  ASSERT_FALSE(badColl.ok());
  EXPECT_NE(std::string(badColl.status().message()).find("alltoall"), std::string::npos);
}

TEST(ChooseAlgorithm, TreeWinsSmallMessagesAcrossManyNodesRingWinsLarge) {
  const Shape shape{16, 16, 1, 5};
  const LinkCosts costs;
  const AlgoFilter all;
  Choice small = chooseAlgorithm(CollKind::kAllReduce, 1024, shape, costs, all, true);
  EXPECT_EQ(small.algo, Algorithm::kTree) << small.estimateUs[0] << " vs " << small.estimateUs[1];
  Choice large = chooseAlgorithm(CollKind::kAllReduce, int64_t{1} << 30, shape, costs, all, true);
  EXPECT_EQ(large.algo, Algorithm::kRing) << large.estimateUs[0] << " vs " << large.estimateUs[1];
}

TEST(ChooseAlgorithm, TreeOnlyWhereItExistsAndIsAllowed) {
  const Shape shape{16, 16, 1, 5};
  const LinkCosts costs;
  EXPECT_EQ(chooseAlgorithm(CollKind::kAllReduce, 8, shape, costs, AlgoFilter(), false).algo, Algorithm::kRing);
  EXPECT_EQ(chooseAlgorithm(CollKind::kBroadcast, 8, shape, costs, AlgoFilter(), true).algo, Algorithm::kRing);
  EXPECT_EQ(chooseAlgorithm(CollKind::kAllReduce, 8, shape, costs, parseOk("^tree"), true).algo, Algorithm::kRing);
  const Choice forced = chooseAlgorithm(CollKind::kAllReduce, int64_t{1} << 30, shape, costs, parseOk("tree"), true);
  EXPECT_EQ(forced.algo, Algorithm::kTree);
  const Choice none = chooseAlgorithm(CollKind::kBroadcast, 8, shape, costs, parseOk("tree"), true);
  EXPECT_EQ(none.algo, Algorithm::kRing);
  EXPECT_NE(std::string(none.reason).find("NCCL_ALGO"), std::string::npos);
}

}  // namespace
}  // namespace weft::tuning
