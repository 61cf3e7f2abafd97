#include "sim/network.h"

#include <algorithm>

namespace weft::sim {
namespace {

constexpr double kBytesPerUsPerGBs = 1e3;

}  // namespace

Network::Network(const ClusterShape& shape, const tuning::LinkFigures& links)
    : shape_(shape), links_(links), nics_(std::max(1, links.nicsPerNode)) {
  const int64_t ports = 2 * static_cast<int64_t>(shape.nranks()) + 2 * static_cast<int64_t>(shape.nodes) * nics_;
  users_.assign(static_cast<size_t>(ports * kMaxPhases), 0);
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
    users_[static_cast<size_t>(index(egressPort(f), f.phase))] += copies;
    users_[static_cast<size_t>(index(ingressPort(f), f.phase))] += copies;
  }
}

Network::Cost Network::cost(const Flow& f) const {
  const bool intra = sameNode(f.fromRank, f.toRank);
  const double portGBs = intra ? links_.intraGBs : links_.interGBs;
  const int users = std::max({1, users_[static_cast<size_t>(index(egressPort(f), f.phase))],
                              users_[static_cast<size_t>(index(ingressPort(f), f.phase))]});
  const double gbs = std::min(links_.intraGBs, portGBs / users);
  return Cost{intra ? links_.intraLatUs : links_.interLatUs, 1.0 / (gbs * kBytesPerUsPerGBs)};
}

}  // namespace weft::sim
