// weft-topo: the topology Weft sees and the rings and trees it builds.
//   weft-topo [--topo-file F] [--graph-file G] [--nodes N] [--channels C]
//             [--json | --dot | --dump-xml | --dump-graph]
// Without a file: this machine, detected (hwloc, CUDA driver, NVML, sysfs);
// when it has no GPU, the host backend's synthetic machine (one device per
// core), said on stderr. --nodes N treats the topology as one host and
// builds N identical hosts joined through their NICs; rank = node *
// GPUs-per-node + local GPU index. --graph-file imposes rings and trees
// (NCCL_GRAPH_FILE's format); --dump-graph prints them in that format.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "common/params.h"
#include "common/socket.h"
#include "graph/detect.h"
#include "graph/graph_file.h"
#include "graph/plan.h"
#include "graph/topo_xml.h"

using namespace weft::graph;

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

void printSummary(const Topology& t, const ChannelPlan& p) {
  std::printf("Topology: %zu GPUs, %zu CPUs, %zu PCI switches, %zu NICs, %zu NETs, %zu NVSwitches\n",
              t.nodesOf(NodeType::kGpu).size(), t.nodesOf(NodeType::kCpu).size(), t.nodesOf(NodeType::kPci).size(),
              t.nodesOf(NodeType::kNic).size(), t.nodesOf(NodeType::kNet).size(), t.nodesOf(NodeType::kNvs).size());
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
  std::printf("GPU paths (type/GB/s):\n     ");
  for (size_t j = 0; j < gpus.size(); ++j) std::printf(" %9zu", j);
  std::printf("\n");
  for (size_t i = 0; i < gpus.size(); ++i) {
    std::printf("  %2zu ", i);
    for (size_t j = 0; j < gpus.size(); ++j) {
      const Path& path = t.path(gpus[i], gpus[j]);
      std::printf(" %s/%-5.0f", pathTypeName(path.type), path.bw);
    }
    std::printf("\n");
  }
  std::printf("Search: %s rings, %.1f GB/s per channel, worst link %s, %d socket crossings, %ld steps\n",
              p.intra.nvlinkOnly ? "NVLink-only" : "PCIe", p.intra.bwPerChannel, pathTypeName(p.intra.worstType),
              p.intra.socketCrossings, p.intra.searchSteps);
  std::printf("%d ranks on %d nodes\n", p.nranks, p.nnodes);
  for (size_t c = 0; c < p.rings.size(); ++c) {
    std::printf("Channel %02zu ring:", c);
    for (int r : p.rings[c]) std::printf(" %d", r);
    const int in = p.intra.netIn[c], out = p.intra.netOut[c];
    if (in >= 0 && out >= 0) std::printf("  (in by %s, out by %s)", t.node(in).id.c_str(), t.node(out).id.c_str());
    std::printf("\nChannel %02zu tree %zu (depth %d):", c, c % 2, p.trees[c].depth);
    for (size_t r = 0; r < p.trees[c].up.size(); ++r) std::printf(" %zu->%d", r, p.trees[c].up[r]);
    std::printf("\n");
  }
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
               "usage: %s [--topo-file F] [--graph-file G] [--nodes N] [--channels C] [--json | --dot | --dump-xml | "
               "--dump-graph]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string file, graphFile, mode = "summary";
  int nodes = 1, channels = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--topo-file" && i + 1 < argc)
      file = argv[++i];
    else if (a == "--graph-file" && i + 1 < argc)
      graphFile = argv[++i];
    else if (a == "--nodes" && i + 1 < argc)
      nodes = std::atoi(argv[++i]);
    else if (a == "--channels" && i + 1 < argc)
      channels = std::atoi(argv[++i]);
    else if (a == "--json" || a == "--dot" || a == "--dump-xml" || a == "--dump-graph")
      mode = a.substr(2);
    else
      return usage(argv[0]);
  }
  if (nodes < 1 || channels < 1) {
    std::fprintf(stderr, "weft-topo: --nodes and --channels must be at least 1\n");
    return 2;
  }
  Topology topo;
  std::unique_ptr<XmlNode> detectedXml;
  if (!file.empty()) {
    auto loaded = loadTopologyFile(file);
    if (!loaded.ok()) {
      std::fprintf(stderr, "weft-topo: %s\n", loaded.status().message().c_str());
      return 1;
    }
    topo = std::move(loaded).value();
  } else {
    topo = localMachine(&detectedXml);
  }
  RingSearch search = searchRings(topo, channels);
  if (!graphFile.empty()) {
    auto imposed = loadGraphFile(graphFile, topo);
    if (!imposed.ok()) {
      std::fprintf(stderr, "weft-topo: %s\n", imposed.status().message().c_str());
      return 1;
    }
    search = imposeRings(topo, channels, imposed.value());
  }
  const ChannelPlan plan = buildChannelPlan(search, static_cast<int>(topo.nodesOf(NodeType::kGpu).size()), nodes);
  if (mode == "json")
    printJson(topo, plan);
  else if (mode == "dot")
    printDot(topo, plan);
  else if (mode == "dump-xml")
    std::fputs(writeXml(detectedXml ? *detectedXml : *topologyToXml(topo)).c_str(), stdout);
  else if (mode == "dump-graph")
    std::fputs(writeXml(*graphsToXml(topo, search)).c_str(), stdout);
  else
    printSummary(topo, plan);
  return 0;
}
