// Double binary trees over 1..64 nodes and their joining to intra-node
// chains: properties, not snapshots.
#include <gtest/gtest.h>

#include <set>

#include "graph/trees.h"

namespace weft::graph {
namespace {

// Spans all nodes from the root, parent/child links agree, no cycle.
void expectSpanningTree(const NodeTree& t, int n, int maxChildren) {
  int roots = 0;
  for (int i = 0; i < n; ++i) {
    if (t.parent[static_cast<size_t>(i)] < 0) ++roots;
    EXPECT_LE(static_cast<int>(t.children[static_cast<size_t>(i)].size()), maxChildren) << "node " << i;
    for (int c : t.children[static_cast<size_t>(i)]) EXPECT_EQ(t.parent[static_cast<size_t>(c)], i);
    int steps = 0;
    for (int x = i; t.parent[static_cast<size_t>(x)] >= 0 && steps <= n; x = t.parent[static_cast<size_t>(x)]) ++steps;
    EXPECT_LE(steps, n) << "cycle above node " << i;
  }
  EXPECT_EQ(roots, 1);
}

class DoubleBinaryTree : public ::testing::TestWithParam<int> {};

TEST_P(DoubleBinaryTree, BothTreesSpanAndInteriorsAreDisjoint) {
  const int n = GetParam();
  NodeTree t0, t1;
  doubleBinaryTree(n, &t0, &t1);
  expectSpanningTree(t0, n, 2);
  expectSpanningTree(t1, n, 2);
  EXPECT_EQ(t0.parent[0], -1) << "tree 0 is rooted at node 0";
  int both = 0;
  for (int i = 0; i < n; ++i)
    if (!t0.children[static_cast<size_t>(i)].empty() && !t1.children[static_cast<size_t>(i)].empty()) ++both;
  EXPECT_LE(both, n % 2 == 1 && n > 1 ? 1 : 0) << n << " nodes";
  // Logarithmic depth.
  int depth = 0;
  for (int i = 0; i < n; ++i) {
    int d = 0;
    for (int x = i; t0.parent[static_cast<size_t>(x)] >= 0; x = t0.parent[static_cast<size_t>(x)]) ++d;
    depth = std::max(depth, d);
  }
  int log2n = 0;
  while ((1 << log2n) < n) ++log2n;
  EXPECT_LE(depth, log2n + 1);
}

INSTANTIATE_TEST_SUITE_P(Nodes, DoubleBinaryTree, ::testing::Range(1, 65));
INSTANTIATE_TEST_SUITE_P(ManyNodes, DoubleBinaryTree, ::testing::Values(127, 128, 1023, 1024, 1025));

TEST(RankTree, ChainsJoinedThroughHeadsWithAtMostThreeChildren) {
  for (int nnodes : {1, 2, 3, 5, 8, 17}) {
    for (int perNode : {1, 2, 4}) {
      const int n = nnodes * perNode;
      std::vector<std::vector<int>> chains(static_cast<size_t>(nnodes));
      for (int r = 0; r < n; ++r) chains[static_cast<size_t>(r / perNode)].push_back(r);
      NodeTree t0, t1;
      doubleBinaryTree(nnodes, &t0, &t1);
      for (const NodeTree* nt : {&t0, &t1}) {
        RankTree t = rankTree(*nt, chains, n);
        int roots = 0;
        std::set<int> reached;
        for (int r = 0; r < n; ++r) {
          if (t.up[static_cast<size_t>(r)] < 0) ++roots;
          EXPECT_LE(t.down[static_cast<size_t>(r)].size(), 3u);
          for (int c : t.down[static_cast<size_t>(r)]) EXPECT_EQ(t.up[static_cast<size_t>(c)], r);
          int x = r;
          for (int steps = 0; t.up[static_cast<size_t>(x)] >= 0 && steps <= n; ++steps)
            x = t.up[static_cast<size_t>(x)];
          reached.insert(x);
        }
        EXPECT_EQ(roots, 1) << nnodes << "x" << perNode;
        EXPECT_EQ(reached.size(), 1u) << "every rank reaches the one root";
        EXPECT_GE(t.depth, perNode);
        EXPECT_LE(t.depth, perNode + 7);
      }
    }
  }
}

}  // namespace
}  // namespace weft::graph
