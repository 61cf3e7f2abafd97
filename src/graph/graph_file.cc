#include "graph/graph_file.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace weft::graph {
namespace {

bool parseDev(const std::string* text, long* out) {
  if (text == nullptr || text->empty()) return false;
  char* end = nullptr;
  *out = std::strtol(text->c_str(), &end, 0);
  return *end == '\0';
}

// Local GPU index of a <gpu> element: by dev, else by rank.
Result<int> gpuOf(const XmlNode& gpu, const Topology& host, const std::vector<int>& gpus) {
  long value = 0;
  if (parseDev(gpu.attr("dev"), &value))
    for (size_t i = 0; i < gpus.size(); ++i)
      if (host.node(gpus[i]).dev == value) return static_cast<int>(i);
  if (parseDev(gpu.attr("rank"), &value))
    for (size_t i = 0; i < gpus.size(); ++i)
      if (host.node(gpus[i]).rank == value) return static_cast<int>(i);
  const std::string* dev = gpu.attr("dev");
  return errorStatus(ncclInvalidArgument, "no GPU with dev \"%s\" on this host (it has %zu GPUs)",
                     dev ? dev->c_str() : "", gpus.size());
}

Result<GraphChannel> channelFromXml(const XmlNode& channel, const Topology& host, const std::vector<int>& gpus) {
  GraphChannel out;
  int netsSeen = 0;
  for (const auto& c : channel.children) {
    if (c->name == "gpu") {
      WEFT_ASSIGN_OR_RETURN(int local, gpuOf(*c, host, gpus));
      out.gpus.push_back(local);
    } else if (c->name == "net") {
      long dev = -1;
      if (!parseDev(c->attr("dev"), &dev)) return errorStatus(ncclInvalidArgument, "<net> without a valid dev");
      (netsSeen++ == 0 ? out.netIn : out.netOut) = static_cast<int>(dev);
    }
  }
  std::vector<int> sorted = out.gpus;
  std::sort(sorted.begin(), sorted.end());
  const bool permutation = std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end();
  if (out.gpus.size() != gpus.size() || !permutation)
    return errorStatus(ncclInvalidArgument,
                       "lists %zu GPUs%s, but a channel must list each of the host's %zu GPUs once", out.gpus.size(),
                       permutation ? "" : " with repeats", gpus.size());
  return out;
}

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g", v);
  return buf;
}

void addChannel(XmlNode* graph, const Topology& host, const std::vector<int>& order, int netIn, int netOut) {
  const std::vector<int> gpus = host.nodesOf(NodeType::kGpu);
  XmlNode* ch = graph->add("channel");
  if (netIn >= 0) ch->add("net")->set("dev", std::to_string(host.node(netIn).dev));
  for (int local : order) {
    const Node& n = host.node(gpus[static_cast<size_t>(local)]);
    XmlNode* g = ch->add("gpu");
    g->set("dev", std::to_string(n.dev >= 0 ? n.dev : local));
    if (n.rank >= 0) g->set("rank", std::to_string(n.rank));
  }
  if (netOut >= 0) ch->add("net")->set("dev", std::to_string(host.node(netOut).dev));
}

XmlNode* addGraph(XmlNode* root, int id, int pattern, const Topology& host, const RingSearch& s, size_t channels,
                  const ChannelBudget* budget) {
  const std::vector<int> gpus = host.nodesOf(NodeType::kGpu);
  double netBw = budget ? budget->bwInter : s.bwPerChannel;
  PathType netType = PathType::kPix;  // NCCL's floor for the inter-host class
  bool crossNic = false, same = true;
  for (size_t c = 0; c < channels; ++c) {
    crossNic = crossNic || s.netIn[c] != s.netOut[c];
    same = same && s.rings[c] == s.rings[0];
    if (s.netIn[c] < 0 || s.rings[c].empty()) continue;
    const Path& in = host.path(s.netIn[c], gpus[static_cast<size_t>(s.rings[c].front())]);
    if (!budget) netBw = std::min(netBw, in.bw);
    netType = std::max(netType, in.type);
  }
  XmlNode* g = root->add("graph");
  g->set("id", std::to_string(id));
  g->set("pattern", std::to_string(pattern));
  g->set("crossnic", crossNic ? "1" : "0");
  g->set("nchannels", std::to_string(channels));
  g->set("speedintra", number(budget ? budget->bwIntra : s.bwPerChannel));
  g->set("speedinter", number(netBw));
  g->set("latencyinter", "0");
  g->set("typeintra", pathTypeName(s.worstType));
  g->set("typeinter", pathTypeName(netType));
  g->set("samechannels", same ? "1" : "0");
  return g;
}

}  // namespace

Result<ImposedGraphs> graphsFromXml(const XmlNode& root, const Topology& host) {
  if (root.name != "graphs")
    return errorStatus(ncclInvalidArgument, "line %d: root element is <%s>, expected <graphs>", root.line,
                       root.name.c_str());
  const std::vector<int> gpus = host.nodesOf(NodeType::kGpu);
  ImposedGraphs out;
  for (const auto& graph : root.children) {
    long id = -1;
    if (graph->name != "graph" || !parseDev(graph->attr("id"), &id)) continue;
    if (id != kRingGraphId && id != kTreeGraphId) continue;  // CollNet, NVLS: not built here
    std::vector<GraphChannel>& into = id == kRingGraphId ? out.rings : out.trees;
    int index = 0;
    for (const auto& ch : graph->children) {
      if (ch->name != "channel") continue;
      auto channel = channelFromXml(*ch, host, gpus);
      if (!channel.ok())
        return errorStatus(ncclInvalidArgument, "line %d: graph %ld channel %d: %s", ch->line, id, index,
                           channel.status().message().c_str());
      into.push_back(std::move(channel).value());
      ++index;
    }
  }
  if (out.rings.empty() && out.trees.empty())
    return errorStatus(ncclInvalidArgument, "no <graph id=\"0\"> (rings) or <graph id=\"1\"> (trees) with channels");
  if (out.rings.empty()) out.rings = out.trees;  // rings follow the chains
  return out;
}

Result<ImposedGraphs> loadGraphFile(const std::string& path, const Topology& host) {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> root, readXmlFile(path));
  auto graphs = graphsFromXml(*root, host);
  if (!graphs.ok()) return errorStatus(ncclInvalidArgument, "%s: %s", path.c_str(), graphs.status().message().c_str());
  return graphs;
}

std::unique_ptr<XmlNode> graphsToXml(const Topology& host, const RingSearch& s, const ChannelBudget* budget) {
  auto root = std::make_unique<XmlNode>();
  root->name = "graphs";
  root->set("version", "1");
  const size_t channels =
      budget ? std::min(s.rings.size(), static_cast<size_t>(std::max(1, budget->searchChannels))) : s.rings.size();
  XmlNode* rings = addGraph(root.get(), kRingGraphId, kPatternRing, host, s, channels, budget);
  for (size_t c = 0; c < channels; ++c) addChannel(rings, host, s.rings[c], s.netIn[c], s.netOut[c]);
  XmlNode* trees = addGraph(root.get(), kTreeGraphId, kPatternTree, host, s, channels, budget);
  for (size_t c = 0; c < channels; ++c) addChannel(trees, host, s.chains[c], s.netIn[c], s.netIn[c]);
  return root;
}

}  // namespace weft::graph
