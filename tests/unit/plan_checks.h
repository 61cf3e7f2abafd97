// Checks of a channel plan shared by the topology tests: every ring visits
// every rank once, every tree is a proper tree of at most three children.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "graph/plan.h"
#include "graph/trees.h"

namespace weft::graph {

// One root, at most three children per rank, children pointing back to
// their parent, and every rank reaching the root.
inline bool validTree(const RankTree& t, int nranks) {
  if (static_cast<int>(t.up.size()) != nranks || std::count(t.up.begin(), t.up.end(), -1) != 1) return false;
  for (int r = 0; r < nranks; ++r) {
    const auto& down = t.down[static_cast<size_t>(r)];
    if (down.size() > 3) return false;
    for (int c : down)
      if (t.up[static_cast<size_t>(c)] != r) return false;
    int steps = 0;
    for (int x = r; t.up[static_cast<size_t>(x)] >= 0; x = t.up[static_cast<size_t>(x)])
      if (++steps > nranks) return false;
  }
  return true;
}

// Every ring a permutation of the plan's ranks, every tree valid.
inline void expectRingsAndTreesSpanRanks(const ChannelPlan& p) {
  std::vector<int> all(static_cast<size_t>(p.nranks));
  std::iota(all.begin(), all.end(), 0);
  for (const auto& ring : p.rings) {
    std::vector<int> sorted = ring;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, all);
  }
  for (const RankTree& tree : p.trees) EXPECT_TRUE(validTree(tree, p.nranks));
}

}  // namespace weft::graph
