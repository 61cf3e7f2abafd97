// weft-topo: the topology Weft sees and the rings and trees it builds.
//   weft-topo [--topo-file F [--detected-file D]] [--graph-file G] [--nodes N]
//             [--channels C] [--cross-nic 0|1|2]
//             [--json | --dot | --dump-xml | --dump-graph]
// Without a file: this machine, detected (hwloc, CUDA driver, NVML, sysfs);
// when it has no GPU, the host backend's synthetic machine (one device per
// core), said on stderr. A file without GPUs (the PCI tree a cloud image
// ships) is merged with this machine's detection as NCCL_TOPO_FILE is, or
// with the detection dump D. --nodes N treats the topology as one host and
// builds N identical hosts joined through their NICs; ranks follow the
// file's rank (else dev) attributes: host h's GPU of rank r is h * GPUs + r.
// --channels C: C channels instead of the count the topology needs.
// --graph-file imposes rings and trees (NCCL_GRAPH_FILE's format);
// --dump-graph prints them in that format.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/params.h"
#include "common/socket.h"
#include "graph/channel_budget.h"
#include "graph/detect.h"
#include "graph/graph_file.h"
#include "graph/plan.h"
#include "graph/topo_fuse.h"
#include "graph/topo_xml.h"

using namespace weft::graph;
using weft::errorStatus;
using weft::Result;

namespace {

void printJson(const Topology& t, const ChannelPlan& p) {
  std::printf(
      "{\"nranks\":%d,\"nnodes\":%d,\"ranksPerNode\":%d,\"nvlinkOnly\":%s,\"bwPerChannel\":%.2f,"
      "\"worstPath\":\"%s\",\"socketCrossings\":%d,\"searchSteps\":%ld,\n\"rings\":[",
      p.nranks, p.nnodes, p.ranksPerNode, p.intra.nvlinkOnly ? "true" : "false", p.intra.bwPerChannel,
      pathTypeName(p.intra.worstType), p.intra.socketCrossings, p.intra.searchSteps);
  for (size_t c = 0; c < p.rings.size(); ++c) {
    std::printf("%s[", c ? "," : "");
    for (size_t i = 0; i < p.rings[c].size(); ++i) std::printf("%s%d", i ? "," : "", p.rings[c][i]);
    std::printf("]");
  }
  std::printf("],\n\"trees\":[");
  for (size_t c = 0; c < p.trees.size(); ++c) {
    const RankTree& tr = p.trees[c];
    std::printf("%s{\"depth\":%d,\"up\":[", c ? ",\n" : "", tr.depth);
    for (size_t r = 0; r < tr.up.size(); ++r) std::printf("%s%d", r ? "," : "", tr.up[r]);
    std::printf("],\"down\":[");
    for (size_t r = 0; r < tr.down.size(); ++r) {
      std::printf("%s[", r ? "," : "");
      for (size_t k = 0; k < tr.down[r].size(); ++k) std::printf("%s%d", k ? "," : "", tr.down[r][k]);
      std::printf("]");
    }
    std::printf("]}");
  }
  std::printf("],\n\"paths\":[");
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::printf("%s[", i ? "," : "");
    for (size_t j = 0; j < gpus.size(); ++j) {
      const Path& path = t.path(gpus[i], gpus[j]);
      std::printf("%s{\"type\":\"%s\",\"bw\":%.1f}", j ? "," : "", pathTypeName(path.type), path.bw);
    }
    std::printf("]");
  }
  // Every GPU to every NET, in NCCL's classes (P2C, PXN), with the PXN peer's dev.
  std::printf("],\n\"netPaths\":[");
  const std::vector<int> nets = t.nodesOf(NodeType::kNet);
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::printf("%s[", i ? "," : "");
    for (size_t j = 0; j < nets.size(); ++j) {
      const Path path = t.ncclPath(gpus[i], nets[j]);
      const int peer = t.pxnPeer(gpus[i], nets[j]);
      std::printf("%s{\"net\":%d,\"type\":\"%s\",\"bw\":%.1f,\"via\":%d}", j ? "," : "", t.node(nets[j]).dev,
                  pathTypeName(path.type), path.bw, peer >= 0 ? t.node(peer).dev : -1);
    }
    std::printf("]");
  }
  std::printf("]}\n");
}

void printDot(const Topology& t, const ChannelPlan& p) {
  std::printf("graph weft {\n  node [shape=box];\n");
  for (size_t i = 0; i < t.nodes().size(); ++i) {
    const Node& n = t.nodes()[i];
    std::printf("  n%zu [label=\"%s %s\"%s];\n", i, nodeTypeName(n.type), n.id.c_str(),
                n.type == NodeType::kGpu ? " style=filled fillcolor=palegreen" : "");
    for (const Link& l : t.links(static_cast<int>(i)))
      if (static_cast<size_t>(l.to) > i)
        std::printf("  n%zu -- n%d [label=\"%.0f GB/s\"%s];\n", i, l.to, l.bw,
                    l.type == LinkType::kNvl ? " color=green penwidth=2" : "");
  }
  // Ranks, with channel 0's ring and tree when there are several nodes.
  std::printf("  subgraph cluster_ranks {\n    label=\"channel 0: ring (blue), tree (red)\";\n");
  if (!p.rings.empty()) {
    const auto& ring = p.rings[0];
    for (size_t i = 0; i < ring.size(); ++i)
      std::printf("    r%d -- r%d [color=blue dir=forward];\n", ring[i], ring[(i + 1) % ring.size()]);
    for (size_t r = 0; r < p.trees[0].down.size(); ++r)
      for (int c : p.trees[0].down[r]) std::printf("    r%zu -- r%d [color=red];\n", r, c);
  }
  std::printf("  }\n}\n");
}

void printSummary(const Topology& t, const ChannelPlan& p, const ChannelBudget& b, int crossNic) {
  std::printf("Topology: %zu GPUs, %zu CPUs, %zu PCI switches, %zu NICs, %zu NETs, %zu NVSwitches\n",
              t.nodesOf(NodeType::kGpu).size(), t.nodesOf(NodeType::kCpu).size(), t.nodesOf(NodeType::kPci).size(),
              t.nodesOf(NodeType::kNic).size(), t.nodesOf(NodeType::kNet).size(), t.nodesOf(NodeType::kNvs).size());
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
  const std::vector<int> ranks = localRanks(t);
  std::printf("GPU paths (type/GB/s), by rank on the first node:\n     ");
  for (size_t j = 0; j < gpus.size(); ++j) std::printf(" %9d", ranks[j]);
  std::printf("\n");
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::printf("  %2d ", ranks[i]);
    for (size_t j = 0; j < gpus.size(); ++j) {
      const Path& path = t.path(gpus[i], gpus[j]);
      std::printf(" %s/%-5.1f", pathTypeName(path.type), path.bw);
    }
    std::printf("\n");
  }
  const std::vector<int> nets = t.nodesOf(NodeType::kNet);
  if (!nets.empty()) {
    std::printf("NET paths (type/GB/s in NCCL's classes; PXN/bw@r: through rank r's GPU), by rank:\n     ");
    for (int n : nets) std::printf(" %11s", ("NET/" + std::to_string(t.node(n).dev)).c_str());
    std::printf("\n");
    for (size_t i = 0; i < gpus.size(); ++i) {
      std::printf("  %2d ", ranks[i]);
      for (int n : nets) {
        const Path path = t.ncclPath(gpus[i], n);
        const int peer = t.pxnPeer(gpus[i], n);
        char cell[48];
        const size_t via = static_cast<size_t>(std::find(gpus.begin(), gpus.end(), peer) - gpus.begin());
        std::snprintf(cell, sizeof(cell), "%s/%.1f%s", pathTypeName(path.type), path.bw,
                      via < gpus.size() ? ("@" + std::to_string(ranks[via])).c_str() : "");
        std::printf(" %11s", cell);
      }
      std::printf("\n");
    }
  }
  std::printf("Search: %s rings, ring capacity %.1f GB/s, worst link %s, %d socket crossings, %ld steps\n",
              p.intra.nvlinkOnly ? "NVLink-only" : "PCIe", p.intra.bwPerChannel, pathTypeName(p.intra.worstType),
              p.intra.socketCrossings, p.intra.searchSteps);
  std::printf("Pattern 4, crossNic %d, nChannels %d, bw %f/%f, type %s/%s (channels this topology needs: %d)\n",
              crossNic, b.searchChannels, b.bwIntra, b.bwInter, pathTypeName(p.intra.worstType),
              pathTypeName(p.nnodes > 1 && !p.intra.netIn.empty() && p.intra.netIn[0] >= 0
                               ? t.path(p.intra.netIn[0], gpus[static_cast<size_t>(p.intra.rings[0][0])]).type
                               : p.intra.worstType),
              b.wanted);
  std::printf("%d ranks on %d nodes\n", p.nranks, p.nnodes);
  for (size_t c = 0; c < p.rings.size(); ++c) {
    std::printf("%s", channelLine(c, p.rings.size(), p.rings[c]).c_str());
    const std::vector<int>& local = p.intra.rings[c];
    bool differs = false;
    for (int l : local) differs = differs || t.node(gpus[static_cast<size_t>(l)]).dev != ranks[static_cast<size_t>(l)];
    if (differs) {
      std::printf("  [GPU dev on each node:");
      for (int l : local) std::printf(" %d", t.node(gpus[static_cast<size_t>(l)]).dev);
      std::printf("]");
    }
    const int in = p.intra.netIn[c], out = p.intra.netOut[c];
    if (in >= 0 && out >= 0)
      std::printf("  (NET/%d %s in, NET/%d %s out)", t.node(in).dev, t.node(in).id.c_str(), t.node(out).dev,
                  t.node(out).id.c_str());
    std::printf("\n");
  }
  for (int r = 0; r < p.nranks; ++r) std::printf("[%d] %s\n", r, treesLine(p, r).c_str());
}

// This machine through detection; its GPUs, or the synthetic machine when
// it has none (said on stderr). `detectedXml` keeps what was detected.
Topology localMachine(std::unique_ptr<XmlNode>* detectedXml) {
  DetectOptions options;
  for (const weft::NetInterface& i : weft::findInterfaces(weft::param::socketIfname(), weft::param::socketFamily()))
    options.netInterfaces.push_back(i.name);
  auto detected = detectSystem(options);
  if (detected.ok() && detected.value().gpus > 0) {
    auto topo = topologyFromXml(*detected.value().xml);
    if (topo.ok()) {
      std::fprintf(stderr, "weft-topo: this machine (%s): %d GPUs, %d NICs\n", detected.value().machineSource.c_str(),
                   detected.value().gpus, detected.value().nets);
      *detectedXml = std::move(detected.value().xml);
      return std::move(topo).value();
    }
  }
  const int cores = static_cast<int>(std::max(1L, sysconf(_SC_NPROCESSORS_ONLN)));
  if (detected.ok()) {
    auto topo = topologyFromXml(*detected.value().xml);
    std::fprintf(stderr,
                 "weft-topo: this machine (%s): %zu CPUs, %d NICs, no GPU (%s)\n"
                 "weft-topo: showing the host backend's synthetic machine instead: %d devices, one per core\n",
                 detected.value().machineSource.c_str(), topo.ok() ? topo.value().nodesOf(NodeType::kCpu).size() : 0,
                 detected.value().nets, detected.value().notes.c_str(), cores);
    *detectedXml = std::move(detected.value().xml);
  } else {
    std::fprintf(stderr, "weft-topo: detection failed (%s); showing the synthetic machine (%d devices)\n",
                 detected.status().message().c_str(), cores);
  }
  return syntheticTopology(cores);
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s [--topo-file F [--detected-file D]] [--graph-file G] [--nodes N] [--channels C] "
               "[--cross-nic 0|1|2] [--json | --dot | --dump-xml | --dump-graph]\n",
               argv0);
  return 2;
}

// NCCL_TOPO_FILE's reading: the file, merged with a detection (the dump D,
// else this machine's) when it describes no GPU itself.
Result<Topology> loadFile(const std::string& file, const std::string& detectedFile) {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> xml, readXmlFile(file));
  auto alone = topologyFromXml(*xml);
  if (!alone.ok()) return errorStatus(ncclInvalidArgument, "%s: %s", file.c_str(), alone.status().message().c_str());
  if (hasGpus(*xml) && detectedFile.empty()) return alone;
  std::unique_ptr<XmlNode> detected;
  std::string from = detectedFile;
  if (!detectedFile.empty()) {
    WEFT_ASSIGN_OR_RETURN(detected, readXmlFile(detectedFile));
  } else {
    DetectOptions options;
    auto d = detectSystem(options);
    if (d.ok() && d.value().gpus > 0) detected = std::move(d.value().xml);
    from = "this machine's detection";
  }
  if (!detected || !hasGpus(*detected))
    return errorStatus(ncclInvalidArgument,
                       "%s describes no GPU (no <gpu> element: a file of the PCI tree only, merged with the GPUs "
                       "detection finds, as NCCL does) and %s found none; give a detection dump with --detected-file",
                       file.c_str(), detectedFile.empty() ? "this machine's detection" : detectedFile.c_str());
  std::fprintf(stderr, "weft-topo: %s merged with %s\n", file.c_str(), from.c_str());
  auto merged = topologyFromXml(*mergeTopologyFile(*xml, detected.get()));
  if (!merged.ok())
    return errorStatus(ncclInvalidArgument, "%s merged with %s: %s", file.c_str(), from.c_str(),
                       merged.status().message().c_str());
  return merged;
}

struct Options {
  std::string file, detectedFile, graphFile, mode = "summary";
  int nodes = 1, channels = 0, crossNic = 2;
};

bool parseArgs(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "--topo-file" && hasValue)
      o->file = argv[++i];
    else if (a == "--detected-file" && hasValue)
      o->detectedFile = argv[++i];
    else if (a == "--graph-file" && hasValue)
      o->graphFile = argv[++i];
    else if (a == "--nodes" && hasValue)
      o->nodes = std::atoi(argv[++i]);
    else if (a == "--channels" && hasValue)
      o->channels = std::atoi(argv[++i]);
    else if (a == "--cross-nic" && hasValue)
      o->crossNic = std::atoi(argv[++i]);
    else if (a == "--json" || a == "--dot" || a == "--dump-xml" || a == "--dump-graph")
      o->mode = a.substr(2);
    else
      return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parseArgs(argc, argv, &o)) return usage(argv[0]);
  if (o.nodes < 1 || o.channels < 0 || o.crossNic < 0 || o.crossNic > 2 ||
      (!o.detectedFile.empty() && o.file.empty())) {
    std::fprintf(stderr,
                 "weft-topo: --nodes must be at least 1, --channels at least 1, --cross-nic 0, 1 or 2, and "
                 "--detected-file needs --topo-file\n");
    return 2;
  }
  Topology topo;
  std::unique_ptr<XmlNode> detectedXml;
  if (!o.file.empty()) {
    auto loaded = loadFile(o.file, o.detectedFile);
    if (!loaded.ok()) {
      std::fprintf(stderr, "weft-topo: %s\n", loaded.status().message().c_str());
      return 1;
    }
    topo = std::move(loaded).value();
  } else {
    topo = localMachine(&detectedXml);
  }
  SearchOptions search;
  search.crossNic = o.crossNic;
  const ChannelBudget budget = channelBudget(topo, searchRings(topo, 1, search), o.nodes, 1, 32);
  const int channels = o.channels > 0 ? o.channels : budget.channels;
  search.ringSpeed = budget.ringSpeed;  // the rings the budget counted
  RingSearch rings = searchRings(topo, channels, search);
  if (!o.graphFile.empty()) {
    auto imposed = loadGraphFile(o.graphFile, topo);
    if (!imposed.ok()) {
      std::fprintf(stderr, "weft-topo: %s\n", imposed.status().message().c_str());
      return 1;
    }
    rings = imposeRings(topo, channels, imposed.value());
  }
  const ChannelPlan plan = buildChannelPlan(rings, localRanks(topo), o.nodes);
  if (o.mode == "json")
    printJson(topo, plan);
  else if (o.mode == "dot")
    printDot(topo, plan);
  else if (o.mode == "dump-xml")
    std::fputs(writeXml(detectedXml ? *detectedXml : *topologyToXml(topo)).c_str(), stdout);
  else if (o.mode == "dump-graph")
    std::fputs(writeXml(*graphsToXml(topo, rings, o.channels > 0 ? nullptr : &budget)).c_str(), stdout);
  else
    printSummary(topo, plan, budget, o.crossNic);
  return 0;
}
