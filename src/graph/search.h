// Graph search on one host's topology, and the channel plan for N identical
// hosts: per channel a ring over every rank and a tree (the double binary
// tree over hosts joined to intra-host chains).
//
// Rings, high speeds first: Hamiltonian cycles that use only NVLink (direct
// or through NVSwitches), best bottleneck bandwidth first; else a PCIe ring
// that keeps the GPUs of one CPU socket contiguous (the fewest socket
// crossings), in bus order. Each channel's ring starts at a GPU close to a
// NIC (channels spread over the NICs that are closest), so that across hosts
// the ring enters and leaves each host through that NIC.
#pragma once

#include <vector>

#include "graph/topo.h"
#include "graph/trees.h"

namespace weft::graph {

struct RingSearch {
  std::vector<std::vector<int>> rings;  // per channel: local GPU indices (order of nodesOf(kGpu))
  std::vector<int> nets;                // per channel: NET node entered/left through (-1: none)
  double bwPerChannel = 0;              // bottleneck of a ring, GB/s
  PathType worstType = PathType::kLoc;  // worst path between ring neighbours
  bool nvlinkOnly = false;
  int socketCrossings = 0;  // per ring
  long searchSteps = 0;     // DFS steps spent (complexity figure)
};

RingSearch searchRings(const Topology& host, int channels);

struct ChannelPlan {
  int nranks = 0, nnodes = 0, ranksPerNode = 0;
  std::vector<std::vector<int>> rings;  // per channel: ranks in ring order
  std::vector<RankTree> trees;          // per channel: tree 0 on even channels, tree 1 on odd
  RingSearch intra;
};

// rank = node * GPUs-per-host + local GPU index.
ChannelPlan buildChannelPlan(const Topology& host, int nnodes, int channels);

}  // namespace weft::graph
