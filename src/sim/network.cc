#include "sim/network.h"

#include <algorithm>

namespace weft::sim {
namespace {

constexpr double kBytesPerUsPerGBs = 1e3;

}  // namespace

Network::Network(const ClusterShape& shape, const tuning::LinkFigures& links)
    : shape_(shape),
      links_(links),
      nics_(std::max(1, links.nicsPerNode)),
      ports_(2 * shape.nranks() + 2 * shape.nodes * nics_),
      users_(kMaxPhases) {}

int32_t Network::users(int port, int phase) const {
  const std::vector<int32_t>& table = users_[static_cast<size_t>(phase)];
  return table.empty() ? 0 : table[static_cast<size_t>(port)];
}

int Network::egressPort(const Flow& f) const {
  if (sameNode(f.fromRank, f.toRank)) return f.fromRank;
  const int node = f.fromRank / shape_.ranksPerNode;
  return 2 * shape_.nranks() + node * nics_ + f.rail % nics_;
}

int Network::ingressPort(const Flow& f) const {
  if (sameNode(f.fromRank, f.toRank)) return shape_.nranks() + f.toRank;
  const int node = f.toRank / shape_.ranksPerNode;
  return 2 * shape_.nranks() + (shape_.nodes + node) * nics_ + f.rail % nics_;
}

void Network::count(const std::vector<Flow>& flows, int copies) {
  for (const Flow& f : flows) {
    std::vector<int32_t>& table = users_[static_cast<size_t>(f.phase)];
    if (table.empty()) table.assign(static_cast<size_t>(ports_), 0);
    table[static_cast<size_t>(egressPort(f))] += copies;
    table[static_cast<size_t>(ingressPort(f))] += copies;
  }
}

Network::Cost Network::cost(const Flow& f) const {
  const bool intra = sameNode(f.fromRank, f.toRank);
  const double portGBs = intra ? links_.intraGBs : links_.interGBs;
  const int sharing = std::max({1, users(egressPort(f), f.phase), users(ingressPort(f), f.phase)});
  const double gbs = std::min(links_.intraGBs, portGBs / sharing);
  return Cost{intra ? links_.intraLatUs : links_.interLatUs, 1.0 / (gbs * kBytesPerUsPerGBs)};
}

}  // namespace weft::sim
