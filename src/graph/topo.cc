#include "graph/topo.h"

#include <algorithm>
#include <cctype>
#include <queue>

namespace weft::graph {

const char* nodeTypeName(NodeType t) {
  static const char* kNames[] = {"GPU", "PCI", "NVS", "CPU", "NIC", "NET"};
  return kNames[static_cast<int>(t)];
}

const char* pathTypeName(PathType t) {
  static const char* kNames[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
  return kNames[static_cast<int>(t)];
}

bool parsePathType(const std::string& name, PathType* out) {
  std::string upper = name;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  for (int t = 0; t <= static_cast<int>(PathType::kDis); ++t)
    if (upper == pathTypeName(static_cast<PathType>(t))) return (*out = static_cast<PathType>(t)), true;
  return false;
}

int Topology::addNode(Node node) {
  nodes_.push_back(std::move(node));
  links_.emplace_back();
  return static_cast<int>(nodes_.size()) - 1;
}

void Topology::connect(int a, int b, LinkType type, double bw) {
  links_[static_cast<size_t>(a)].push_back({b, type, bw});
  links_[static_cast<size_t>(b)].push_back({a, type, bw});
}

void Topology::addBandwidth(int a, int b, LinkType type, double bw) {
  bool found = false;
  for (int side = 0; side < 2; ++side) {
    const int from = side ? b : a, to = side ? a : b;
    for (Link& l : links_[static_cast<size_t>(from)])
      if (l.to == to && l.type == type) l.bw += bw, found = true;
  }
  if (!found) connect(a, b, type, bw);
}

std::vector<int> Topology::nodesOf(NodeType type) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].type == type) out.push_back(static_cast<int>(i));
  return out;
}

namespace {

struct Label {
  double bw = -1;
  int hops = 0;
  int parent = -1;
  LinkType via = LinkType::kLoc;
};

// A path may pass through a GPU only from NVLink to NVLink (NVB). (A NIC
// has one PCI side and its ports, so passing through it is always between
// the two.)
bool mayTraverse(const Node& n, LinkType in, LinkType out) {
  if (n.type == NodeType::kGpu) return in == LinkType::kNvl && out == LinkType::kNvl;
  return true;
}

}  // namespace

void Topology::computePaths() {
  const size_t n = nodes_.size();
  paths_.assign(n, {});
  for (size_t src = 0; src < n; ++src) {
    if (nodes_[src].type != NodeType::kGpu && nodes_[src].type != NodeType::kNet) continue;
    // Widest path first, then fewest hops (a Dijkstra on (bw desc, hops asc)).
    std::vector<Label> best(n);
    best[src] = {kLocalBandwidth * 1e3, 0, -1, LinkType::kLoc};
    using Item = std::pair<std::pair<double, int>, size_t>;  // (-bw, hops), node
    std::priority_queue<Item, std::vector<Item>, std::greater<Item>> queue;
    queue.push({{-best[src].bw, 0}, src});
    std::vector<char> done(n, 0);
    // A GPU's direct NVLink to another GPU is their path (NVL, that link's
    // bandwidth), as in NCCL, even where a wider route through other GPUs
    // exists (a DGX-1's single links next to its double ones): rings count
    // the direct link, and a route through GPUs would load theirs.
    std::vector<char> pinned(n, 0);
    const bool gpuSource = nodes_[src].type == NodeType::kGpu;
    while (!queue.empty()) {
      const size_t u = queue.top().second;
      queue.pop();
      if (done[u]) continue;
      done[u] = 1;
      for (const Link& l : links_[u]) {
        if (u != src && !mayTraverse(nodes_[u], best[u].via, l.type)) continue;
        const size_t v = static_cast<size_t>(l.to);
        if (pinned[v]) continue;
        if (gpuSource && u == src && l.type == LinkType::kNvl && nodes_[v].type == NodeType::kGpu) {
          pinned[v] = 1;
          best[v] = {l.bw, 1, static_cast<int>(u), l.type};
          queue.push({{-l.bw, 1}, v});
          continue;
        }
        const double bw = std::min(best[u].bw, l.bw);
        const int hops = best[u].hops + 1;
        if (bw > best[v].bw || (bw == best[v].bw && hops < best[v].hops)) {
          best[v] = {bw, hops, static_cast<int>(u), l.type};
          queue.push({{-bw, hops}, v});
        }
      }
    }
    std::vector<Path>& row = paths_[src];
    row.assign(n, Path{});
    for (size_t dst = 0; dst < n; ++dst) {
      if (best[dst].bw < 0) continue;
      Path& p = row[dst];
      p.bw = dst == src ? kLocalBandwidth : best[dst].bw;
      p.hops = best[dst].hops;
      p.prev = best[dst].parent;
      if (dst == src) {
        p.type = PathType::kLoc;
        continue;
      }
      bool allNvl = true, allC2c = true, net = false, sysLink = false, viaGpu = false;
      int pciSwitches = 0, cpus = 0;
      for (size_t x = dst; best[x].parent >= 0; x = static_cast<size_t>(best[x].parent)) {
        allNvl = allNvl && best[x].via == LinkType::kNvl;
        allC2c = allC2c && best[x].via == LinkType::kC2c;
        net = net || best[x].via == LinkType::kNet;
        sysLink = sysLink || best[x].via == LinkType::kSys;
        const size_t mid = static_cast<size_t>(best[x].parent);
        if (mid == src) continue;
        viaGpu = viaGpu || nodes_[mid].type == NodeType::kGpu;
        pciSwitches += nodes_[mid].type == NodeType::kPci;
        cpus += nodes_[mid].type == NodeType::kCpu;
      }
      p.type = net                   ? PathType::kNet
               : allNvl              ? (viaGpu ? PathType::kNvb : PathType::kNvl)
               : allC2c              ? PathType::kC2c
               : sysLink || cpus > 1 ? PathType::kSys
               : cpus == 1           ? PathType::kPhb
               : pciSwitches > 1     ? PathType::kPxb
                                     : PathType::kPix;
    }
  }
  classifyNetPaths();
}

// NCCL's two GPU-NIC classes on top of the physical ones, in NCCL's order:
// P2C first, then PXN (which may replace a P2C path, as in NCCL).
void Topology::classifyNetPaths() {
  ncclPaths_.clear();
  const std::vector<int> gpus = nodesOf(NodeType::kGpu), nets = nodesOf(NodeType::kNet);
  for (int g : gpus)
    for (int n : nets) {
      if (path(g, n).type <= PathType::kP2c) continue;
      // A CPU the GPU reaches over C2C, with the NIC in its PCI tree.
      for (const Link& l : links(g)) {
        if (l.type != LinkType::kC2c || nodes_[static_cast<size_t>(l.to)].type != NodeType::kCpu) continue;
        const Path& toCpu = path(n, l.to);
        if (toCpu.type != PathType::kPix && toCpu.type != PathType::kPxb) continue;
        Path p2c = path(g, n);
        p2c.type = PathType::kP2c;
        p2c.bw = std::min(l.bw, toCpu.bw);
        p2c.hops = toCpu.hops + 1;
        ncclPaths_[{g, n}] = {p2c, -1};
        Path back = path(n, g);
        back.type = PathType::kP2c;
        back.bw = p2c.bw;
        back.hops = p2c.hops;
        ncclPaths_[{n, g}] = {back, -1};
        break;
      }
    }
  for (int n : nets) {
    // The NIC's nearest GPU: best class, then bandwidth, then the first.
    int local = -1;
    for (int g : gpus) {
      const Path p = ncclPath(n, g);
      if (p.type == PathType::kDis) continue;
      const Path best = local < 0 ? Path{} : ncclPath(n, local);
      if (local < 0 || p.type < best.type || (p.type == best.type && p.bw > best.bw)) local = g;
    }
    if (local < 0) continue;
    const Path peerToNet = ncclPath(local, n);
    if (peerToNet.type > PathType::kPxb) continue;
    for (int g : gpus) {
      if (g == local || path(local, g).type > PathType::kNvl) continue;
      const Path mine = ncclPath(g, n);
      if (!(peerToNet.bw > mine.bw || mine.type > PathType::kPxb)) continue;
      Path pxn = mine;
      pxn.type = PathType::kPxn;
      pxn.bw = std::min(path(g, local).bw, peerToNet.bw);
      pxn.hops = path(g, local).hops + peerToNet.hops;
      ncclPaths_[{g, n}] = {pxn, local};
    }
  }
}

Path Topology::ncclPath(int from, int to) const {
  auto it = ncclPaths_.find({from, to});
  return it != ncclPaths_.end() ? it->second.path : path(from, to);
}

int Topology::pxnPeer(int gpu, int net) const {
  auto it = ncclPaths_.find({gpu, net});
  return it != ncclPaths_.end() ? it->second.peer : -1;
}

const Path& Topology::path(int from, int to) const {
  static const Path kNone;
  const auto& row = paths_[static_cast<size_t>(from)];
  return row.empty() ? kNone : row[static_cast<size_t>(to)];
}

std::vector<Hop> Topology::route(int from, int to) const {
  std::vector<Hop> hops;
  if (from == to || path(from, to).type == PathType::kDis) return hops;
  for (int x = to; x != from;) {
    const int prev = path(from, x).prev;
    if (prev < 0) return {};
    // Of parallel links the widest, as the path search took it.
    const auto& links = links_[static_cast<size_t>(prev)];
    size_t pick = links.size();
    for (size_t i = 0; i < links.size(); ++i)
      if (links[i].to == x && (pick == links.size() || links[i].bw > links[pick].bw)) pick = i;
    if (pick == links.size()) return {};
    hops.push_back({prev, pick});
    x = prev;
  }
  std::reverse(hops.begin(), hops.end());
  return hops;
}

double cpuInterconnectBandwidth(const Node& cpu) {
  return cpuInterconnectBandwidth(cpu.arch, cpu.vendor, cpu.family, cpu.model);
}

Topology syntheticTopology(int devices, double shmGbs, double nicGbs, const std::vector<std::string>& nics) {
  Topology t;
  Node cpu = makeNode(NodeType::kCpu, "0");
  cpu.dev = 0;
  const int c = t.addNode(cpu);
  for (int d = 0; d < devices; ++d) {
    Node dev = makeNode(NodeType::kGpu, "host-rank-" + std::to_string(d));
    dev.dev = d;
    dev.rank = d;
    dev.parent = c;
    t.connect(t.addNode(dev), c, LinkType::kPci, shmGbs);
  }
  const std::vector<std::string> names = nics.empty() ? std::vector<std::string>{"net0"} : nics;
  for (size_t i = 0; i < names.size(); ++i) {
    Node nic = makeNode(NodeType::kNic, "nic" + std::to_string(i));
    nic.parent = c;
    const int n = t.addNode(nic);
    t.connect(n, c, LinkType::kPci, nicGbs);
    Node net = makeNode(NodeType::kNet, names[i]);
    net.dev = static_cast<int>(i);
    net.speedGbs = nicGbs;
    net.parent = n;
    t.connect(t.addNode(net), n, LinkType::kPci, nicGbs);
  }
  t.computePaths();
  return t;
}

}  // namespace weft::graph
