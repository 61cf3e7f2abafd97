// Trees over nodes and their ranks. Pure functions of counts and orders.
//
// Across nodes: a double binary tree (seed 000). Tree 0 is a binary tree
// over node indices rooted at node 0 (which has one child), every other
// interior node having two children. Odd indices are its leaves and even
// indices its interior nodes. Tree 1 is its mirror (i -> n-1-i) when the
// node count is even and its shift by one (i -> (i+1) mod n) when odd: both
// map odd indices to even ones and back, so a node interior in one tree is a
// leaf in the other (for an odd count the shift leaves node 0 interior in
// both).
//
// Within a node: a chain through its ranks, starting at the rank that talks
// to the network. A rank's tree neighbours are its chain neighbours, plus,
// for the chain head, the heads of its node's parent and children.
#pragma once

#include <vector>

namespace weft::graph {

// One binary tree over node indices 0..n-1.
struct NodeTree {
  std::vector<int> parent;                 // -1 at the root
  std::vector<std::vector<int>> children;  // at most 2 each
};

// The two trees of the double binary tree over n nodes.
void doubleBinaryTree(int nnodes, NodeTree* tree0, NodeTree* tree1);

// A tree over ranks: up (parent rank or -1) and down (child ranks, at most 3).
struct RankTree {
  std::vector<int> up;
  std::vector<std::vector<int>> down;
  int depth = 0;  // levels from the root to the deepest leaf, counting both ends
};

// Joins per-node chains (chains[node] lists the node's ranks, head first,
// the head being the rank that talks to other nodes) with a node tree.
RankTree rankTree(const NodeTree& nodes, const std::vector<std::vector<int>>& chains, int nranks);

}  // namespace weft::graph
