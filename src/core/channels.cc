#include "core/channels.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>

#include "common/hash.h"
#include "common/log.h"
#include "common/params.h"
#include "core/broken_links.h"
#include "core/comm.h"
#include "core/connect.h"
#include "core/missing_links.h"
#include "core/topology.h"
#include "core/torus_grid.h"
#include "core/tuning_figures.h"
#include "graph/channel_budget.h"
#include "graph/graph_file.h"
#include "graph/plan.h"
#include "graph/rails.h"
#include "graph/rings.h"

namespace weft::core {
namespace {

// Ranks grouped into nodes (hosts, or WEFT_RANKS_PER_NODE groups) in order
// of their lowest rank; ranks within a node in rank order.
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

// " 0 1 2 3", each rank right-aligned to the width of the largest (NCCL's ring lines).
std::string listOf(const std::vector<int>& v) {
  const int width = static_cast<int>(std::to_string(v.empty() ? 0 : v.size() - 1).size());
  std::string s;
  for (int x : v) s += strFormat(" %*d", width, x);
  return s;
}

void setRing(Comm* comm, Channel& channel, const std::vector<int>& order) {
  const int n = comm->nranks;
  channel.ringOrder.assign(order.begin(), order.end());
  const int index = static_cast<int>(std::find(order.begin(), order.end(), comm->rank) - order.begin());
  channel.ring = device::RingView{n, index, order[static_cast<size_t>((index + n - 1) % n)],
                                  order[static_cast<size_t>((index + 1) % n)], channel.ringOrder.data()};
}

void setTree(Comm* comm, Channel& channel, const graph::RankTree& t) {
  const size_t me = static_cast<size_t>(comm->rank);
  channel.tree = device::TreeView{t.up[me], {-1, -1, -1}, static_cast<int32_t>(t.down[me].size()), t.depth};
  for (size_t i = 0; i < t.down[me].size(); ++i) channel.tree.down[i] = t.down[me][i];
  comm->treeDepth = t.depth;
}

// Per local GPU of the node's model, the ranks that drive it (by device id).
std::vector<std::vector<int>> ranksOfLocal(const CommTopology& topo, const graph::Topology& model,
                                           const std::vector<int>& nodeRanks) {
  const std::vector<int> gpus = model.nodesOf(graph::NodeType::kGpu);
  std::vector<std::vector<int>> out(gpus.size());
  for (int r : nodeRanks) {
    const std::string& id = topo.model.node(topo.gpuOfRank[static_cast<size_t>(r)]).id;
    for (size_t i = 0; i < gpus.size(); ++i)
      if (model.node(gpus[i]).id == id) out[i].push_back(r);
  }
  return out;
}

Result<graph::SearchOptions> searchOptions() {
  const int64_t crossNic = param::crossNic();
  if (crossNic < 0 || crossNic > 2)
    return errorStatus(ncclInvalidArgument, "NCCL_CROSS_NIC=%lld is not valid: expected 0, 1 or 2",
                       static_cast<long long>(crossNic));
  graph::SearchOptions o;
  o.crossNic = static_cast<int>(crossNic);
  return o;
}

// ringSpeed: the speed the channel budget packed the rings at (0: none).
Result<graph::RingSearch> searchNode(const graph::Topology& model, int channels, double ringSpeed) {
  const std::string file = param::graphFile();
  WEFT_ASSIGN_OR_RETURN(graph::SearchOptions options, searchOptions());
  options.ringSpeed = ringSpeed;
  if (file.empty()) return graph::searchRings(model, channels, options);
  WEFT_ASSIGN_OR_RETURN(graph::ImposedGraphs imposed, graph::loadGraphFile(file, model));
  WEFT_INFO(log::kGraph, "NCCL_GRAPH_FILE %s: %zu ring and %zu tree channels", file.c_str(), imposed.rings.size(),
            imposed.trees.size());
  return graph::imposeRings(model, channels, imposed);
}

// Every rank contributes its node's part; the node's first rank speaks for it.
Result<std::vector<graph::HostChannels>> exchangeParts(Comm* comm, const std::vector<std::vector<int>>& nodes,
                                                       const graph::HostChannels& mine) {
  const size_t channels = mine.rings.size(), perNode = nodes[0].size();
  const size_t ints = channels * perNode * 2;
  std::vector<int32_t> all(ints * static_cast<size_t>(comm->nranks));
  int32_t* slot = all.data() + ints * static_cast<size_t>(comm->rank);
  for (size_t c = 0; c < channels; ++c) {
    std::copy(mine.rings[c].begin(), mine.rings[c].end(), slot + c * perNode * 2);
    std::copy(mine.chains[c].begin(), mine.chains[c].end(), slot + c * perNode * 2 + perNode);
  }
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(all.data(), ints * sizeof(int32_t)));
  std::vector<graph::HostChannels> parts(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    const int32_t* rec = all.data() + ints * static_cast<size_t>(nodes[n][0]);
    for (size_t c = 0; c < channels; ++c) {
      parts[n].rings.emplace_back(rec + c * perNode * 2, rec + c * perNode * 2 + perNode);
      parts[n].chains.emplace_back(rec + c * perNode * 2 + perNode, rec + (c + 1) * perNode * 2);
    }
  }
  return parts;
}

void logPlan(const Comm& comm, const graph::ChannelPlan& plan) {
  const size_t nch = plan.rings.size();
  if (comm.rank == 0)
    for (size_t c = 0; c < nch; ++c)
      WEFT_INFO(log::kInit, "Channel %02zu/%02zu :%s", c, nch, listOf(plan.rings[c]).c_str());
  std::string trees;
  for (size_t c = 0; c < nch; ++c) {
    const device::TreeView& t = comm.channels[c].tree;
    trees += strFormat(" [%zu] %d/%d/%d->%d->%d", c, t.down[0], t.down[1], t.down[2], comm.rank, t.up);
  }
  WEFT_INFO(log::kInit, "Trees%s", trees.c_str());
  for (size_t c = 0; c < nch; ++c)
    WEFT_INFO(log::kGraph, "Ring %02zu : %d -> %d -> %d", c, comm.channels[c].ring.prev, comm.rank,
              comm.channels[c].ring.next);
}

void dumpGraphs(const Comm& comm, const graph::Topology& model, const graph::RingSearch& search,
                const graph::ChannelBudget* budget) {
  const std::string path = param::graphDumpFile();
  if (path.empty() || comm.rank != 0) return;
  Status s = graph::writeXmlFile(*graph::graphsToXml(model, search, budget), path);
  if (!s.ok()) WEFT_WARN("NCCL_GRAPH_DUMP_FILE: %s", s.message().c_str());
}

// Each channel's NICs on this node, for the network links (connect.cc).
void setRails(Comm* comm, const graph::Topology& model, const graph::RingSearch& search) {
  for (size_t c = 0; c < comm->channels.size() && c < search.netIn.size(); ++c) {
    Channel& channel = comm->channels[c];
    channel.nicIn = graph::nicIdentity(model, search.netIn[c]);
    channel.nicOut = graph::nicIdentity(model, search.netOut[c]);
    WEFT_INFO(log::kGraph, "Channel %02zu : enters the node by NET %d (%s), leaves by NET %d (%s)", c,
              channel.nicIn.dev, graph::describeNic(channel.nicIn).c_str(), channel.nicOut.dev,
              graph::describeNic(channel.nicOut).c_str());
  }
}

// GPUs: as many channels as the node's links need (channel_budget.h), the
// fewest any node asks for, within NCCL_MIN/MAX_NCHANNELS (folded into
// minChannels and the channel count already). The host backend's channels
// are threads: their count follows the cores (init.cc), not the links.
Status sizeChannels(Comm* comm, const std::vector<std::vector<int>>& nodes, const graph::Topology& model,
                    std::optional<graph::ChannelBudget>* budget) {
  if (comm->backend != weftBackendCuda || !param::graphFile().empty()) return okStatus();
  WEFT_ASSIGN_OR_RETURN(graph::SearchOptions options, searchOptions());
  const graph::RingSearch probe = graph::searchRings(model, 1, options);
  const int maxChannels = static_cast<int>(comm->channels.size());
  const graph::ChannelBudget b =
      graph::channelBudget(model, probe, static_cast<int>(nodes.size()), comm->minChannels, maxChannels);
  std::vector<int32_t> wanted(static_cast<size_t>(comm->nranks));
  wanted[static_cast<size_t>(comm->rank)] = b.channels;
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(wanted.data(), sizeof(int32_t)));
  const int agreed = std::clamp(*std::min_element(wanted.begin(), wanted.end()), 1, maxChannels);
  graph::PathType interType = probe.worstType;
  if (nodes.size() > 1 && !probe.netIn.empty() && probe.netIn[0] >= 0 && !probe.rings[0].empty())
    interType = model.path(probe.netIn[0], model.nodesOf(graph::NodeType::kGpu)[probe.rings[0][0]]).type;
  WEFT_INFO(log::kGraph, "Pattern 4, crossNic %d, nChannels %d, bw %f/%f, type %s/%s, sameChannels 0", options.crossNic,
            b.searchChannels, b.bwIntra, b.bwInter, graph::pathTypeName(probe.worstType),
            graph::pathTypeName(interType));
  WEFT_INFO(log::kInit, "%d coll channels (this node's links: %d at %.1f GB/s of %.1f GB/s; min %d, max %d)", agreed,
            b.wanted, b.bwIntra, b.capacity, comm->minChannels, maxChannels);
  comm->channels.resize(static_cast<size_t>(agreed));
  comm->minChannels = std::min(comm->minChannels, agreed);
  *budget = b;
  return okStatus();
}

// LL128 needs links that keep a 128-byte store whole: the host's emulation
// needs nothing (ll128_line.h); on GPUs, ranks sharing one GPU or rings of
// NVLink only. Every rank of a node sees the same GPUs and search.
bool wholeLineLinks(const Comm& comm, const std::vector<int>& myNode, bool nvlinkOnly) {
  if (comm.backend == weftBackendHost || nvlinkOnly) return true;
  const std::string mine = comm.peers[static_cast<size_t>(comm.rank)].busId;
  return std::all_of(myNode.begin(), myNode.end(),
                     [&](int r) { return mine == comm.peers[static_cast<size_t>(r)].busId; });
}

Status planChannels(Comm* comm, const std::vector<std::vector<int>>& nodes, const std::vector<int>& myNode) {
  WEFT_ASSIGN_OR_RETURN(graph::Topology model, nodeModel(*comm->topology, myNode));
  std::optional<graph::ChannelBudget> budget;  // cuda: NCCL's ring-graph figures, for the graph dump
  WEFT_RETURN_IF_ERROR(sizeChannels(comm, nodes, model, &budget));
  const size_t nch = comm->channels.size();
  WEFT_ASSIGN_OR_RETURN(graph::RingSearch search,
                        searchNode(model, static_cast<int>(nch), budget ? budget->ringSpeed : 0));
  const graph::HostChannels mine = graph::hostChannels(search, ranksOfLocal(*comm->topology, model, myNode));
  for (const auto& ring : mine.rings)
    if (ring.size() != myNode.size())
      return errorStatus(ncclInternalError, "rank %d: the node's ring covers %zu of its %zu ranks", comm->rank,
                         ring.size(), myNode.size());
  WEFT_ASSIGN_OR_RETURN(std::vector<graph::HostChannels> parts, exchangeParts(comm, nodes, mine));
  const graph::ChannelPlan plan = graph::joinHosts(parts, comm->nranks);
  comm->nnodes = static_cast<int>(nodes.size());
  comm->ranksPerNode = static_cast<int>(myNode.size());
  comm->wholeLineLinks = wholeLineLinks(*comm, myNode, search.nvlinkOnly);
  for (size_t c = 0; c < nch; ++c) {
    setRing(comm, comm->channels[c], plan.rings[c]);
    setTree(comm, comm->channels[c], plan.trees[c]);
  }
  if (nodes.size() > 1) setRails(comm, model, search);
  logPlan(*comm, plan);
  WEFT_INFO(log::kInit, "%d nodes x %d ranks, %zu channels, topology %s, %s%s rings at %.1f GB/s (worst path %s)",
            comm->nnodes, comm->ranksPerNode, nch, comm->topology->source.c_str(), search.imposed ? "imposed " : "",
            search.nvlinkOnly ? "NVLink" : "PCI/shared-memory", search.bwPerChannel,
            graph::pathTypeName(search.worstType));
  dumpGraphs(*comm, model, search, budget ? &*budget : nullptr);
  return okStatus();
}

// NCCL_PROTO, parsed before the ranks talk again so that every rank fails
// on a bad value alike.
Status parseProtoFilter(Comm* comm) {
  auto filter = tuning::ProtoFilter::parse(param::proto());
  if (!filter.ok()) return filter.status();
  comm->protoFilter = filter.value();
  return okStatus();
}

// A collective left with LL128 alone where it cannot run (several nodes, or
// GPU links that may split a line) runs Simple: said once, at init.
void warnUnrunnableLL128(const Comm& comm) {
  const tuning::CollKind only = comm.protoFilter.onlyLL128();
  if (only == tuning::CollKind::kCount || comm.rank != 0) return;
  if (comm.nnodes == 1 && comm.wholeLineLinks) return;
  WEFT_WARN("NCCL_PROTO=\"%s\" leaves %s only LL128, which cannot run on this communicator (%s): using Simple",
            param::proto().c_str(), tuning::collKindName(only),
            comm.nnodes > 1 ? "its ranks span nodes; LL128 needs links within one"
                            : "its GPUs are linked by neither one GPU nor NVLink, which keep a 128-byte store whole");
}

// Every rank must avoid the same links: a rank that routed its ring
// differently would wait forever on a neighbour that does not send to it.
Status agreeOnBrokenLinks(Comm* comm, const std::string& text) {
  std::vector<uint64_t> hashes(static_cast<size_t>(comm->nranks));
  uint64_t mine = 0;
  for (const auto& [a, b] : comm->brokenLinks.pairs())
    mine = hashBytes(&a, sizeof a, hashBytes(&b, sizeof b, mine + 1));
  hashes[static_cast<size_t>(comm->rank)] = mine;
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(hashes.data(), sizeof(uint64_t)));
  for (int r = 0; r < comm->nranks; ++r)
    if (hashes[static_cast<size_t>(r)] != mine)
      return errorStatus(ncclInvalidUsage,
                         "rank %d: WEFT_BROKEN_LINKS=\"%s\" differs from rank %d's list; every rank must set the same",
                         comm->rank, text.c_str(), r);
  return okStatus();
}

// A tree edge on a broken link: trees are not re-routed, only dropped.
bool treeUsesBrokenLink(const Comm& comm) {
  for (const Channel& channel : comm.channels) {
    const device::TreeView& t = channel.tree;
    if (t.depth == 0) continue;
    if (t.up >= 0 && comm.brokenLinks.has(comm.rank, t.up)) return true;
    for (int i = 0; i < t.nDown; ++i)
      if (comm.brokenLinks.has(comm.rank, t.down[i])) return true;
  }
  return false;
}

// WEFT_BROKEN_LINKS and the links the topology lacks: rings routed around
// the links, trees dropped where one uses them (on any rank), and the
// exchange plan (logical order, relays).
Status applyBrokenLinks(Comm* comm, const std::vector<int>& myNode) {
  const std::string text = param::brokenLinks();
  WEFT_ASSIGN_OR_RETURN(comm->brokenLinks, parseBrokenLinks(text, comm->nranks));
  WEFT_RETURN_IF_ERROR(agreeOnBrokenLinks(comm, text));
  WEFT_ASSIGN_OR_RETURN(LinkSet missing, gatherMissingLinks(comm, myNode));
  for (const auto& [a, b] : missing.pairs()) comm->brokenLinks.add(a, b);
  if (!comm->brokenLinks.empty()) {
    for (Channel& channel : comm->channels) {
      WEFT_ASSIGN_OR_RETURN(std::vector<int> ring, routeRing(channel.ringOrder, comm->brokenLinks));
      setRing(comm, channel, ring);
      WEFT_INFO(log::kGraph, "Channel %02d ring around broken links:%s", channel.id, listOf(ring).c_str());
    }
    std::vector<int32_t> dropTrees(static_cast<size_t>(comm->nranks), 0);
    dropTrees[static_cast<size_t>(comm->rank)] = treeUsesBrokenLink(*comm) ? 1 : 0;
    WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(dropTrees.data(), sizeof(int32_t)));
    if (std::find(dropTrees.begin(), dropTrees.end(), 1) != dropTrees.end()) {
      for (Channel& channel : comm->channels) channel.tree = device::TreeView{-1, {-1, -1, -1}, 0, 0};
      comm->treeDepth = 0;
      WEFT_INFO(log::kGraph, "trees dropped: they use a broken link");
    }
  }
  auto plan = planExchange(comm->nranks, comm->brokenLinks, device::kMaxRelayDuties);
  if (!plan.ok()) {
    WEFT_INFO(log::kGraph, "no Butterfly or HalvingDoubling: %s", plan.status().message().c_str());
    return okStatus();
  }
  comm->exchangePlan = std::make_shared<const ExchangePlan>(std::move(plan.value()));
  if (!comm->brokenLinks.empty())
    WEFT_INFO(log::kGraph, "exchange order (logical -> rank):%s, %zu relayed directions",
              listOf(comm->exchangePlan->physical).c_str(), comm->exchangePlan->relays.size());
  return okStatus();
}

// The 2D torus's grid (WEFT_TORUS, else derived); a WEFT_TORUS that does
// not tile the ranks fails init.
Status planTorusGrid(Comm* comm, const std::vector<std::vector<int>>& nodes) {
  WEFT_ASSIGN_OR_RETURN(TorusGrid grid, torusGrid(param::torus(), comm->nranks, nodes));
  std::string why;
  comm->torusPlan = planTorus(grid, comm->brokenLinks, &why);
  if (comm->torusPlan == nullptr) {
    WEFT_INFO(log::kGraph, "no Torus2D: %s", why.c_str());
    return okStatus();
  }
  if (comm->rank == 0)
    WEFT_INFO(log::kGraph, "Torus2D grid %zu x %zu (%s)", grid.rows.size(), grid.rows[0].size(), grid.source.c_str());
  return okStatus();
}

}  // namespace

bool directAllowedFor(int64_t setting, weftBackend_t backend) {
  return setting > 0 || (setting < 0 && backend == weftBackendHost);
}

Status buildChannels(Comm* comm) {
  const PhaseTimer timer(&comm->initTimes.graphs);
  auto filter = tuning::AlgoFilter::parse(param::algo());
  if (!filter.ok()) return filter.status();
  comm->algoFilter = filter.value();
  WEFT_RETURN_IF_ERROR(parseProtoFilter(comm));
  WEFT_RETURN_IF_ERROR(loadTuningFigures(comm));
  comm->directAllowed = directAllowedFor(param::direct(), comm->backend);
  comm->directRead = param::directRead() != 0;
  // Checked before the ranks talk again, so that every rank fails here.
  if (!param::torus().empty()) WEFT_RETURN_IF_ERROR(parseTorusShape(param::torus(), comm->nranks).status());
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
  const auto mine = std::find_if(nodes.begin(), nodes.end(), [&](const std::vector<int>& n) {
    return std::find(n.begin(), n.end(), comm->rank) != n.end();
  });
  WEFT_ASSIGN_OR_RETURN(comm->topology, buildCommTopology(comm, *mine));
  const bool equal =
      std::all_of(nodes.begin(), nodes.end(), [&](const auto& n) { return n.size() == nodes[0].size(); });
  if (equal) {
    WEFT_RETURN_IF_ERROR(planChannels(comm, nodes, *mine));
  } else {
    // Trees and per-host segments need hosts of one size.
    comm->nnodes = static_cast<int>(nodes.size());
    for (const auto& n : nodes) comm->ranksPerNode = std::max(comm->ranksPerNode, static_cast<int>(n.size()));
    comm->wholeLineLinks = wholeLineLinks(*comm, *mine, false);
    const auto rings = graph::flatRings(comm->nranks, static_cast<int>(nch));
    for (size_t c = 0; c < nch; ++c) setRing(comm, comm->channels[c], rings[c]);
    WEFT_INFO(log::kGraph, "flat rings: nodes of unequal size");
  }
  WEFT_RETURN_IF_ERROR(applyBrokenLinks(comm, *mine));
  comm->hierPlan = planHierarchy(nodes, comm->brokenLinks);
  comm->tuner = tuning::TunerSession::open(static_cast<size_t>(comm->nranks), nodes.size());
  WEFT_RETURN_IF_ERROR(planTorusGrid(comm, nodes));
  warnUnrunnableLL128(*comm);
  return okStatus();
}

Status connectChannels(Comm* comm) {
  const PhaseTimer timer(&comm->initTimes.connections);
  if (comm->nranks == 1) return okStatus();
  std::vector<ConnectNeed> needs;
  auto both = [&](int channel, int peer) {
    needs.push_back({comm, channel, peer, false});
    needs.push_back({comm, channel, peer, true});
  };
  for (Channel& channel : comm->channels) {
    needs.push_back({comm, channel.id, channel.ring.prev, false});
    needs.push_back({comm, channel.id, channel.ring.next, true});
    if (channel.tree.depth == 0) continue;
    if (channel.tree.up >= 0) both(channel.id, channel.tree.up);
    for (int i = 0; i < channel.tree.nDown; ++i) both(channel.id, channel.tree.down[i]);
  }
  return connectPeers(needs);
}

}  // namespace weft::core
