#include "graph/search.h"

#include <algorithm>
#include <functional>

namespace weft::graph {
namespace {

constexpr long kMaxSearchSteps = 200000;
constexpr size_t kMaxCycles = 64;

int cpuOf(const Topology& t, int node) {
  for (int x = node; x >= 0; x = t.node(x).parent)
    if (t.node(x).type == NodeType::kCpu) return x;
  return -1;
}

double ringBandwidth(const Topology& t, const std::vector<int>& gpus, const std::vector<int>& ring) {
  double bw = 1e30;
  for (size_t i = 0; i < ring.size(); ++i) {
    const int a = gpus[static_cast<size_t>(ring[i])], b = gpus[static_cast<size_t>(ring[(i + 1) % ring.size()])];
    if (a != b) bw = std::min(bw, t.path(a, b).bw);
  }
  return ring.size() > 1 ? bw : kLocalBandwidth;
}

// NVLink Hamiltonian cycles from GPU 0 (bounded DFS).
std::vector<std::vector<int>> nvlinkCycles(const Topology& t, const std::vector<int>& gpus, long* steps) {
  const int g = static_cast<int>(gpus.size());
  auto nvl = [&](int a, int b) {
    const PathType p = t.path(gpus[static_cast<size_t>(a)], gpus[static_cast<size_t>(b)]).type;
    return p == PathType::kNvl;
  };
  std::vector<std::vector<int>> cycles;
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
  if (g > 1) dfs();
  return cycles;
}

// GPUs grouped by CPU socket, each group in bus order.
std::vector<int> socketOrder(const Topology& t, const std::vector<int>& gpus) {
  std::vector<int> order(gpus.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    const int ca = cpuOf(t, gpus[static_cast<size_t>(a)]), cb = cpuOf(t, gpus[static_cast<size_t>(b)]);
    if (ca != cb) return ca < cb;
    return t.node(gpus[static_cast<size_t>(a)]).id < t.node(gpus[static_cast<size_t>(b)]).id;
  });
  return order;
}

// The NETs closest to each GPU: (best path type, then bandwidth).
int closestNet(const Topology& t, int gpu, const std::vector<int>& nets, PathType* type) {
  int best = -1;
  for (int n : nets) {
    const Path& p = t.path(n, gpu);
    if (best < 0 || p.type < t.path(best, gpu).type ||
        (p.type == t.path(best, gpu).type && p.bw > t.path(best, gpu).bw))
      best = n;
  }
  if (type) *type = best < 0 ? PathType::kDis : t.path(best, gpu).type;
  return best;
}

}  // namespace

RingSearch searchRings(const Topology& t, int channels) {
  RingSearch r;
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
  const int g = static_cast<int>(gpus.size());
  channels = std::max(1, channels);
  std::vector<std::vector<int>> base;
  std::vector<std::vector<int>> cycles = nvlinkCycles(t, gpus, &r.searchSteps);
  if (!cycles.empty()) {
    std::stable_sort(cycles.begin(), cycles.end(), [&](const auto& a, const auto& b) {
      return ringBandwidth(t, gpus, a) > ringBandwidth(t, gpus, b);
    });
    const double best = ringBandwidth(t, gpus, cycles[0]);
    for (const auto& c : cycles)
      if (ringBandwidth(t, gpus, c) >= best) base.push_back(c);  // only the fastest cycles
    r.nvlinkOnly = true;
  } else {
    std::vector<int> order = socketOrder(t, gpus);
    base.push_back(order);
    std::reverse(order.begin(), order.end());
    if (g > 2) base.push_back(order);  // the other direction uses the other half of each link
  }
  // Channel c: base ring c mod |base|, rotated to start at a GPU close to a NET.
  const std::vector<int> nets = t.nodesOf(NodeType::kNet);
  PathType bestNetType = PathType::kDis;
  std::vector<int> nearNet;
  for (int i = 0; i < g; ++i) {
    PathType type;
    closestNet(t, gpus[static_cast<size_t>(i)], nets, &type);
    if (type < bestNetType) nearNet.clear(), bestNetType = type;
    if (type == bestNetType && type != PathType::kDis) nearNet.push_back(i);
  }
  for (int c = 0; c < channels; ++c) {
    std::vector<int> ring = g > 0 ? base[static_cast<size_t>(c) % base.size()] : std::vector<int>{};
    int net = -1;
    if (!nearNet.empty()) {
      const int start = nearNet[static_cast<size_t>(c) % nearNet.size()];
      std::rotate(ring.begin(), std::find(ring.begin(), ring.end(), start), ring.end());
      net = closestNet(t, gpus[static_cast<size_t>(start)], nets, nullptr);
    }
    r.rings.push_back(ring);
    r.nets.push_back(net);
  }
  r.bwPerChannel = g > 0 ? ringBandwidth(t, gpus, r.rings[0]) : 0;
  const std::vector<int>& ring = r.rings[0];
  for (size_t i = 0; ring.size() > 1 && i < ring.size(); ++i) {
    const int a = gpus[static_cast<size_t>(ring[i])], b = gpus[static_cast<size_t>(ring[(i + 1) % ring.size()])];
    r.worstType = std::max(r.worstType, t.path(a, b).type);
    r.socketCrossings += cpuOf(t, a) != cpuOf(t, b);
  }
  return r;
}

ChannelPlan buildChannelPlan(const Topology& host, int nnodes, int channels) {
  ChannelPlan plan;
  plan.intra = searchRings(host, channels);
  plan.ranksPerNode = static_cast<int>(host.nodesOf(NodeType::kGpu).size());
  plan.nnodes = nnodes;
  plan.nranks = nnodes * plan.ranksPerNode;
  NodeTree tree0, tree1;
  doubleBinaryTree(nnodes, &tree0, &tree1);
  for (size_t c = 0; c < plan.intra.rings.size(); ++c) {
    const std::vector<int>& local = plan.intra.rings[c];
    std::vector<int> ring;
    std::vector<std::vector<int>> chains(static_cast<size_t>(nnodes));
    for (int node = 0; node < nnodes; ++node)
      for (int l : local) {
        ring.push_back(node * plan.ranksPerNode + l);
        chains[static_cast<size_t>(node)].push_back(node * plan.ranksPerNode + l);
      }
    plan.rings.push_back(std::move(ring));
    plan.trees.push_back(rankTree(c % 2 == 0 ? tree0 : tree1, chains, plan.nranks));
  }
  return plan;
}

}  // namespace weft::graph
