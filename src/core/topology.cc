#include "core/topology.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "common/log.h"
#include "common/params.h"
#include "common/socket.h"
#include "core/comm.h"
#include "graph/detect.h"
#include "graph/p2p_level.h"
#include "graph/rails.h"
#include "graph/sysfs.h"
#include "graph/topo_fuse.h"
#include "graph/topo_xml.h"

namespace weft::core {
namespace {

// Bootstrap tags of the view exchange (connections use 1000 and up).
constexpr int kViewSizeTag = 900, kViewTag = 901, kFusedSizeTag = 902, kFusedTag = 903;

std::vector<int> ranksOnMyHost(const Comm& comm) {
  std::vector<int> out;
  const uint64_t host = comm.peers[static_cast<size_t>(comm.rank)].hostHash;
  for (const PeerInfo& p : comm.peers)
    if (p.hostHash == host) out.push_back(p.rank);
  return out;
}

// NCCL_TOPO_FILE, read and checked on its own, so that an error names the
// file's own lines (the model is built later from merged views).
Result<std::unique_ptr<graph::XmlNode>> readTopoFile(const std::string& file) {
  auto xml = graph::readXmlFile(file);
  if (!xml.ok()) return errorStatus(ncclInvalidArgument, "NCCL_TOPO_FILE: %s", xml.status().message().c_str());
  auto model = graph::topologyFromXml(*xml.value());
  if (!model.ok())
    return errorStatus(ncclInvalidArgument, "NCCL_TOPO_FILE=%s: %s", file.c_str(), model.status().message().c_str());
  return xml;
}

Result<graph::DetectResult> detectMine(const Comm& comm) {
  graph::DetectOptions options;
  options.cudaDevices = {comm.cudaDev};
  options.rank = comm.rank;
  for (const NetInterface& i : findInterfaces(param::socketIfname(), param::socketFamily()))
    options.netInterfaces.push_back(i.name);
  return graph::detectSystem(options);
}

// This rank's view of its host: detection of its GPU, merged into
// NCCL_TOPO_FILE when one is given (the file supplies the PCI tree and link
// speeds, detection the GPU and NICs the file does not describe, matched by
// bus id; see mergeTopologyFile).
Result<std::unique_ptr<graph::XmlNode>> localView(const Comm& comm, std::string* source) {
  const std::string file = param::topoFile();
  auto detected = detectMine(comm);
  if (detected.ok() && !detected.value().notes.empty())
    WEFT_INFO(log::kGraph, "topology detection: %s", detected.value().notes.c_str());
  if (file.empty()) {
    if (!detected.ok()) return detected.status();
    *source = "detected (" + detected.value().machineSource + ")";
    return std::move(detected.value().xml);
  }
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<graph::XmlNode> fromFile, readTopoFile(file));
  if (!detected.ok()) {
    WEFT_INFO(log::kGraph, "NCCL_TOPO_FILE=%s used alone: detection failed (%s)", file.c_str(),
              detected.status().message().c_str());
    *source = "NCCL_TOPO_FILE=" + file;
    return fromFile;
  }
  *source = "NCCL_TOPO_FILE=" + file + " merged with detection";
  return graph::mergeTopologyFile(*fromFile, detected.value().xml.get());
}

Status sendText(Comm* comm, int peer, int sizeTag, int tag, const std::string& text) {
  const uint64_t size = text.size();
  WEFT_RETURN_IF_ERROR(comm->bootstrap->send(peer, sizeTag, &size, sizeof(size)));
  return size ? comm->bootstrap->send(peer, tag, text.data(), text.size()) : okStatus();
}

Result<std::string> recvText(Comm* comm, int peer, int sizeTag, int tag) {
  uint64_t size = 0;
  WEFT_RETURN_IF_ERROR(comm->bootstrap->recv(peer, sizeTag, &size, sizeof(size)));
  std::string text(size, '\0');
  if (size) WEFT_RETURN_IF_ERROR(comm->bootstrap->recv(peer, tag, text.data(), size));
  return text;
}

// The host's first rank fuses the views in rank order and sends the result
// back. A rank whose view failed sends an empty one; the fused text is then
// empty and every rank of the host fails, instead of the others waiting.
Result<std::string> fuseOnHost(Comm* comm, const std::vector<int>& local, const std::string& mine) {
  const int leader = local.front();
  if (comm->rank != leader) {
    WEFT_RETURN_IF_ERROR(sendText(comm, leader, kViewSizeTag, kViewTag, mine));
    return recvText(comm, leader, kFusedSizeTag, kFusedTag);
  }
  std::vector<std::unique_ptr<graph::XmlNode>> views;
  bool complete = !mine.empty();
  for (int r : local) {
    WEFT_ASSIGN_OR_RETURN(std::string text,
                          r == leader ? Result<std::string>(mine) : recvText(comm, r, kViewSizeTag, kViewTag));
    auto parsed = text.empty() ? Result<std::unique_ptr<graph::XmlNode>>(errorStatus(ncclInternalError, "empty"))
                               : graph::parseXml(text);
    complete = complete && parsed.ok();
    if (parsed.ok()) views.push_back(std::move(parsed).value());
  }
  std::vector<const graph::XmlNode*> pointers;
  for (const auto& v : views) pointers.push_back(v.get());
  const std::string fused = complete ? graph::writeXml(*graph::fuseTopologyViews(pointers)) : std::string();
  for (int r : local)
    if (r != leader) WEFT_RETURN_IF_ERROR(sendText(comm, r, kFusedSizeTag, kFusedTag, fused));
  return fused;
}

// This rank's view fused with those of the other ranks of its host. Every
// rank takes part even when its own view failed, so none waits in vain.
Result<std::unique_ptr<graph::XmlNode>> fusedHostView(Comm* comm, Result<std::unique_ptr<graph::XmlNode>> view) {
  const std::string mine = view.ok() ? graph::writeXml(*view.value()) : std::string();
  WEFT_ASSIGN_OR_RETURN(std::string fused, fuseOnHost(comm, ranksOnMyHost(*comm), mine));
  if (!view.ok()) return view.status();
  if (fused.empty())
    return errorStatus(ncclSystemError,
                       "rank %d: another rank of host %s could not describe the machine (see its error)", comm->rank,
                       comm->peers[static_cast<size_t>(comm->rank)].hostname);
  return graph::parseXml(fused);
}

Result<std::shared_ptr<CommTopology>> cudaTopology(Comm* comm) {
  auto t = std::make_shared<CommTopology>();
  const std::vector<int> local = ranksOnMyHost(*comm);
  WEFT_ASSIGN_OR_RETURN(t->xml, fusedHostView(comm, localView(*comm, &t->source)));
  std::map<std::string, int> rankOfBusId;
  std::set<std::string> used;
  for (int r : local) {
    const std::string bus = graph::normalizeBusId(comm->peers[static_cast<size_t>(r)].busId);
    rankOfBusId.emplace(bus, r);  // a GPU shared by several ranks is named after the first
    used.insert(bus);
  }
  const std::vector<std::string> known = graph::gpuBusIds(*t->xml);
  for (const std::string& bus : used)
    if (std::find(known.begin(), known.end(), bus) == known.end())
      return errorStatus(ncclInvalidUsage, "rank %d: the topology (%s) has no GPU %s, which a rank of this host uses",
                         comm->rank, t->source.c_str(), bus.c_str());
  graph::keepGpus(t->xml.get(), used);  // GPUs no rank drives take no part
  graph::setGpuRanks(t->xml.get(), rankOfBusId);
  WEFT_ASSIGN_OR_RETURN(t->model, graph::topologyFromXml(*t->xml));
  t->gpuOfRank.assign(static_cast<size_t>(comm->nranks), -1);
  for (int g : t->model.nodesOf(graph::NodeType::kGpu))
    for (int r : local)
      if (graph::normalizeBusId(comm->peers[static_cast<size_t>(r)].busId) == t->model.node(g).id)
        t->gpuOfRank[static_cast<size_t>(r)] = g;
  return t;
}

Result<std::shared_ptr<CommTopology>> hostTopology(Comm* comm, const std::vector<int>& nodeRanks) {
  auto t = std::make_shared<CommTopology>();
  const std::string file = param::topoFile();
  if (file.empty()) {
    // One NIC per interface the socket network would use, so that its
    // devices are the plan's NICs (docs/network.md, "Rails").
    std::vector<std::string> nics;
    for (const NetInterface& i : findInterfaces(param::socketIfname(), param::socketFamily())) nics.push_back(i.name);
    t->source = "synthetic";
    t->model = graph::syntheticTopology(static_cast<int>(nodeRanks.size()), graph::kSyntheticShmGbs,
                                        graph::kSyntheticNicGbs, nics);
  } else {
    // The ranks of a host fuse what they read, so a file that differs
    // between processes gives one model (or one clear error), not plans
    // that disagree.
    t->source = "NCCL_TOPO_FILE=" + file;
    WEFT_ASSIGN_OR_RETURN(std::unique_ptr<graph::XmlNode> fused, fusedHostView(comm, readTopoFile(file)));
    WEFT_ASSIGN_OR_RETURN(t->model, graph::topologyFromXml(*fused));
  }
  const std::vector<int> gpus = t->model.nodesOf(graph::NodeType::kGpu);
  if (gpus.empty() && !nodeRanks.empty())
    return errorStatus(ncclInvalidUsage,
                       "NCCL_TOPO_FILE=%s has no <gpu> element (a file that holds only the PCI tree is merged with the "
                       "GPUs the cuda backend detects; the host backend has none to merge it with)",
                       file.c_str());
  if (gpus.size() != nodeRanks.size())
    return errorStatus(ncclInvalidUsage,
                       "NCCL_TOPO_FILE=%s has %zu GPUs but rank %d's node has %zu ranks; on the host backend the "
                       "node's i-th rank drives the file's i-th GPU, so the counts must match",
                       file.c_str(), gpus.size(), comm->rank, nodeRanks.size());
  t->gpuOfRank.assign(static_cast<size_t>(comm->nranks), -1);
  for (size_t i = 0; i < gpus.size(); ++i) {
    t->model.node(gpus[i]).rank = nodeRanks[i];
    t->gpuOfRank[static_cast<size_t>(nodeRanks[i])] = gpus[i];
  }
  t->xml = graph::topologyToXml(t->model);
  return t;
}

// A 0/1 switch; anything else is refused rather than guessed.
Result<bool> flag(const char* name) {
  const std::optional<std::string> text = param::raw(name);
  if (!text || text->empty()) return false;
  const std::optional<int64_t> v = param::parseInt(*text);
  if (!v || (*v != 0 && *v != 1))
    return errorStatus(ncclInvalidArgument, "%s=\"%s\" is not valid: expected 0 or 1", name, text->c_str());
  return *v == 1;
}

Status resolveTransportPolicy(const Comm& comm, CommTopology* t) {
  WEFT_ASSIGN_OR_RETURN(t->shmDisabled, flag("NCCL_SHM_DISABLE"));
  WEFT_ASSIGN_OR_RETURN(bool p2pDisabled, flag("NCCL_P2P_DISABLE"));
  WEFT_ASSIGN_OR_RETURN(std::optional<graph::PathType> level, graph::parseP2pLevel(param::p2pLevel()));
  if (p2pDisabled)
    t->p2pLevel = graph::PathType::kLoc;  // NCCL: only a device with itself
  else if (level)
    t->p2pLevel = *level;
  else  // host backend: no limit; cuda: NCCL's default for the CPU
    t->p2pLevel = comm.backend == weftBackendCuda ? graph::defaultP2pLevel(t->model) : graph::PathType::kSys;
  if (p2pDisabled || level)
    WEFT_INFO(log::kEnv, "P2P level %s (%s)", graph::pathTypeName(t->p2pLevel),
              p2pDisabled ? "NCCL_P2P_DISABLE=1" : "NCCL_P2P_LEVEL");
  return okStatus();
}

void dumpIfAsked(const Comm& comm, const CommTopology& t) {
  const std::string path = param::topoDumpFile();
  const std::vector<int> local = ranksOnMyHost(comm);
  if (path.empty() || local.front() != comm.rank) return;
  Status s = graph::writeXmlFile(*t.xml, path);
  if (!s.ok())
    WEFT_WARN("NCCL_TOPO_DUMP_FILE: %s", s.message().c_str());
  else
    WEFT_INFO(log::kGraph, "topology written to %s", path.c_str());
}

}  // namespace

Result<std::shared_ptr<const CommTopology>> buildCommTopology(Comm* comm, const std::vector<int>& nodeRanks) {
  const PhaseTimer timer(&comm->initTimes.topo);
  auto built = comm->backend == weftBackendCuda ? cudaTopology(comm) : hostTopology(comm, nodeRanks);
  if (!built.ok()) return built.status();
  std::shared_ptr<CommTopology> t = std::move(built).value();
  WEFT_RETURN_IF_ERROR(resolveTransportPolicy(*comm, t.get()));
  dumpIfAsked(*comm, *t);
  // This rank's GPU to every NIC, in NCCL's path classes (P2C, PXN included).
  const int gpu = t->gpuOfRank[static_cast<size_t>(comm->rank)];
  if (gpu >= 0)
    WEFT_INFO(log::kGraph, "GPU/%d paths: %s", t->model.node(gpu).dev, graph::netPathsLine(t->model, gpu).c_str());
  return std::shared_ptr<const CommTopology>(std::move(t));
}

Result<graph::Topology> nodeModel(const CommTopology& t, const std::vector<int>& nodeRanks) {
  std::set<std::string> keep;
  for (int r : nodeRanks) {
    const int g = t.gpuOfRank[static_cast<size_t>(r)];
    if (g < 0) return errorStatus(ncclInternalError, "rank %d has no device in the topology", r);
    keep.insert(t.model.node(g).id);
  }
  if (keep.size() == t.model.nodesOf(graph::NodeType::kGpu).size()) return t.model;
  std::unique_ptr<graph::XmlNode> xml = graph::cloneXml(*t.xml);
  graph::keepGpus(xml.get(), keep);
  return graph::topologyFromXml(*xml);
}

graph::PathType pathBetween(const CommTopology& t, int rankA, int rankB, graph::PathType unknown) {
  const int a = t.gpuOfRank[static_cast<size_t>(rankA)], b = t.gpuOfRank[static_cast<size_t>(rankB)];
  if (a < 0 || b < 0) return unknown;
  return t.model.path(a, b).type;
}

}  // namespace weft::core
