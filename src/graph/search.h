// Graph search on one host's topology: per channel a ring through every GPU
// of the host and a tree chain, and the NICs the channel enters and leaves
// the host through. plan.h joins hosts into communicator-wide channels.
//
// Rings, high speeds first: Hamiltonian cycles that use only NVLink (direct
// or through NVSwitches), best bottleneck bandwidth first; else a PCIe ring
// that keeps the GPUs of one CPU socket contiguous (the fewest socket
// crossings), in bus order, and its reverse. A cycle becomes a channel's
// ring by opening it at one edge: the ring's first GPU receives from the
// previous host and its last GPU sends to the next, so the edge is chosen
// with both ends as close to a NIC as the host allows, and channels spread
// over the NICs that are equally close.
#pragma once

#include <vector>

#include "graph/topo.h"

namespace weft::graph {

// Rings and trees imposed by NCCL_GRAPH_FILE, in local GPU indices.
struct GraphChannel {
  std::vector<int> gpus;        // order of nodesOf(kGpu) indices
  int netIn = -1, netOut = -1;  // NET dev ids from the file (-1: none given)
};
struct ImposedGraphs {
  std::vector<GraphChannel> rings;  // graph id 0
  std::vector<GraphChannel> trees;  // graph id 1: chains, head first
};

struct RingSearch {
  std::vector<std::vector<int>> rings;   // per channel: local GPU indices (order of nodesOf(kGpu))
  std::vector<std::vector<int>> chains;  // per channel: tree chain, head first (the ring order unless imposed)
  std::vector<int> netIn, netOut;        // per channel: NET nodes entered/left through (-1: none)
  double bwPerChannel = 0;               // bottleneck of the rings, GB/s
  PathType worstType = PathType::kLoc;   // worst path between ring neighbours
  bool nvlinkOnly = false;
  bool imposed = false;     // taken from a graph file
  int socketCrossings = 0;  // per ring (closed cycle)
  long searchSteps = 0;     // DFS steps spent (complexity figure)
};

RingSearch searchRings(const Topology& host, int channels);
// Channels from a graph file (channel c takes the file's channel c mod n).
RingSearch imposeRings(const Topology& host, int channels, const ImposedGraphs& graphs);

// The best class of path from any NET to the local GPU (kDis without NETs).
PathType netClass(const Topology& host, int localGpu);

}  // namespace weft::graph
