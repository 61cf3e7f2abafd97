#include "graph/channel_budget.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace weft::graph {
namespace {

// NCCL 2.27's per-channel speed lists (src/graph/search.cc), GB/s, highest
// first: within one host and across hosts, for GPUs before sm_90, sm_90
// and sm_100 on.
const std::vector<double> kIntra = {40, 30, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3};
const std::vector<double> kInter = {48, 30, 28, 24, 20, 18, 15, 12, 10, 9, 7, 6, 5, 4, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kIntraSm90 = {60, 50, 40, 30, 24, 20, 15, 12, 11, 6, 3};
const std::vector<double> kInterSm90 = {48, 45, 42, 40, 30, 24, 22, 20, 17.5, 15, 12, 6, 3, 2.4, 1.2, 0.24, 0.12};
const std::vector<double> kIntraSm100 = {90, 80, 70, 60, 50, 45, 40, 30, 24, 20, 19, 18};
const std::vector<double> kInterSm100 = {96, 86,   80, 48, 45.1, 42, 40,  30,  24,   22,
                                         20, 17.5, 15, 12, 6,    3,  2.4, 1.2, 0.24, 0.12};

constexpr int kMaxCommChannels = 32;  // NCCL: MAXCHANNELS
constexpr double kDupFrom = 25.0, kDupSm90Below = 50.0, kSm90MultiHostDouble = 45.0;
constexpr double kSlowerMustGain = 1.1;
constexpr int kUnknownSm = 80;  // a file without sm attributes: plan as NCCL's default generation

int slowestSm(const Topology& host) {
  int sm = 0;
  for (int g : host.nodesOf(NodeType::kGpu)) {
    const int s = host.node(g).sm > 0 ? host.node(g).sm : kUnknownSm;
    sm = sm == 0 ? s : std::min(sm, s);
  }
  return sm == 0 ? kUnknownSm : sm;
}

const std::vector<double>& speeds(int sm, bool inter) {
  if (sm >= 100) return inter ? kInterSm100 : kIntraSm100;
  if (sm >= 90) return inter ? kInterSm90 : kIntraSm90;
  return inter ? kInter : kIntra;
}

// How many closed rings at `speed` the host's links carry (packRings: the
// fastest cycles in turn, then slower NVLink cycles where they still fit;
// NCCL's search counts bandwidth the same way). At most `cap`.
int ringsThatFit(const Topology& host, const std::vector<std::vector<int>>& cycles,
                 const std::vector<std::vector<int>>& slower, double speed, int cap) {
  if (cycles.empty() || host.nodesOf(NodeType::kGpu).size() < 2) return cap;  // one GPU: no ring hop inside the host
  return static_cast<int>(packRings(host, cycles, slower, speed, cap).size());
}

// The widest path from a GPU to another GPU (NCCL's maxBw): no channel is
// faster than it.
double widestGpuPath(const Topology& host) {
  const std::vector<int> gpus = host.nodesOf(NodeType::kGpu);
  double widest = 0;
  for (int a : gpus)
    for (int b : gpus)
      if (a != b) widest = std::max(widest, host.path(a, b).bw);
  return gpus.size() < 2 ? kLocalBandwidth : widest;
}

// The NETs channels spread over (for each GPU as near as the host allows
// to a NET, the fastest NETs at that class: the rails) and the slowest path
// bandwidth from a GPU to one of them.
void railNets(const Topology& host, int* count, double* slowest) {
  const std::vector<int> gpus = host.nodesOf(NodeType::kGpu), nets = host.nodesOf(NodeType::kNet);
  PathType best = PathType::kDis;
  for (int n : nets)
    for (int g : gpus) best = std::min(best, host.path(n, g).type);
  std::vector<double> railBw(nets.size(), -1);
  for (int g : gpus) {
    double fastest = 0;
    for (int n : nets)
      if (host.path(n, g).type == best) fastest = std::max(fastest, host.path(n, g).bw);
    for (size_t i = 0; i < nets.size(); ++i)
      if (best != PathType::kDis && host.path(nets[i], g).type == best && host.path(nets[i], g).bw == fastest)
        railBw[i] = fastest;
  }
  *count = 0;
  *slowest = 0;
  for (double bw : railBw)
    if (bw >= 0) {
      *slowest = *count == 0 ? bw : std::min(*slowest, bw);
      ++*count;
    }
}

}  // namespace

ChannelBudget channelBudget(const Topology& host, const RingSearch& search, int nnodes, int minChannels,
                            int maxChannels) {
  ChannelBudget b;
  const int sm = slowestSm(host);
  const bool inter = nnodes > 1;
  std::vector<std::vector<int>> cycles = search.cycles;
  if (cycles.empty())  // imposed rings: their distinct orders
    for (const auto& ring : search.rings)
      if (std::find(cycles.begin(), cycles.end(), ring) == cycles.end()) cycles.push_back(ring);
  int rails = 0;
  double railBw = 0;
  if (inter) railNets(host, &rails, &railBw);
  const double fastest = inter && rails > 0 ? std::min(widestGpuPath(host), railBw) : widestGpuPath(host);
  // Every listed speed up to the fastest path; the one that moves the most
  // in total wins, but a slower one must move 10% more to beat a faster one
  // (fewer, fuller channels: each costs an SM and a ring's latency).
  int bestN = 0;
  double bestSpeed = 0;
  const std::vector<double>& list = speeds(sm, inter);
  std::vector<double> candidates;
  for (double s : list)
    if (s <= fastest + 1e-9) candidates.push_back(s);
  if (candidates.empty()) candidates.push_back(fastest);  // slower than every listed speed
  for (double s : candidates) {
    int n = ringsThatFit(host, cycles, search.slowerCycles, s, kMaxSearchChannels);
    if (inter && rails > 0) n = std::min(n, rails * static_cast<int>(std::floor(railBw / s + 1e-9)));
    if (n * s > kSlowerMustGain * bestN * bestSpeed + 1e-9) bestN = n, bestSpeed = s;
  }
  if (bestN == 0) {  // not one ring at the slowest listed speed: one ring at what its links give
    bestN = 1;
    bestSpeed = search.bwPerChannel > 0 ? std::min(candidates.back(), search.bwPerChannel) : candidates.back();
  }
  b.capacity = bestN * bestSpeed;
  b.ringSpeed = bestSpeed;
  int n = bestN;
  double bw = bestSpeed;
  const bool dup = bw >= kDupFrom && !(sm > 80 && bw < kDupSm90Below && n > 4);
  if (dup) {
    const int doubled = std::min(2 * n, kMaxSearchChannels);
    bw /= (doubled + n - 1) / n;
    n = doubled;
  }
  b.searchChannels = n;
  b.bwIntra = b.bwInter = bw;
  int channels = std::min(kMaxCommChannels, 2 * n);
  if (sm >= 90 && inter && bw > kSm90MultiHostDouble && channels < 16)
    channels = std::min(kMaxCommChannels, 2 * channels);
  b.wanted = channels;
  b.channels = std::max(std::min(channels, std::max(1, maxChannels)), std::max(1, minChannels));
  return b;
}

}  // namespace weft::graph
