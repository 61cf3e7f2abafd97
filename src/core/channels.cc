#include "core/channels.h"

#include <algorithm>
#include <map>
#include <string>

#include "common/log.h"
#include "common/params.h"
#include "core/comm.h"
#include "core/connect.h"
#include "graph/rings.h"
#include "graph/search.h"

namespace weft::core {
namespace {

// Ranks grouped into nodes in order of their lowest rank (ranks within a
// node in rank order): consecutive groups of WEFT_RANKS_PER_NODE, else hosts.
std::vector<std::vector<int>> groupNodes(const Comm& comm) {
  const int64_t perNode = param::ranksPerNode();
  std::vector<std::vector<int>> nodes;
  if (perNode > 0) {
    for (int r = 0; r < comm.nranks; ++r) {
      if (r % perNode == 0) nodes.emplace_back();
      nodes.back().push_back(r);
    }
    return nodes;
  }
  std::map<uint64_t, size_t> index;
  for (const PeerInfo& p : comm.peers) {
    auto [it, added] = index.emplace(p.hostHash, nodes.size());
    if (added) nodes.emplace_back();
    nodes[it->second].push_back(p.rank);
  }
  return nodes;
}

bool equalSizes(const std::vector<std::vector<int>>& nodes) {
  for (const auto& n : nodes)
    if (n.size() != nodes[0].size()) return false;
  return true;
}

std::string listOf(const std::vector<int>& v) {
  std::string s;
  for (int x : v) s += " " + std::to_string(x);
  return s;
}

void setRing(Comm* comm, Channel& channel, const std::vector<int>& order) {
  const int n = comm->nranks;
  channel.ringOrder.assign(order.begin(), order.end());
  const int index = static_cast<int>(std::find(order.begin(), order.end(), comm->rank) - order.begin());
  channel.ring = device::RingView{n, index, order[static_cast<size_t>((index + n - 1) % n)],
                                  order[static_cast<size_t>((index + 1) % n)], channel.ringOrder.data()};
}

}  // namespace

Status buildChannels(Comm* comm) {
  auto filter = tuning::AlgoFilter::parse(param::algo());
  if (!filter.ok()) return filter.status();
  comm->algoFilter = filter.value();
  const size_t nch = comm->channels.size();
  for (size_t c = 0; c < nch; ++c) {
    Channel& channel = comm->channels[c];
    channel.id = static_cast<int>(c);
    channel.send.resize(static_cast<size_t>(comm->nranks));
    channel.recv.resize(static_cast<size_t>(comm->nranks));
  }
  const std::vector<std::vector<int>> nodes = groupNodes(*comm);
  comm->nodeOf.assign(static_cast<size_t>(comm->nranks), 0);
  for (size_t n = 0; n < nodes.size(); ++n)
    for (int r : nodes[n]) comm->nodeOf[static_cast<size_t>(r)] = static_cast<int>(n);
  // The cuda backend keeps flat rings until GPU topology detection exists.
  if (!equalSizes(nodes) || comm->backend == weftBackendCuda) {
    const auto rings = graph::flatRings(comm->nranks, static_cast<int>(nch));
    for (size_t c = 0; c < nch; ++c) setRing(comm, comm->channels[c], rings[c]);
    comm->nnodes = static_cast<int>(nodes.size());
    for (const auto& n : nodes) comm->ranksPerNode = std::max(comm->ranksPerNode, static_cast<int>(n.size()));
    WEFT_INFO(log::kGraph, "flat rings (%s)", comm->backend == weftBackendCuda ? "cuda backend" : "nodes of unequal size");
  } else {
    comm->nnodes = static_cast<int>(nodes.size());
    comm->ranksPerNode = static_cast<int>(nodes[0].size());
    const graph::ChannelPlan plan = graph::buildChannelPlan(graph::syntheticTopology(comm->ranksPerNode),
                                                            comm->nnodes, static_cast<int>(nch));
    // Plan ranks are node * ranksPerNode + local index: map them to ours.
    auto real = [&](int p) {
      return nodes[static_cast<size_t>(p / comm->ranksPerNode)][static_cast<size_t>(p % comm->ranksPerNode)];
    };
    for (size_t c = 0; c < nch; ++c) {
      std::vector<int> ring;
      for (int p : plan.rings[c]) ring.push_back(real(p));
      Channel& channel = comm->channels[c];
      setRing(comm, channel, ring);
      const graph::RankTree& t = plan.trees[c];
      int me = 0;
      for (int p = 0; p < comm->nranks; ++p)
        if (real(p) == comm->rank) me = p;
      channel.tree = device::TreeView{t.up[static_cast<size_t>(me)] < 0 ? -1 : real(t.up[static_cast<size_t>(me)]),
                                      {-1, -1, -1},
                                      static_cast<int32_t>(t.down[static_cast<size_t>(me)].size()),
                                      t.depth};
      for (size_t i = 0; i < t.down[static_cast<size_t>(me)].size(); ++i)
        channel.tree.down[i] = real(t.down[static_cast<size_t>(me)][i]);
      comm->treeDepth = t.depth;
      WEFT_INFO(log::kInit, "Channel %02zu/%02zu ring:%s", c, nch, listOf(ring).c_str());
      WEFT_INFO(log::kInit, "Channel %02zu tree %zu: %d -> %d ->%s (depth %d)", c, c % 2, channel.tree.up,
                comm->rank, listOf(std::vector<int>(channel.tree.down, channel.tree.down + channel.tree.nDown)).c_str(),
                t.depth);
    }
  }
  WEFT_INFO(log::kInit, "%d nodes x %d ranks, %zu channels, trees %s", comm->nnodes, comm->ranksPerNode, nch,
            comm->treeDepth > 0 ? "built" : "none");
  return okStatus();
}

Status connectChannels(Comm* comm) {
  if (comm->nranks == 1) return okStatus();
  std::vector<ConnectNeed> needs;
  auto both = [&](int channel, int peer) {
    needs.push_back({comm, channel, peer, false});
    needs.push_back({comm, channel, peer, true});
  };
  for (Channel& channel : comm->channels) {
    needs.push_back({comm, channel.id, channel.ring.prev, false});
    needs.push_back({comm, channel.id, channel.ring.next, true});
    if (channel.tree.depth == 0 || comm->backend == weftBackendCuda) continue;
    if (channel.tree.up >= 0) both(channel.id, channel.tree.up);
    for (int i = 0; i < channel.tree.nDown; ++i) both(channel.id, channel.tree.down[i]);
  }
  return connectPeers(needs);
}

}  // namespace weft::core
