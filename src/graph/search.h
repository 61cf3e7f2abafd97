// Graph search on one host's topology: per channel a ring through every GPU
// of the host and a tree chain, and the NICs the channel enters and leaves
// the host through. plan.h joins hosts into communicator-wide channels.
//
// Rings, high speeds first: Hamiltonian cycles that use only NVLink (direct
// or through NVSwitches), best bottleneck bandwidth first; else a PCIe ring
// that keeps the GPUs of one CPU socket contiguous (the fewest socket
// crossings), in bus order, and its reverse. A cycle becomes a channel's
// ring by opening it at one edge: the ring's first GPU receives from the
// previous host and its last GPU sends to the next.
//
// NIC rails: a channel enters and leaves a host by one NIC, the one nearest
// its first GPU (on a rail-optimised cluster, NIC i of every host is on
// switch i, so a channel that stays on one NIC stays on one rail). Its last
// GPU reaches that NIC directly when it is as near as the host allows, or
// through an NVLink peer next to the NIC (NCCL's PXN). NCCL_CROSS_NIC=1
// lets a channel leave by the NIC nearest its last GPU instead; 2 (the
// default, as in NCCL) does so only when staying on the rail would put a
// ring end farther from every NIC. Channels spread over the NICs that are
// equally near, so on an 8-NIC host eight channels use eight rails.
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
  std::vector<std::vector<int>> cycles;  // the distinct cycles the rings are opened from
  // NVLink cycles with a lower bottleneck than `cycles`, fastest first:
  // rings a lower speed may add (a DGX-1's single-link cycles, next to its
  // double-link one). Rings use them only at a SearchOptions::ringSpeed
  // the fastest cycles alone cannot fill.
  std::vector<std::vector<int>> slowerCycles;
  double bwPerChannel = 0;              // bottleneck of the rings, GB/s
  PathType worstType = PathType::kLoc;  // worst path between ring neighbours
  bool nvlinkOnly = false;
  bool imposed = false;     // taken from a graph file
  int socketCrossings = 0;  // per ring (closed cycle)
  long searchSteps = 0;     // DFS steps spent (complexity figure)
};

// NCCL_CROSS_NIC: 0 never, 1 always allowed, 2 only when it brings a ring
// end nearer a NIC.
// ringSpeed: the speed per ring the channel budget packed the rings at
// (ChannelBudget::ringSpeed). When slower NVLink cycles add rings at that
// speed, channel c takes the c-th packed ring (packRings, in turn), so
// every link carries the rings it has room for; 0, or when the fastest
// cycles alone are as good: channels spread over the fastest cycles.
struct SearchOptions {
  int crossNic = 2;
  double ringSpeed = 0;
};

// NCCL's most ring-graph channels (MAXCHANNELS / 2).
constexpr int kMaxSearchChannels = 16;

RingSearch searchRings(const Topology& host, int channels, const SearchOptions& options = {});
// Channels from a graph file (channel c takes the file's channel c mod n).
RingSearch imposeRings(const Topology& host, int channels, const ImposedGraphs& graphs);

// The closed rings at `speed` GB/s the host's links carry, as indices into
// `fastest` followed by `slower` (cycles of local GPU indices): rings are
// laid on the fastest cycles in turn while the next one fits, then on the
// first slower cycle that still fits, each ring hop taking `speed` from
// every directed link of its path; at most `cap`.
std::vector<int> packRings(const Topology& host, const std::vector<std::vector<int>>& fastest,
                           const std::vector<std::vector<int>>& slower, double speed, int cap);

// The best class of path from any NET to the local GPU (kDis without NETs).
PathType netClass(const Topology& host, int localGpu);

// Whether the channel's last GPU reaches `net` as well as the host allows:
// directly at the host's best class, or through an NVLink peer that does.
bool leavesByRail(const Topology& host, int localGpu, int net);

}  // namespace weft::graph
