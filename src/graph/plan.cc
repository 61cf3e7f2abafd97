#include "graph/plan.h"

#include <algorithm>
#include <cstdio>

namespace weft::graph {

HostChannels hostChannels(const RingSearch& search, const std::vector<std::vector<int>>& ranksOfLocal) {
  auto map = [&](const std::vector<int>& local) {
    std::vector<int> ranks;
    ranks.reserve(local.size());
    for (int l : local) {
      const std::vector<int>& mine = ranksOfLocal[static_cast<size_t>(l)];
      ranks.insert(ranks.end(), mine.begin(), mine.end());
    }
    return ranks;
  };
  HostChannels h;
  for (const auto& ring : search.rings) h.rings.push_back(map(ring));
  for (const auto& chain : search.chains) h.chains.push_back(map(chain));
  return h;
}

ChannelPlan joinHosts(const std::vector<HostChannels>& hosts, int nranks) {
  ChannelPlan plan;
  plan.nranks = nranks;
  plan.nnodes = static_cast<int>(hosts.size());
  plan.ranksPerNode = hosts.empty() || hosts[0].rings.empty() ? 0 : static_cast<int>(hosts[0].rings[0].size());
  if (hosts.empty()) return plan;
  NodeTree tree0, tree1;
  doubleBinaryTree(plan.nnodes, &tree0, &tree1);
  const size_t channels = hosts[0].rings.size();
  std::vector<std::vector<int>> chains(hosts.size());
  for (size_t c = 0; c < channels; ++c) {
    std::vector<int> ring;
    ring.reserve(static_cast<size_t>(nranks));
    for (size_t h = 0; h < hosts.size(); ++h) {
      ring.insert(ring.end(), hosts[h].rings[c].begin(), hosts[h].rings[c].end());
      chains[h] = hosts[h].chains[c];
    }
    plan.rings.push_back(std::move(ring));
    plan.trees.push_back(rankTree(c % 2 == 0 ? tree0 : tree1, chains, nranks));
  }
  return plan;
}

ChannelPlan buildChannelPlan(const RingSearch& intra, int gpusPerHost, int nnodes) {
  std::vector<HostChannels> hosts;
  hosts.reserve(static_cast<size_t>(nnodes));
  std::vector<std::vector<int>> ranksOfLocal(static_cast<size_t>(gpusPerHost), std::vector<int>(1));
  for (int node = 0; node < nnodes; ++node) {
    for (int l = 0; l < gpusPerHost; ++l) ranksOfLocal[static_cast<size_t>(l)][0] = node * gpusPerHost + l;
    hosts.push_back(hostChannels(intra, ranksOfLocal));
  }
  ChannelPlan plan = joinHosts(hosts, nnodes * gpusPerHost);
  plan.ranksPerNode = gpusPerHost;
  plan.intra = intra;
  return plan;
}

namespace {

bool numbersGpus(const std::vector<int>& v) {
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i)
    if (sorted[i] != static_cast<int>(i)) return false;
  return true;
}

}  // namespace

std::vector<int> localRanks(const Topology& host) {
  const std::vector<int> gpus = host.nodesOf(NodeType::kGpu);
  std::vector<int> ranks, devs, order;
  for (size_t i = 0; i < gpus.size(); ++i) {
    ranks.push_back(host.node(gpus[i]).rank);
    devs.push_back(host.node(gpus[i]).dev);
    order.push_back(static_cast<int>(i));
  }
  return numbersGpus(ranks) ? ranks : numbersGpus(devs) ? devs : order;
}

ChannelPlan buildChannelPlan(const RingSearch& intra, const std::vector<int>& local, int nnodes) {
  const int perHost = static_cast<int>(local.size());
  std::vector<HostChannels> hosts;
  std::vector<std::vector<int>> ranksOfLocal(local.size(), std::vector<int>(1));
  for (int node = 0; node < nnodes; ++node) {
    for (size_t l = 0; l < local.size(); ++l) ranksOfLocal[l][0] = node * perHost + local[l];
    hosts.push_back(hostChannels(intra, ranksOfLocal));
  }
  ChannelPlan plan = joinHosts(hosts, nnodes * perHost);
  plan.ranksPerNode = perHost;
  plan.intra = intra;
  return plan;
}

std::string channelLine(size_t channel, size_t channels, const std::vector<int>& ring) {
  char head[32];
  std::snprintf(head, sizeof(head), "Channel %02zu/%02zu :", channel, channels);
  std::string s = head;
  for (int r : ring) s += " " + std::to_string(r);
  return s;
}

std::string treesLine(const ChannelPlan& plan, int rank) {
  std::string s = "Trees";
  for (size_t c = 0; c < plan.trees.size(); ++c) {
    const RankTree& t = plan.trees[c];
    const std::vector<int>& down = t.down[static_cast<size_t>(rank)];
    auto child = [&](size_t i) { return i < down.size() ? down[i] : -1; };
    s += " [" + std::to_string(c) + "] " + std::to_string(child(0)) + "/" + std::to_string(child(1)) + "/" +
         std::to_string(child(2)) + "->" + std::to_string(rank) + "->" +
         std::to_string(t.up[static_cast<size_t>(rank)]);
  }
  return s;
}

ChannelPlan buildChannelPlan(const Topology& host, int nnodes, int channels) {
  const int gpus = static_cast<int>(host.nodesOf(NodeType::kGpu).size());
  return buildChannelPlan(searchRings(host, channels), gpus, nnodes);
}

}  // namespace weft::graph
