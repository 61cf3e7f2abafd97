#include "graph/trees.h"

#include <algorithm>
#include <functional>

namespace weft::graph {
namespace {

// In-order binary tree over 0..n-1: node i with lowest set bit b spans the
// indices (i - b, i + b); its children are i - b/2 and i + b/2, or, when
// i + b/2 is past the end, the largest i + b/2^k that exists. Node 0 is the
// root; its only child is the highest power of two below n.
int lowBit(int i) { return i & -i; }

NodeTree binaryTree(int n) {
  NodeTree t;
  t.parent.assign(static_cast<size_t>(n), -1);
  t.children.assign(static_cast<size_t>(n), {});
  if (n <= 1) return t;
  int top = 1;
  while (top * 2 < n) top *= 2;
  // Root 0 hangs the in-order tree of 1..n-1 whose root is `top`.
  auto link = [&](int child, int parent) {
    t.parent[static_cast<size_t>(child)] = parent;
    t.children[static_cast<size_t>(parent)].push_back(child);
  };
  link(top, 0);
  std::function<void(int)> grow = [&](int i) {
    const int b = lowBit(i);
    if (b == 1) return;
    const int left = i - b / 2;
    link(left, i);
    grow(left);
    // The right subtree may be cut by n: descend until a node exists.
    for (int step = b / 2; step >= 1; step /= 2) {
      const int right = i + step;
      if (right < n) {
        link(right, i);
        grow(right);
        break;
      }
    }
  };
  grow(top);
  return t;
}

NodeTree remap(const NodeTree& t, const std::function<int(int)>& f) {
  const size_t n = t.parent.size();
  NodeTree out;
  out.parent.assign(n, -1);
  out.children.assign(n, {});
  for (size_t i = 0; i < n; ++i) {
    const int p = t.parent[i];
    out.parent[static_cast<size_t>(f(static_cast<int>(i)))] = p < 0 ? -1 : f(p);
    for (int c : t.children[i]) out.children[static_cast<size_t>(f(static_cast<int>(i)))].push_back(f(c));
  }
  return out;
}

}  // namespace

void doubleBinaryTree(int nnodes, NodeTree* tree0, NodeTree* tree1) {
  *tree0 = binaryTree(nnodes);
  if (nnodes % 2 == 0)
    *tree1 = remap(*tree0, [nnodes](int i) { return nnodes - 1 - i; });
  else
    *tree1 = remap(*tree0, [nnodes](int i) { return (i + 1) % nnodes; });
}

RankTree rankTree(const NodeTree& nodes, const std::vector<std::vector<int>>& chains, int nranks) {
  RankTree t;
  t.up.assign(static_cast<size_t>(nranks), -1);
  t.down.assign(static_cast<size_t>(nranks), {});
  for (size_t node = 0; node < chains.size(); ++node) {
    const std::vector<int>& chain = chains[node];
    for (size_t i = 1; i < chain.size(); ++i) {
      t.up[static_cast<size_t>(chain[i])] = chain[i - 1];
      t.down[static_cast<size_t>(chain[i - 1])].push_back(chain[i]);
    }
    if (chain.empty()) continue;  // a node without ranks (no GPU) joins no tree
    const int head = chain[0];
    const int parentNode = nodes.parent[node];
    if (parentNode >= 0 && !chains[static_cast<size_t>(parentNode)].empty())
      t.up[static_cast<size_t>(head)] = chains[static_cast<size_t>(parentNode)][0];
    for (int childNode : nodes.children[node])
      if (!chains[static_cast<size_t>(childNode)].empty())
        t.down[static_cast<size_t>(head)].push_back(chains[static_cast<size_t>(childNode)][0]);
  }
  // Depth: walk up from every rank (the trees are small enough; O(n log n)).
  for (int r = 0; r < nranks; ++r) {
    int levels = 1;
    for (int x = r; t.up[static_cast<size_t>(x)] >= 0; x = t.up[static_cast<size_t>(x)]) ++levels;
    t.depth = std::max(t.depth, levels);
  }
  return t;
}

}  // namespace weft::graph
