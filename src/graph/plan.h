// Communicator-wide channels from per-host searches: per channel a ring
// over every rank (the hosts' ring segments in host order, each entering at
// its first rank and leaving from its last) and a tree (the double binary
// tree over hosts joined to each host's chain, see trees.h).
//
// Each host searches only itself; ranks exchange their host's part
// (HostChannels) and every rank joins the same parts into the same plan, so
// hosts need not be identical. buildChannelPlan is the identical-hosts case
// (weft-topo --nodes N).
#pragma once

#include <string>
#include <vector>

#include "graph/search.h"
#include "graph/trees.h"

namespace weft::graph {

// One host's part of every channel, in communicator ranks.
struct HostChannels {
  std::vector<std::vector<int>> rings;   // per channel: the host's ranks in ring order
  std::vector<std::vector<int>> chains;  // per channel: tree chain, head first
};

// Local GPU index -> the ranks that drive it (several ranks may share a
// GPU: they follow each other in the ring and the chain).
HostChannels hostChannels(const RingSearch& search, const std::vector<std::vector<int>>& ranksOfLocal);

struct ChannelPlan {
  int nranks = 0, nnodes = 0, ranksPerNode = 0;
  std::vector<std::vector<int>> rings;  // per channel: ranks in ring order
  std::vector<RankTree> trees;          // per channel: tree 0 on even channels, tree 1 on odd
  RingSearch intra;                     // buildChannelPlan: the host's search
};

// Joins hosts (in host order: tree 0 is rooted at hosts[0]). Every host must
// have the same channel count; rings may differ in length per host.
ChannelPlan joinHosts(const std::vector<HostChannels>& hosts, int nranks);

// N identical hosts: rank = host * GPUs-per-host + local GPU index.
ChannelPlan buildChannelPlan(const Topology& host, int nnodes, int channels);
ChannelPlan buildChannelPlan(const RingSearch& intra, int gpusPerHost, int nnodes);

// The rank of each local GPU of a host described by a file: the GPUs' rank
// attributes when they number the GPUs 0..n-1, else their dev attributes
// when those do, else the GPUs' order in the file. With `nnodes` identical
// hosts, host h's GPU i has rank h * n + localRanks[i].
std::vector<int> localRanks(const Topology& host);

// Identical hosts whose GPUs have the ranks `local` gives (localRanks).
ChannelPlan buildChannelPlan(const RingSearch& intra, const std::vector<int>& local, int nnodes);

// NCCL's log forms: "Channel 03/08 : 0 1 2 3" (a ring in ranks) and, for
// one rank, "Trees [0] 1/-1/-1->0->-1 [1] ..." (children/parent per channel).
std::string channelLine(size_t channel, size_t channels, const std::vector<int>& ring);
std::string treesLine(const ChannelPlan& plan, int rank);

}  // namespace weft::graph
