#include "graph/topo_xml.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <map>
#include <set>

namespace weft::graph {
namespace {

constexpr const char* kNvSwitchClass = "0x068000";
constexpr const char* kNvlinkCpuClass = "0x068001";  // POWER9's NVLink to the CPU
constexpr const char* kGpuClass = "0x030200";
// Bounds on numbers a file gives; real machines stay far inside them, and
// beyond them a value is a corrupt file, not a machine.
constexpr long kMaxDevIndex = 1 << 16;
constexpr long kMaxLinkCount = 64;  // NVLinks of one element (B200 has 18 per GPU)
constexpr long kMaxPciWidth = 64;
constexpr long kMaxSm = 10000;
constexpr long kMaxC2cMbps = 10000000;
constexpr double kDefaultNetMbps = 10000;  // a port without a usable speed, as NCCL assumes
constexpr int kMaxOfType = 256;            // NCCL's limit of nodes of one type on one host

std::string get(const XmlNode& n, const char* key, const char* fallback = "") {
  const std::string* v = n.attr(key);
  return v ? *v : fallback;
}

// An integer attribute in [lo, hi], `fallback` when absent or empty.
Result<long> intAttr(const XmlNode& n, const char* key, long fallback, long lo, long hi) {
  const std::string* v = n.attr(key);
  if (v == nullptr || v->empty()) return fallback;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(v->c_str(), &end, 0);
  if (*end != '\0' || errno == ERANGE || value < lo || value > hi)
    return errorStatus(ncclInvalidArgument, "line %d: <%s %s=\"%s\">: expected an integer from %ld to %ld", n.line,
                       n.name.c_str(), key, v->c_str(), lo, hi);
  return value;
}

// Attributes we interpret are rebuilt from the model on output; the rest are
// carried through untouched.
std::vector<std::pair<std::string, std::string>> extras(const XmlNode& n, std::set<std::string> interpreted) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& kv : n.attrs)
    if (!interpreted.count(kv.first)) out.push_back(kv);
  return out;
}

const XmlNode* firstChild(const XmlNode& x, const char* name) {
  for (const auto& c : x.children)
    if (c->name == name) return c.get();
  return nullptr;
}

struct Builder {
  Topology t;
  struct NvLink {
    int gpu;
    std::string target, tclass;
    int count;
  };
  std::vector<NvLink> nvlinks;
  std::map<std::string, int> busLine;  // bus id -> line that declared it
  int ofType[static_cast<int>(NodeType::kCount)] = {};

  Status room(NodeType type, const XmlNode& at) {
    if (++ofType[static_cast<int>(type)] <= kMaxOfType) return okStatus();
    return errorStatus(ncclInvalidArgument, "line %d: more than %d %s nodes in one host (at most %d, as in NCCL)",
                       at.line, kMaxOfType, nodeTypeName(type), kMaxOfType);
  }

  Status nets(const XmlNode& nic, int nicNode) {
    for (const auto& c : nic.children) {
      if (c->name != "net") continue;
      WEFT_RETURN_IF_ERROR(room(NodeType::kNet, *c));
      Node net = makeNode(NodeType::kNet, get(*c, "name"));
      WEFT_ASSIGN_OR_RETURN(long dev, intAttr(*c, "dev", -1, -1, kMaxDevIndex));
      WEFT_ASSIGN_OR_RETURN(long mbps, intAttr(*c, "speed", -1, LONG_MIN, LONG_MAX));
      net.dev = static_cast<int>(dev);
      net.speedGbs = netBandwidth(mbps > 0 ? static_cast<double>(mbps) : kDefaultNetMbps);
      net.parent = nicNode;
      net.extra = extras(*c, {"name", "dev", "speed"});
      t.connect(t.addNode(net), nicNode, LinkType::kPci, net.speedGbs);
    }
    return okStatus();
  }

  Status gpu(const XmlNode& g, Node* n) {
    WEFT_ASSIGN_OR_RETURN(long dev, intAttr(g, "dev", -1, -1, kMaxDevIndex));
    WEFT_ASSIGN_OR_RETURN(long sm, intAttr(g, "sm", 0, 0, kMaxSm));
    WEFT_ASSIGN_OR_RETURN(long rank, intAttr(g, "rank", -1, -1, INT_MAX));
    n->dev = static_cast<int>(dev);
    n->sm = static_cast<int>(sm);
    n->rank = static_cast<int>(rank);
    n->gpuExtra = extras(g, {"dev", "sm", "rank"});
    if (const XmlNode* c2c = firstChild(g, "c2c")) {
      WEFT_ASSIGN_OR_RETURN(long mbps, intAttr(*c2c, "bw", 0, 0, kMaxC2cMbps));
      WEFT_ASSIGN_OR_RETURN(long count, intAttr(*c2c, "count", 1, 0, kMaxLinkCount));
      n->c2cMbps = static_cast<int>(mbps);
      n->c2cCount = static_cast<int>(count);
    }
    return okStatus();
  }

  Status pci(const XmlNode& x, int parent, int cpu) {
    const std::string bus = get(x, "busid");
    if (bus.empty()) return errorStatus(ncclInvalidArgument, "line %d: <pci> without a busid attribute", x.line);
    auto [seen, fresh] = busLine.emplace(bus, x.line);
    if (!fresh)
      return errorStatus(ncclInvalidArgument, "line %d: <pci busid=\"%s\"> repeats the device of line %d", x.line,
                         bus.c_str(), seen->second);
    WEFT_ASSIGN_OR_RETURN(long width, intAttr(x, "link_width", 0, 0, kMaxPciWidth));
    const XmlNode* g = firstChild(x, "gpu");
    const XmlNode* nic = g ? nullptr : firstChild(x, "nic");
    Node n = makeNode(g ? NodeType::kGpu : nic ? NodeType::kNic : NodeType::kPci, bus);
    n.parent = parent;
    n.extra = extras(x, {"busid"});
    if (g) WEFT_RETURN_IF_ERROR(gpu(*g, &n));
    WEFT_RETURN_IF_ERROR(room(n.type, x));
    const int id = t.addNode(n);
    t.connect(id, parent, LinkType::kPci, pciBandwidth(static_cast<int>(width), get(x, "link_speed")));
    if (g) {
      if (n.c2cMbps > 0 && n.c2cCount > 0) t.connect(id, cpu, LinkType::kC2c, c2cBandwidth(n.c2cMbps, n.c2cCount));
      for (const auto& c : g->children) {
        if (c->name != "nvlink") continue;
        WEFT_ASSIGN_OR_RETURN(long count, intAttr(*c, "count", 1, 0, kMaxLinkCount));
        if (count > 0) nvlinks.push_back({id, get(*c, "target"), get(*c, "tclass"), static_cast<int>(count)});
      }
    }
    if (nic) WEFT_RETURN_IF_ERROR(nets(*nic, id));
    if (!g && !nic)
      for (const auto& c : x.children)
        if (c->name == "pci") WEFT_RETURN_IF_ERROR(pci(*c, id, cpu));
    return okStatus();
  }

  Status cpu(const XmlNode& x) {
    Node n = makeNode(NodeType::kCpu, get(x, "numaid", "0"));
    WEFT_ASSIGN_OR_RETURN(long numa, intAttr(x, "numaid", 0, -1, kMaxDevIndex));
    WEFT_ASSIGN_OR_RETURN(long family, intAttr(x, "familyid", 0, 0, INT_MAX));
    WEFT_ASSIGN_OR_RETURN(long model, intAttr(x, "modelid", 0, 0, INT_MAX));
    n.dev = static_cast<int>(numa);
    n.arch = get(x, "arch");
    n.vendor = get(x, "vendor");
    n.family = static_cast<int>(family);
    n.model = static_cast<int>(model);
    n.extra = extras(x, {"numaid", "arch", "vendor", "familyid", "modelid"});
    WEFT_RETURN_IF_ERROR(room(NodeType::kCpu, x));
    const int id = t.addNode(n);
    for (const auto& c : x.children) {
      if (c->name == "pci") WEFT_RETURN_IF_ERROR(pci(*c, id, id));
      if (c->name == "nic") {
        // A NIC without a PCI device (virtual, or a socket interface) hangs
        // from the CPU with nothing between them to limit it.
        Node nicNode = makeNode(NodeType::kNic, "");
        nicNode.parent = id;
        WEFT_RETURN_IF_ERROR(room(NodeType::kNic, *c));
        const int nicId = t.addNode(nicNode);
        t.connect(nicId, id, LinkType::kPci, kLocalBandwidth);
        WEFT_RETURN_IF_ERROR(nets(*c, nicId));
      }
    }
    return okStatus();
  }

  // NETs without a dev attribute get the lowest indices no other NET has.
  void numberNets() {
    std::set<int> used;
    for (int n : t.nodesOf(NodeType::kNet)) used.insert(t.node(n).dev);
    int next = 0;
    for (int n : t.nodesOf(NodeType::kNet)) {
      if (t.node(n).dev >= 0) continue;
      while (used.count(next)) ++next;
      t.node(n).dev = next;
      used.insert(next);
    }
  }

  int cpuOf(int node) const {
    int x = node;
    while (x >= 0 && t.node(x).type != NodeType::kCpu) x = t.node(x).parent;
    return x;
  }

  void linkNvlinks() {
    std::map<std::string, int> byBus;
    for (int g : t.nodesOf(NodeType::kGpu)) byBus[t.node(g).id] = g;
    int nvs = -1;
    std::map<std::pair<int, int>, int> gpuPairs;  // both sides list the link: count it once
    for (const NvLink& l : nvlinks) {
      const double bw = l.count * nvlinkBandwidth(t.node(l.gpu).sm);
      auto it = byBus.find(l.target);
      const bool toGpu = l.tclass.compare(0, 4, "0x03") == 0 || (l.tclass.empty() && it != byBus.end());
      if (toGpu) {
        // A target that is not a GPU of this file (trimmed away) or the GPU
        // itself (a VM whose driver reports the links' remote end as the
        // GPU) adds nothing to plan with.
        if (it == byBus.end() || it->second == l.gpu) continue;
        const std::pair<int, int> key(std::min(l.gpu, it->second), std::max(l.gpu, it->second));
        gpuPairs[key] = std::max(gpuPairs[key], l.count);
      } else if (l.tclass == kNvlinkCpuClass) {
        const int cpu = cpuOf(l.gpu);
        if (cpu >= 0) t.addBandwidth(l.gpu, cpu, LinkType::kNvl, bw);
      } else {  // NVSwitch, named or not (VMs hide them): one switch node, as NCCL has
        if (nvs < 0) nvs = t.addNode(makeNode(NodeType::kNvs, "nvswitch"));
        t.addBandwidth(l.gpu, nvs, LinkType::kNvl, bw);
      }
    }
    for (const auto& [pair, count] : gpuPairs)
      t.connect(pair.first, pair.second, LinkType::kNvl, count * nvlinkBandwidth(t.node(pair.first).sm));
  }

  Status finish() {
    const std::vector<int> cpus = t.nodesOf(NodeType::kCpu);
    for (size_t i = 0; i < cpus.size(); ++i)
      for (size_t j = i + 1; j < cpus.size(); ++j)
        t.connect(cpus[i], cpus[j], LinkType::kSys, cpuInterconnectBandwidth(t.node(cpus[i])));
    numberNets();
    linkNvlinks();
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

void writeGpu(const Topology& t, int id, XmlNode* x) {
  const Node& n = t.node(id);
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
    nv->set("tclass", peer.type == NodeType::kNvs   ? kNvSwitchClass
                      : peer.type == NodeType::kCpu ? kNvlinkCpuClass
                                                    : kGpuClass);
  }
  if (n.c2cMbps > 0) {
    XmlNode* c = g->add("c2c");
    c->set("bw", std::to_string(n.c2cMbps));
    c->set("count", std::to_string(n.c2cCount));
  }
}

void writePci(const Topology& t, int id, XmlNode* parent) {
  const Node& n = t.node(id);
  XmlNode* x = parent->add("pci");
  x->set("busid", n.id);
  for (const auto& kv : n.extra) x->set(kv.first, kv.second);
  if (n.type == NodeType::kGpu)
    writeGpu(t, id, x);
  else if (n.type == NodeType::kNic)
    writeNets(t, id, x->add("nic"));
  else
    writeChildren(t, id, x);
}

}  // namespace

Result<Topology> topologyFromXml(const XmlNode& system) {
  if (system.name != "system")
    return errorStatus(ncclInvalidArgument, "line %d: root element is <%s>, expected <system>", system.line,
                       system.name.c_str());
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
    if (n.family) x->set("familyid", std::to_string(n.family));
    if (n.model) x->set("modelid", std::to_string(n.model));
    for (const auto& kv : n.extra) x->set(kv.first, kv.second);
    writeChildren(t, c, x);
  }
  return root;
}

}  // namespace weft::graph
