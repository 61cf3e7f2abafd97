#include "graph/topo_xml.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

namespace weft::graph {
namespace {

constexpr const char* kNvSwitchClass = "0x068000";

std::string get(const XmlNode& n, const char* key, const char* fallback = "") {
  const std::string* v = n.attr(key);
  return v ? *v : fallback;
}

// Attributes we interpret are rebuilt from the model on output; the rest are
// carried through untouched.
std::vector<std::pair<std::string, std::string>> extras(const XmlNode& n, std::set<std::string> interpreted) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : n.attrs)
    if (!interpreted.count(kv.first)) out.push_back(kv);
  return out;
}

double pciLinkBw(const XmlNode& pci) {
  const int width = std::atoi(get(pci, "link_width", "0").c_str());
  const double speed = std::atof(get(pci, "link_speed", "0").c_str());  // "16.0 GT/s PCIe" -> 16
  return pciBandwidth(width, speed);
}

struct Builder {
  Topology t;
  struct NvLink {
    int gpu;
    std::string target, tclass;
    int count;
  };
  std::vector<NvLink> nvlinks;

  void nets(const XmlNode& nic, int nicNode) {
    for (const auto& c : nic.children) {
      if (c->name != "net") continue;
      Node net = makeNode(NodeType::kNet, get(*c, "name"));
      net.dev = std::atoi(get(*c, "dev", "-1").c_str());
      net.speedGbs = std::atof(get(*c, "speed", "0").c_str()) / 8000.0;  // Mb/s -> GB/s
      net.parent = nicNode;
      net.extra = extras(*c, {"name", "dev", "speed"});
      t.connect(t.addNode(net), nicNode, LinkType::kPci, net.speedGbs);
    }
  }

  Status pci(const XmlNode& x, int parent) {
    const double bw = pciLinkBw(x);
    const XmlNode* gpu = nullptr;
    const XmlNode* nic = nullptr;
    for (const auto& c : x.children) {
      if (c->name == "gpu") gpu = c.get();
      if (c->name == "nic") nic = c.get();
    }
    Node n = makeNode(gpu ? NodeType::kGpu : nic ? NodeType::kNic : NodeType::kPci, get(x, "busid"));
    n.parent = parent;
    n.extra = extras(x, {"busid"});
    if (gpu) {
      n.dev = std::atoi(get(*gpu, "dev", "-1").c_str());
      n.sm = std::atoi(get(*gpu, "sm", "0").c_str());
      n.rank = std::atoi(get(*gpu, "rank", "-1").c_str());
      n.gpuExtra = extras(*gpu, {"dev", "sm", "rank"});
    }
    const int id = t.addNode(n);
    t.connect(id, parent, LinkType::kPci, bw);
    if (gpu)
      for (const auto& c : gpu->children)
        if (c->name == "nvlink")
          nvlinks.push_back({id, get(*c, "target"), get(*c, "tclass"), std::atoi(get(*c, "count", "1").c_str())});
    if (nic) nets(*nic, id);
    if (!gpu && !nic)
      for (const auto& c : x.children)
        if (c->name == "pci") WEFT_RETURN_IF_ERROR(pci(*c, id));
    return okStatus();
  }

  Status cpu(const XmlNode& x) {
    Node n = makeNode(NodeType::kCpu, get(x, "numaid", "0"));
    n.dev = std::atoi(n.id.c_str());
    n.arch = get(x, "arch");
    n.vendor = get(x, "vendor");
    n.model = static_cast<int>(std::strtol(get(x, "modelid", "0").c_str(), nullptr, 0));
    n.extra = extras(x, {"numaid", "arch", "vendor", "modelid"});
    const int id = t.addNode(n);
    for (const auto& c : x.children) {
      if (c->name == "pci") WEFT_RETURN_IF_ERROR(pci(*c, id));
      if (c->name == "nic") {
        Node nicNode = makeNode(NodeType::kNic, "");
        nicNode.parent = id;
        const int nicId = t.addNode(nicNode);
        t.connect(nicId, id, LinkType::kPci, pciBandwidth(16, 16));
        nets(*c, nicId);
      }
    }
    return okStatus();
  }

  Status finish() {
    const std::vector<int> cpus = t.nodesOf(NodeType::kCpu);
    for (size_t i = 0; i < cpus.size(); ++i)
      for (size_t j = i + 1; j < cpus.size(); ++j)
        t.connect(cpus[i], cpus[j], LinkType::kSys, cpuInterconnectBandwidth(t.node(cpus[i])));
    std::map<std::string, int> byBus;
    for (int g : t.nodesOf(NodeType::kGpu)) byBus[t.node(g).id] = g;
    int nvs = -1;
    std::map<std::pair<int, int>, int> gpuPairs;  // both sides list the link: count it once
    for (const NvLink& l : nvlinks) {
      const double bw = l.count * nvlinkBandwidth(t.node(l.gpu).sm);
      if (l.tclass == kNvSwitchClass) {
        if (nvs < 0) nvs = t.addNode(makeNode(NodeType::kNvs, "nvswitch"));
        t.addBandwidth(l.gpu, nvs, LinkType::kNvl, bw);
        continue;
      }
      auto it = byBus.find(l.target);
      if (it == byBus.end()) continue;  // NVLink to a CPU (POWER): not modelled
      const std::pair<int, int> key(std::min(l.gpu, it->second), std::max(l.gpu, it->second));
      gpuPairs[key] = std::max(gpuPairs[key], l.count);
    }
    for (const auto& [pair, count] : gpuPairs)
      t.connect(pair.first, pair.second, LinkType::kNvl, count * nvlinkBandwidth(t.node(pair.first).sm));
    t.computePaths();
    return okStatus();
  }
};

void writePci(const Topology& t, int id, XmlNode* parent);

void writeNets(const Topology& t, int nic, XmlNode* nicXml) {
  for (size_t i = 0; i < t.nodes().size(); ++i) {
    const Node& n = t.nodes()[i];
    if (n.type != NodeType::kNet || n.parent != nic) continue;
    XmlNode* x = nicXml->add("net");
    x->set("name", n.id);
    x->set("dev", std::to_string(n.dev));
    x->set("speed", std::to_string(static_cast<long long>(n.speedGbs * 8000.0 + 0.5)));
    for (const auto& kv : n.extra) x->set(kv.first, kv.second);
  }
}

void writeChildren(const Topology& t, int id, XmlNode* x) {
  for (size_t i = 0; i < t.nodes().size(); ++i) {
    const Node& n = t.nodes()[i];
    if (n.parent != id) continue;
    if (n.type == NodeType::kNic && n.id.empty())
      writeNets(t, static_cast<int>(i), x->add("nic"));
    else if (n.type != NodeType::kNet)
      writePci(t, static_cast<int>(i), x);
  }
}

void writePci(const Topology& t, int id, XmlNode* parent) {
  const Node& n = t.node(id);
  XmlNode* x = parent->add("pci");
  x->set("busid", n.id);
  for (const auto& kv : n.extra) x->set(kv.first, kv.second);
  if (n.type == NodeType::kGpu) {
    XmlNode* g = x->add("gpu");
    g->set("dev", std::to_string(n.dev));
    g->set("sm", std::to_string(n.sm));
    g->set("rank", std::to_string(n.rank));
    for (const auto& kv : n.gpuExtra) g->set(kv.first, kv.second);
    const double perLink = nvlinkBandwidth(n.sm);
    for (const Link& l : t.links(id)) {
      if (l.type != LinkType::kNvl) continue;
      const Node& peer = t.node(l.to);
      XmlNode* nv = g->add("nvlink");
      nv->set("target", peer.type == NodeType::kNvs ? std::string("nvswitch") : peer.id);
      nv->set("count", std::to_string(static_cast<int>(l.bw / perLink + 0.5)));
      nv->set("tclass", peer.type == NodeType::kNvs ? kNvSwitchClass : "0x030200");
    }
  } else if (n.type == NodeType::kNic) {
    writeNets(t, id, x->add("nic"));
  } else {
    writeChildren(t, id, x);
  }
}

}  // namespace

Result<Topology> topologyFromXml(const XmlNode& system) {
  if (system.name != "system")
    return errorStatus(ncclInvalidArgument, "topology: root element is <%s>, expected <system>", system.name.c_str());
  Builder b;
  for (const auto& c : system.children)
    if (c->name == "cpu") WEFT_RETURN_IF_ERROR(b.cpu(*c));
  WEFT_RETURN_IF_ERROR(b.finish());
  return std::move(b.t);
}

Result<Topology> loadTopologyFile(const std::string& path) {
  WEFT_ASSIGN_OR_RETURN(std::unique_ptr<XmlNode> root, readXmlFile(path));
  auto topo = topologyFromXml(*root);
  if (!topo.ok()) return errorStatus(ncclInvalidArgument, "%s: %s", path.c_str(), topo.status().message().c_str());
  return topo;
}

std::unique_ptr<XmlNode> topologyToXml(const Topology& t) {
  auto root = std::make_unique<XmlNode>();
  root->name = "system";
  root->set("version", "1");
  for (int c : t.nodesOf(NodeType::kCpu)) {
    const Node& n = t.node(c);
    XmlNode* x = root->add("cpu");
    x->set("numaid", n.id);
    if (!n.arch.empty()) x->set("arch", n.arch);
    if (!n.vendor.empty()) x->set("vendor", n.vendor);
    if (n.model) x->set("modelid", std::to_string(n.model));
    for (const auto& kv : n.extra) x->set(kv.first, kv.second);
    writeChildren(t, c, x);
  }
  return root;
}

}  // namespace weft::graph
