// WEFT_BROKEN_LINKS parsing, rings routed around broken links, and the
// exchange plan: the seed case (8-rank mesh, link 0-1 broken) renumbered
// with no relay, sets that no renumbering avoids relayed through a third
// rank, and random sets on meshes of 4 to 16 ranks where every hop of the
// plan is a working link.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "core/broken_links.h"
#include "device/exchange.h"

namespace weft::core {
namespace {

using device::ExchangeShape;
using device::kFoldSlot;

std::vector<int> slotsOf(int nranks) {
  const ExchangeShape shape(nranks);
  std::vector<int> slots;
  if (shape.rem > 0) slots.push_back(kFoldSlot);
  for (int i = 0; i < shape.rounds; ++i) slots.push_back(i);
  return slots;
}

// Every exchange of the plan goes over working links only: direct to the
// partner, or through a relay with working links to both ends; no directed
// connection is used twice in one slot; the order is a permutation.
void expectPlanAvoids(const ExchangePlan& plan, const LinkSet& broken) {
  const int n = static_cast<int>(plan.physical.size());
  std::vector<int> sorted = plan.physical;
  std::sort(sorted.begin(), sorted.end());
  for (int r = 0; r < n; ++r) ASSERT_EQ(sorted[static_cast<size_t>(r)], r);
  for (int slot : slotsOf(n)) {
    std::multiset<std::pair<int, int>> used;
    for (int L = 0; L < n; ++L) {
      const int partner = plan.partnerRank(L, slot);
      if (partner < 0) continue;
      const int me = plan.physical[static_cast<size_t>(L)];
      const int hop = plan.hopRank(L, slot);
      EXPECT_FALSE(broken.has(me, hop)) << "rank " << me << " sends to " << hop << " in slot " << slot;
      used.insert({me, hop});
      if (hop != partner) {
        EXPECT_FALSE(broken.has(hop, partner)) << "relay " << hop << " to " << partner;
        used.insert({hop, partner});
      }
    }
    for (const auto& link : used) EXPECT_EQ(used.count(link), 1u) << link.first << "->" << link.second;
  }
}

TEST(BrokenLinks, ParsesPairsAndNamesBadEntries) {
  auto links = parseBrokenLinks(" 0-1, 5-2 ,", 8);
  ASSERT_TRUE(links.ok()) << links.status().message();
  EXPECT_TRUE(links.value().has(1, 0));
  EXPECT_TRUE(links.value().has(2, 5));
  EXPECT_EQ(links.value().size(), 2u);
  auto outside = parseBrokenLinks("0-8", 8);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("link 0-8"), std::string::npos) << outside.status().message();
  EXPECT_FALSE(parseBrokenLinks("3-3", 8).ok());
  auto text = parseBrokenLinks("0-1,a-b", 8);
  ASSERT_FALSE(text.ok());
  EXPECT_NE(text.status().message().find("\"a-b\""), std::string::npos) << text.status().message();
}

TEST(BrokenLinks, RingRoutesAroundBrokenLinks) {
  std::vector<int> order{0, 1, 2, 3, 4, 5, 6, 7};
  LinkSet broken;
  EXPECT_EQ(routeRing(order, broken).value(), order);
  broken.add(0, 1);
  broken.add(4, 5);
  auto ring = routeRing(order, broken);
  ASSERT_TRUE(ring.ok());
  const auto& r = ring.value();
  ASSERT_EQ(r.size(), order.size());
  for (size_t i = 0; i < r.size(); ++i) EXPECT_FALSE(broken.has(r[i], r[(i + 1) % r.size()]));
  EXPECT_EQ(std::set<int>(r.begin(), r.end()).size(), r.size());
  // Rank 0 linked to one rank only: no cycle exists.
  LinkSet isolating;
  for (int p = 2; p < 8; ++p) isolating.add(0, p);
  EXPECT_FALSE(routeRing(order, isolating).ok());
}

TEST(BrokenLinks, SeedMeshWithLinkZeroOneBrokenIsRenumberedWithoutRelays) {
  LinkSet broken;
  broken.add(0, 1);
  auto plan = planExchange(8, broken, device::kMaxRelayDuties);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan.value().relays.empty());
  expectPlanAvoids(plan.value(), broken);
  // Nothing broken: the identity order.
  auto plain = planExchange(8, LinkSet{}, device::kMaxRelayDuties);
  for (int L = 0; L < 8; ++L) EXPECT_EQ(plain.value().physical[static_cast<size_t>(L)], L);
}

TEST(BrokenLinks, UnavoidableLinksAreRelayedThroughAThirdRank) {
  // 4 ranks exchange around a 4-cycle; rank 0 keeps one working link.
  LinkSet broken;
  broken.add(0, 1);
  broken.add(0, 2);
  auto plan = planExchange(4, broken, device::kMaxRelayDuties);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_FALSE(plan.value().relays.empty());
  expectPlanAvoids(plan.value(), broken);
  for (const RelayHop& hop : plan.value().relays) EXPECT_EQ(hop.via, 3);
  // Only the cycle 0-1-2-3-4 works: a ring, but no 4-cycle for the
  // participants; every broken pair is two hops apart and relayed.
  LinkSet chords;
  for (auto [a, b] : {std::make_pair(0, 2), {0, 3}, {1, 3}, {1, 4}, {2, 4}}) chords.add(a, b);
  auto five = planExchange(5, chords, device::kMaxRelayDuties);
  ASSERT_TRUE(five.ok()) << five.status().message();
  EXPECT_FALSE(five.value().relays.empty());
  expectPlanAvoids(five.value(), chords);
  // Rank 0 cut off from every rank: no relay reaches it.
  LinkSet isolated;
  for (int p = 1; p < 4; ++p) isolated.add(0, p);
  EXPECT_FALSE(planExchange(4, isolated, device::kMaxRelayDuties).ok());
}

TEST(BrokenLinks, RandomSetsOnMeshesOfFourToSixteenRanks) {
  std::mt19937 random(17);
  int relayed = 0, planned = 0;
  for (int n = 4; n <= 16; ++n)
    for (int trial = 0; trial < 20; ++trial) {
      LinkSet broken;
      const int count = 1 + static_cast<int>(random() % static_cast<unsigned>(n));
      for (int i = 0; i < count; ++i) {
        const int a = static_cast<int>(random() % static_cast<unsigned>(n));
        const int b = static_cast<int>(random() % static_cast<unsigned>(n));
        if (a != b) broken.add(a, b);
      }
      auto plan = planExchange(n, broken, device::kMaxRelayDuties);
      if (!plan.ok()) continue;
      planned += 1;
      relayed += plan.value().relays.empty() ? 0 : 1;
      expectPlanAvoids(plan.value(), broken);
    }
  EXPECT_GT(planned, 200);  // of 260: nearly every set has a plan
  RecordProperty("relayed", relayed);
}

TEST(HierarchyPlan, NeighboursInTheNodeAndAcrossAndWhenItApplies) {
  const std::vector<std::vector<int>> nodes{{0, 1, 2}, {3, 4, 5}};
  auto plan = planHierarchy(nodes, LinkSet{});
  ASSERT_NE(plan, nullptr);
  const HierPlan::Place p = plan->placeOf(4);
  EXPECT_EQ(p.node, 1);
  EXPECT_EQ(p.local, 1);
  EXPECT_EQ(p.intraPrev, 3);
  EXPECT_EQ(p.intraNext, 5);
  EXPECT_EQ(p.interPrev, 1);
  EXPECT_EQ(p.interNext, 1);
  LinkSet across;
  across.add(2, 5);  // local index 2 of node 0 and of node 1
  EXPECT_EQ(planHierarchy(nodes, across), nullptr);
  EXPECT_EQ(planHierarchy({{0, 1}, {2}}, LinkSet{}), nullptr);    // unequal nodes
  EXPECT_EQ(planHierarchy({{0}, {1}, {2}}, LinkSet{}), nullptr);  // nodes of one rank
  EXPECT_EQ(planHierarchy({{0, 1, 2, 3}}, LinkSet{}), nullptr);   // one node
}

}  // namespace
}  // namespace weft::core
