#include "graph/search.h"

#include <algorithm>
#include <functional>
#include <map>
#include <tuple>

namespace weft::graph {
namespace {

constexpr long kMaxSearchSteps = 200000;
constexpr size_t kMaxCycles = 64;

int cpuOf(const Topology& t, int node) {
  for (int x = node; x >= 0; x = t.node(x).parent)
    if (t.node(x).type == NodeType::kCpu) return x;
  return -1;
}

// What the search needs to know about a host, computed once.
struct HostView {
  explicit HostView(const Topology& topo) : t(topo), gpus(topo.nodesOf(NodeType::kGpu)) {
    nets = t.nodesOf(NodeType::kNet);
    for (size_t i = 0; i < gpus.size(); ++i) {
      PathType best = PathType::kDis;
      double bw = 0;
      std::vector<int> near;
      for (size_t n = 0; n < nets.size(); ++n) {
        const Path& p = t.path(nets[n], gpus[i]);
        if (p.type == PathType::kDis) continue;
        if (p.type < best || (p.type == best && p.bw > bw)) near.clear(), best = p.type, bw = p.bw;
        if (p.type == best && p.bw == bw) near.push_back(static_cast<int>(n));
      }
      netType.push_back(best);
      nearNets.push_back(near);
      hostBest = std::min(hostBest, best);
    }
  }
  int size() const { return static_cast<int>(gpus.size()); }
  int node(int local) const { return gpus[static_cast<size_t>(local)]; }
  const Path& path(int a, int b) const { return t.path(node(a), node(b)); }

  const Topology& t;
  std::vector<int> gpus;                   // node ids, by local index
  std::vector<int> nets;                   // NET node ids
  std::vector<PathType> netType;           // per local GPU: its best class to a NET
  std::vector<std::vector<int>> nearNets;  // per local GPU: positions in `nets` at that class, best bandwidth
  PathType hostBest = PathType::kDis;      // the best class any GPU has
};

double ringBandwidth(const HostView& h, const std::vector<int>& ring) {
  double bw = kLocalBandwidth;
  for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i)
    bw = std::min(bw, h.path(ring[i], ring[(i + 1) % ring.size()]).bw);
  return bw;
}

// NVLink Hamiltonian cycles from GPU 0 (bounded DFS).
std::vector<std::vector<int>> nvlinkCycles(const HostView& h, long* steps) {
  const int g = h.size();
  std::vector<std::vector<int>> cycles;
  if (g < 2) return cycles;  // no GPU (a file of the PCI tree alone), or one: no NVLink cycle
  auto nvl = [&](int a, int b) { return h.path(a, b).type == PathType::kNvl; };
  std::vector<int> order{0};
  std::vector<char> used(static_cast<size_t>(g), 0);
  used[0] = 1;
  std::function<void()> dfs = [&] {
    if (cycles.size() >= kMaxCycles || ++*steps > kMaxSearchSteps) return;
    if (static_cast<int>(order.size()) == g) {
      if (nvl(order.back(), 0)) cycles.push_back(order);
      return;
    }
    for (int next = 1; next < g; ++next) {
      if (used[static_cast<size_t>(next)] || !nvl(order.back(), next)) continue;
      used[static_cast<size_t>(next)] = 1;
      order.push_back(next);
      dfs();
      order.pop_back();
      used[static_cast<size_t>(next)] = 0;
    }
  };
  dfs();
  return cycles;
}

// GPUs grouped by CPU socket, each group in bus order.
std::vector<int> socketOrder(const HostView& h) {
  std::vector<int> order(h.gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const int ca = cpuOf(h.t, h.node(a)), cb = cpuOf(h.t, h.node(b));
    if (ca != cb) return ca < cb;
    return h.t.node(h.node(a)).id < h.t.node(h.node(b)).id;
  });
  return order;
}

// Where a cycle is opened into a ring: ring = base cycle `base` rotated to
// start at `rotation`, entering through netIn, leaving through netOut.
struct Opening {
  int base = 0, rotation = 0;
  int misses = 0;          // ends of the ring not at the host's best class to their NET (0..2)
  bool firstMiss = false;  // of which the first GPU's
  bool pxn = false;        // the last GPU reaches netOut through an NVLink peer
  int netIn = -1, netOut = -1;
};

bool nearNet(const HostView& h, int local, int netPos) {
  const auto& near = h.nearNets[static_cast<size_t>(local)];
  return h.netType[static_cast<size_t>(local)] == h.hostBest &&
         std::find(near.begin(), near.end(), netPos) != near.end();
}

// The last GPU reaches the NET through an NVLink peer that is next to it.
bool viaNvlinkPeer(const HostView& h, int local, int netPos) {
  for (int g = 0; g < h.size(); ++g)
    if (g != local && h.path(local, g).type == PathType::kNvl && nearNet(h, g, netPos)) return true;
  return false;
}

// Chooses each channel's opening among every base cycle and rotation. Key,
// most important first: the first GPU next to a NIC; the least used entry
// NIC (channels spread over every nearest NIC: one NIC's bandwidth is what a
// channel gets across hosts, so spreading matters more than where the ring
// ends); the last GPU next to its NIC; one NIC in and out (the rail); the
// last GPU next to the NIC rather than through a peer; the least used exit
// NIC; the least used base cycle (channels alternate cycles and directions,
// spreading the load over links); then the lowest base and rotation
// (determinism).
class Opener {
 public:
  Opener(const HostView& h, size_t bases, int crossNic)
      : h_(h), crossNic_(crossNic), usedIn_(h.nets.size(), 0), usedOut_(h.nets.size(), 0), usedBase_(bases, 0) {}

  std::tuple<bool, int, int, bool, bool, int, int, int, int> key(const Opening& o) const {
    // NCCL_CROSS_NIC=1: leaving by another NIC is as good as by the same one.
    return std::make_tuple(o.firstMiss, o.netIn < 0 ? 0 : usedIn_[static_cast<size_t>(o.netIn)], o.misses,
                           crossNic_ != 1 && o.netIn != o.netOut, o.pxn,
                           o.netOut < 0 ? 0 : usedOut_[static_cast<size_t>(o.netOut)],
                           usedBase_[static_cast<size_t>(o.base)], o.base, o.rotation);
  }

  // Of every base, or of base `only` when it is not -1.
  Opening best(const std::vector<std::vector<int>>& bases, int only = -1) const {
    Opening best;
    bool first = true;
    for (size_t b = 0; b < bases.size(); ++b)
      if (only < 0 || static_cast<int>(b) == only)
        for (int r = 0; r < static_cast<int>(bases[b].size()); ++r)
          for (bool cross : {false, true}) {
            if (cross && crossNic_ == 0) continue;
            Opening o = at(bases[b], r, cross);
            o.base = static_cast<int>(b);
            if (first || key(o) < key(best)) best = o;
            first = false;
          }
    return best;
  }

  void use(const Opening& o) {
    if (o.netIn >= 0) ++usedIn_[static_cast<size_t>(o.netIn)];
    if (o.netOut >= 0) ++usedOut_[static_cast<size_t>(o.netOut)];
    ++usedBase_[static_cast<size_t>(o.base)];
  }

 private:
  // The opening at rotation r: in by the least used NIC nearest the first
  // GPU; out by the same NIC (the rail) or, `cross`, the least used one
  // nearest the last GPU.
  Opening at(const std::vector<int>& cycle, int r, bool cross) const {
    const int g = static_cast<int>(cycle.size());
    const int first = cycle[static_cast<size_t>(r)], last = cycle[static_cast<size_t>((r + g - 1) % g)];
    Opening o;
    o.rotation = r;
    if (h_.nets.empty()) return o;
    o.netIn = leastUsed(h_.nearNets[static_cast<size_t>(first)], usedIn_);
    o.firstMiss = h_.netType[static_cast<size_t>(first)] != h_.hostBest;
    o.misses = o.firstMiss;
    if (cross) {
      o.netOut = leastUsed(h_.nearNets[static_cast<size_t>(last)], usedOut_);
      o.misses += h_.netType[static_cast<size_t>(last)] != h_.hostBest;
      return o;
    }
    o.netOut = o.netIn;
    if (o.netIn < 0 || nearNet(h_, last, o.netIn)) return o;
    o.pxn = viaNvlinkPeer(h_, last, o.netIn);
    o.misses += !o.pxn;
    return o;
  }

  static int leastUsed(const std::vector<int>& candidates, const std::vector<int>& used) {
    int best = -1;
    for (int n : candidates)
      if (best < 0 || used[static_cast<size_t>(n)] < used[static_cast<size_t>(best)]) best = n;
    return best;
  }

  const HostView& h_;
  int crossNic_;
  std::vector<int> usedIn_, usedOut_, usedBase_;
};

// The cycles with a lower bottleneck than the fastest, fastest first.
std::vector<std::vector<int>> slowerCycles(const HostView& h, const std::vector<std::vector<int>>& cycles) {
  double bw = 0;
  for (const auto& c : cycles) bw = std::max(bw, ringBandwidth(h, c));
  std::vector<std::vector<int>> out;
  for (const auto& c : cycles)
    if (ringBandwidth(h, c) < bw) out.push_back(c);
  std::stable_sort(out.begin(), out.end(), [&](const std::vector<int>& a, const std::vector<int>& b) {
    return ringBandwidth(h, a) > ringBandwidth(h, b);
  });
  return out;
}

// Keeps the fastest cycles, and of those the ones that open best.
std::vector<std::vector<int>> fastestCycles(const HostView& h, std::vector<std::vector<int>> cycles, int crossNic) {
  double bw = 0;
  for (const auto& c : cycles) bw = std::max(bw, ringBandwidth(h, c));
  const Opener fresh(h, 1, crossNic);
  auto misses = [&](const std::vector<int>& c) { return fresh.best({c}).misses; };
  int fewest = 3;
  for (const auto& c : cycles)
    if (ringBandwidth(h, c) >= bw) fewest = std::min(fewest, misses(c));
  std::vector<std::vector<int>> out;
  for (auto& c : cycles)
    if (ringBandwidth(h, c) >= bw && misses(c) == fewest) out.push_back(std::move(c));
  return out;
}

void summarise(const HostView& h, RingSearch* r) {
  r->bwPerChannel = h.size() > 0 ? kLocalBandwidth : 0;
  for (const auto& ring : r->rings) {
    if (h.size() > 0) r->bwPerChannel = std::min(r->bwPerChannel, ringBandwidth(h, ring));
    for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i)
      r->worstType = std::max(r->worstType, h.path(ring[i], ring[(i + 1) % ring.size()]).type);
  }
  const std::vector<int>& ring = r->rings.empty() ? std::vector<int>{} : r->rings[0];
  for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i)
    r->socketCrossings += cpuOf(h.t, h.node(ring[i])) != cpuOf(h.t, h.node(ring[(i + 1) % ring.size()]));
}

int netByDev(const HostView& h, int dev) {
  for (int n : h.nets)
    if (h.t.node(n).dev == dev) return n;
  return -1;
}

// Bandwidth left per directed link ((node, link index) -> GB/s) as rings
// are laid.
class LinkLoad {
 public:
  explicit LinkLoad(const Topology& t) : t_(t) {}
  // Lays `ring` (its hops' routes) at `speed` if every link has room.
  bool lay(const std::vector<std::vector<Hop>>& ring, double speed) {
    std::map<std::pair<int, size_t>, double> need;
    for (const auto& hop : ring)
      for (const Hop& h : hop) need[{h.node, h.link}] += speed;
    for (const auto& [key, amount] : need)
      if (left(key) + 1e-9 < amount) return false;
    for (const auto& [key, amount] : need) left_[key] = left(key) - amount;
    return true;
  }

 private:
  double left(const std::pair<int, size_t>& key) const {
    auto it = left_.find(key);
    return it != left_.end() ? it->second : t_.links(key.first)[key.second].bw;
  }
  const Topology& t_;
  std::map<std::pair<int, size_t>, double> left_;
};

}  // namespace

std::vector<int> packRings(const Topology& host, const std::vector<std::vector<int>>& fastest,
                           const std::vector<std::vector<int>>& slower, double speed, int cap) {
  const std::vector<int> gpus = host.nodesOf(NodeType::kGpu);
  std::vector<std::vector<std::vector<Hop>>> routes;
  for (const auto* set : {&fastest, &slower})
    for (const auto& cycle : *set) {
      routes.emplace_back();
      for (size_t i = 0; i < cycle.size(); ++i)
        routes.back().push_back(
            host.route(gpus[static_cast<size_t>(cycle[i])], gpus[static_cast<size_t>(cycle[(i + 1) % cycle.size()])]));
    }
  std::vector<int> out;
  LinkLoad load(host);
  // The fastest cycles in turn, while the next one fits.
  while (!fastest.empty() && static_cast<int>(out.size()) < cap) {
    const int c = static_cast<int>(out.size() % fastest.size());
    if (!load.lay(routes[static_cast<size_t>(c)], speed)) break;
    out.push_back(c);
  }
  // Then the first slower cycle that fits, again and again.
  for (bool laid = true; laid && static_cast<int>(out.size()) < cap;) {
    laid = false;
    for (size_t c = fastest.size(); c < routes.size() && !laid; ++c)
      if (load.lay(routes[c], speed)) out.push_back(static_cast<int>(c)), laid = true;
  }
  return out;
}

PathType netClass(const Topology& host, int localGpu) {
  HostView h(host);
  return h.netType[static_cast<size_t>(localGpu)];
}

bool leavesByRail(const Topology& host, int localGpu, int net) {
  HostView h(host);
  const auto it = std::find(h.nets.begin(), h.nets.end(), net);
  if (it == h.nets.end()) return false;
  const int pos = static_cast<int>(it - h.nets.begin());
  return nearNet(h, localGpu, pos) || viaNvlinkPeer(h, localGpu, pos);
}

RingSearch searchRings(const Topology& t, int channels, const SearchOptions& options) {
  RingSearch r;
  const HostView h(t);
  channels = std::max(1, channels);
  std::vector<std::vector<int>> found = nvlinkCycles(h, &r.searchSteps);
  r.slowerCycles = slowerCycles(h, found);
  std::vector<std::vector<int>> bases = fastestCycles(h, std::move(found), options.crossNic);
  r.nvlinkOnly = !bases.empty();
  r.cycles = bases;
  // At a speed the fastest cycles alone cannot fill, channels take the
  // packed rings in turn (slower cycles included).
  std::vector<int> packed;
  if (options.ringSpeed > 0 && !bases.empty() && !r.slowerCycles.empty()) {
    packed = packRings(t, bases, r.slowerCycles, options.ringSpeed, kMaxSearchChannels);
    if (std::all_of(packed.begin(), packed.end(), [&](int c) { return c < static_cast<int>(bases.size()); }))
      packed.clear();
    else
      bases.insert(bases.end(), r.slowerCycles.begin(), r.slowerCycles.end());
  }
  if (bases.empty()) {
    std::vector<int> order = socketOrder(h);
    bases.push_back(order);
    std::reverse(order.begin(), order.end());
    if (h.size() > 2) bases.push_back(order);  // the other direction uses the other half of each link
    r.cycles = bases;
  }
  Opener opener(h, bases.size(), options.crossNic);
  for (int c = 0; c < channels; ++c) {
    const int only = packed.empty() ? -1 : packed[static_cast<size_t>(c) % packed.size()];
    const Opening o = h.size() > 0 ? opener.best(bases, only) : Opening{};
    opener.use(o);
    std::vector<int> ring = bases[static_cast<size_t>(o.base)];
    std::rotate(ring.begin(), ring.begin() + o.rotation, ring.end());
    r.rings.push_back(ring);
    r.chains.push_back(ring);
    r.netIn.push_back(o.netIn < 0 ? -1 : h.nets[static_cast<size_t>(o.netIn)]);
    r.netOut.push_back(o.netOut < 0 ? -1 : h.nets[static_cast<size_t>(o.netOut)]);
  }
  summarise(h, &r);
  return r;
}

RingSearch imposeRings(const Topology& t, int channels, const ImposedGraphs& graphs) {
  if (graphs.rings.empty()) return searchRings(t, channels);
  RingSearch r;
  const HostView h(t);
  r.imposed = true;
  for (int c = 0; c < std::max(1, channels); ++c) {
    const GraphChannel& ring = graphs.rings[static_cast<size_t>(c) % graphs.rings.size()];
    r.rings.push_back(ring.gpus);
    r.chains.push_back(graphs.trees.empty() ? ring.gpus
                                            : graphs.trees[static_cast<size_t>(c) % graphs.trees.size()].gpus);
    r.netIn.push_back(netByDev(h, ring.netIn));
    r.netOut.push_back(netByDev(h, ring.netOut >= 0 ? ring.netOut : ring.netIn));
  }
  summarise(h, &r);
  r.nvlinkOnly = r.worstType <= PathType::kNvl && h.size() > 1;
  return r;
}

}  // namespace weft::graph
