#include "tuning/algo.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

namespace weft::tuning {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// "ring,tree" or "^tree" -> mask of algorithms; *named: those listed by
// name without "^".
Result<uint32_t> parseList(const std::string& text, const std::string& whole, uint32_t* named) {
  std::string list = trim(text);
  const bool exclude = !list.empty() && list[0] == '^';
  if (exclude) list = list.substr(1);
  uint32_t mask = 0;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');) {
    name = lower(trim(name));
    if (name.empty()) continue;
    int found = -1;
    for (int a = 0; a < static_cast<int>(Algorithm::kCount); ++a)
      if (name == lower(algorithmName(static_cast<Algorithm>(a)))) found = a;
    if (name == "recdoubling") found = static_cast<int>(Algorithm::kButterfly);
    if (name == "rabenseifner") found = static_cast<int>(Algorithm::kHalvingDoubling);
    if (name == "hierring") found = static_cast<int>(Algorithm::kHierarchicalRing);
    if (name == "torus") found = static_cast<int>(Algorithm::kTorus2D);
    if (found < 0)
      return errorStatus(ncclInvalidArgument,
                         "NCCL_ALGO=\"%s\": unknown algorithm \"%s\" (expected Ring, Tree, OneShot, Butterfly "
                         "(RecDoubling), HalvingDoubling (Rabenseifner), HierarchicalRing (HierRing) or Torus2D "
                         "(Torus), optionally per "
                         "collective as allreduce:tree)",
                         whole.c_str(), name.c_str());
    mask |= 1u << found;
  }
  *named = exclude ? 0 : mask;
  return exclude ? ~mask : mask;
}

}  // namespace

const char* algorithmName(Algorithm algo) {
  switch (algo) {
    case Algorithm::kTree: return "Tree";
    case Algorithm::kOneShot: return "OneShot";
    case Algorithm::kButterfly: return "Butterfly";
    case Algorithm::kHalvingDoubling: return "HalvingDoubling";
    case Algorithm::kHierarchicalRing: return "HierarchicalRing";
    case Algorithm::kTorus2D: return "Torus2D";
    default: return "Ring";
  }
}

const char* collKindName(CollKind coll) {
  static const char* kNames[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce"};
  return kNames[static_cast<int>(coll)];
}

Result<AlgoFilter> AlgoFilter::parse(const std::string& text) {
  AlgoFilter filter;
  std::stringstream in(text);
  for (std::string entry; std::getline(in, entry, ';');) {
    entry = trim(entry);
    if (entry.empty()) continue;
    const size_t colon = entry.find(':');
    if (colon == std::string::npos) {
      uint32_t named = 0;
      WEFT_ASSIGN_OR_RETURN(uint32_t mask, parseList(entry, text, &named));
      for (uint32_t& m : filter.mask_) m = mask;
      for (uint32_t& m : filter.named_) m = named;
      continue;
    }
    const std::string coll = lower(trim(entry.substr(0, colon)));
    int index = -1;
    for (int c = 0; c < static_cast<int>(CollKind::kCount); ++c)
      if (coll == lower(collKindName(static_cast<CollKind>(c)))) index = c;
    if (index < 0)
      return errorStatus(ncclInvalidArgument,
                         "NCCL_ALGO=\"%s\": unknown collective \"%s\" (expected allreduce, allgather, "
                         "reducescatter, broadcast or reduce)",
                         text.c_str(), coll.c_str());
    uint32_t named = 0;
    WEFT_ASSIGN_OR_RETURN(uint32_t mask, parseList(entry.substr(colon + 1), text, &named));
    filter.mask_[index] = mask;
    filter.named_[index] = named;
  }
  return filter;
}

namespace {

// Ring: 2(k-1) dependent steps for AllReduce (k-1 otherwise), each as slow
// as its slowest hop; every rank moves 2(k-1)/k of the bytes (AllReduce).
double ringEstimate(CollKind coll, double kb, const Shape& shape, const LinkCosts& costs) {
  const double k = shape.nranks;
  const bool multiNode = shape.nnodes > 1;
  const double hop = multiNode ? costs.interLatUs : costs.intraLatUs;
  const double bw = multiNode ? costs.interGBs : costs.intraGBs;
  const double steps = coll == CollKind::kAllReduce ? 2 * (k - 1) : k - 1;
  const double factor = coll == CollKind::kAllReduce                                ? 2 * (k - 1) / k
                        : coll == CollKind::kBroadcast || coll == CollKind::kReduce ? 1
                                                                                    : (k - 1) / k;
  return steps * hop + factor * kb / bw;
}

// Tree: up then down, the inter-node levels and the intra-node chain twice;
// every byte crosses each link once per direction.
double treeEstimate(double kb, const Shape& shape, const LinkCosts& costs) {
  const bool multiNode = shape.nnodes > 1;
  const double interLevels = multiNode ? std::max(1, shape.treeDepth - (shape.ranksPerNode - 1)) : 0;
  const double chain = std::max(0, shape.ranksPerNode - 1);
  const double lat = 2 * (interLevels * costs.interLatUs + chain * costs.intraLatUs);
  return lat + 2 * kb / (multiNode ? costs.interGBs : costs.intraGBs);
}

// One-shot: one hand-off. AllReduce: every rank writes its input to k-1
// peers and combines k inputs; measured on the host backend its time per
// byte is about the ring's at 2 ranks and twice it at 4: k-1 times the
// bytes. Broadcast: the root writes k-1 copies. AllGather and ReduceScatter
// move what their ring moves.
double oneShotEstimate(CollKind coll, double kb, const Shape& shape, const LinkCosts& costs) {
  const double k = shape.nranks;
  const double factor = coll == CollKind::kAllReduce || coll == CollKind::kBroadcast ? k - 1 : (k - 1) / k;
  return costs.intraLatUs + factor * kb / costs.intraGBs;
}

// Largest one-shot of `coll` (all ranks' bytes); 0: none.
int64_t oneShotMaxBytes(CollKind coll) {
  switch (coll) {
    case CollKind::kAllReduce: return kOneShotMaxBytes;
    case CollKind::kAllGather:
    case CollKind::kReduceScatter: return kOneShotGatherMaxBytes;
    case CollKind::kBroadcast: return kOneShotBroadcastMaxBytes;
    default: return 0;
  }
}

// The exchanges' shape: p participants (largest power of two <= k) in
// log2(p) rounds; the others fold in before and out after.
struct ExchangeShape {
  double p, rounds;
  bool folds;
  explicit ExchangeShape(int k) : p(1), rounds(0), folds(false) {
    while (p * 2 <= k) {
      p *= 2;
      rounds += 1;
    }
    folds = p < k;
  }
};

double exchangeLat(const Shape& shape, const LinkCosts& costs) {
  return shape.nnodes > 1 ? costs.interLatUs : costs.intraLatUs;
}
double exchangeGBs(const Shape& shape, const LinkCosts& costs) {
  return shape.nnodes > 1 ? costs.interGBs : costs.intraGBs;
}

// Butterfly: every round moves and combines the whole message:
// rounds (alpha + S/B + S C), plus a fold in (combined) and out (copied).
double butterflyEstimate(double kb, const Shape& shape, const LinkCosts& costs) {
  const ExchangeShape x(shape.nranks);
  const double lat = exchangeLat(shape, costs), bw = exchangeGBs(shape, costs);
  const double round = lat + kb / bw + kb / costs.reduceGBs;
  const double fold = x.folds ? 2 * (lat + kb / bw) + kb / costs.reduceGBs : 0;
  return x.rounds * round + fold;
}

// Halving-doubling AllReduce: 2 log2(p) rounds moving 2 S (p-1)/p in all and
// combining S (p-1)/p; AllGather (S = all ranks' bytes): the doubling half.
double halvingDoublingEstimate(CollKind coll, double kb, const Shape& shape, const LinkCosts& costs) {
  const ExchangeShape x(shape.nranks);
  const double lat = exchangeLat(shape, costs), bw = exchangeGBs(shape, costs);
  const double share = (x.p - 1) / x.p;
  if (coll == CollKind::kAllGather) return x.rounds * lat + share * kb / bw + (x.folds ? 2 * lat + kb / bw : 0);
  // ReduceScatter (S = all ranks' bytes): the halving half, every byte moved
  // also combined; the fold hands in all S and hands back S/k.
  if (coll == CollKind::kReduceScatter)
    return x.rounds * lat + share * kb * (1 / bw + 1 / costs.reduceGBs) +
           (x.folds ? 2 * lat + kb / bw + kb / costs.reduceGBs + kb / shape.nranks / bw : 0);
  const double fold = x.folds ? 2 * (lat + kb / bw) + kb / costs.reduceGBs : 0;
  return 2 * x.rounds * lat + 2 * share * kb / bw + share * kb / costs.reduceGBs + fold;
}

// Hierarchical ring: the node's ring twice (reduce-scatter, allgather) over
// m ranks, and the ring across the N nodes on S/m bytes (AllReduce).
double hierRingEstimate(double kb, const Shape& shape, const LinkCosts& costs) {
  const double m = shape.ranksPerNode, N = shape.nnodes;
  const double intra = 2 * (m - 1) * costs.intraLatUs + 2 * (m - 1) / m * kb / costs.intraGBs;
  const double inter = 2 * (N - 1) * costs.interLatUs + 2 * (N - 1) / N * (kb / m) / costs.interGBs;
  return intra + inter;
}

// 2D torus: the hierarchical ring's terms on R rows of C ranks; a row's
// hand-offs cross nodes unless rows are the nodes, a column's whenever the
// communicator spans nodes. A one-row or one-column grid is a ring.
double torusEstimate(double kb, const Shape& shape, TorusShape torus, const LinkCosts& costs) {
  const double R = torus.rows, C = torus.cols;
  const bool multiNode = shape.nnodes > 1;
  const bool rowsAreNodes = torus.rows == shape.nnodes && torus.cols == shape.ranksPerNode;
  const bool rowInter = multiNode && !rowsAreNodes;
  const double rowLat = rowInter ? costs.interLatUs : costs.intraLatUs;
  const double rowGBs = rowInter ? costs.interGBs : costs.intraGBs;
  const double colLat = multiNode ? costs.interLatUs : costs.intraLatUs;
  const double colGBs = multiNode ? costs.interGBs : costs.intraGBs;
  const double row = 2 * (C - 1) * rowLat + 2 * (C - 1) / C * kb / rowGBs;
  const double column = 2 * (R - 1) * colLat + 2 * (R - 1) / R * (kb / C) / colGBs;
  return row + column;
}

}  // namespace

std::string describeEstimates(const Choice& choice) {
  std::string text;
  for (int a = 0; a < static_cast<int>(Algorithm::kCount); ++a) {
    char item[64];
    const double e = choice.estimateUs[a];
    if (e < 0)
      snprintf(item, sizeof item, "%s%s -", a ? ", " : "", algorithmName(static_cast<Algorithm>(a)));
    else
      snprintf(item, sizeof item, "%s%s %.1f us", a ? ", " : "", algorithmName(static_cast<Algorithm>(a)), e);
    text += item;
  }
  return text;
}

LinkCosts hostLinkCosts(bool oversubscribed) {
  LinkCosts costs;
  // Measured on 4 ranks over 2 cores: a ring hand-off about 1.6 us.
  if (oversubscribed) costs.intraLatUs = 2.0;
  return costs;
}

Choice chooseAlgorithm(CollKind coll, int64_t bytes, const Shape& shape, const LinkCosts& costs,
                       const AlgoFilter& filter, bool treesAvailable, bool oneShotAvailable, bool exchangeAvailable,
                       bool hierAvailable, TorusShape torus) {
  Choice choice{Algorithm::kRing, {-1, -1, -1, -1, -1, -1, -1}, "only Ring is possible"};
  const double kb = static_cast<double>(bytes) / 1e3;  // GB/s * us = 1e3 bytes
  const bool allReduce = coll == CollKind::kAllReduce;
  double* est = choice.estimateUs;
  est[0] = ringEstimate(coll, kb, shape, costs);
  if (allReduce && treesAvailable && shape.treeDepth > 0 && shape.nranks > 1) est[1] = treeEstimate(kb, shape, costs);
  // At 2 ranks every one-shot but AllReduce's is its ring: not offered.
  const int minRanks = allReduce ? 2 : 3;
  if (oneShotAvailable && shape.nnodes == 1 && shape.nranks >= minRanks && shape.nranks <= kOneShotMaxRanks &&
      bytes <= oneShotMaxBytes(coll))
    est[2] = oneShotEstimate(coll, kb, shape, costs);
  if (exchangeAvailable && shape.nranks > 1) {
    if (allReduce) est[3] = butterflyEstimate(kb, shape, costs);
    if (allReduce || coll == CollKind::kAllGather || coll == CollKind::kReduceScatter)
      est[4] = halvingDoublingEstimate(coll, kb, shape, costs);
  }
  if (hierAvailable && allReduce && shape.nnodes > 1 && shape.ranksPerNode > 1)
    est[5] = hierRingEstimate(kb, shape, costs);
  if (allReduce && torus.rows > 0 && shape.nranks > 1) est[6] = torusEstimate(kb, shape, torus, costs);
  int best = -1;
  bool filtered = false;
  for (int a = 0; a < static_cast<int>(Algorithm::kCount); ++a) {
    if (est[a] < 0) continue;
    // Opt-in: priced for the log, chosen only when NCCL_ALGO names it.
    if (a == static_cast<int>(Algorithm::kTorus2D) && !filter.names(coll, Algorithm::kTorus2D)) continue;
    if (!filter.allows(coll, static_cast<Algorithm>(a))) {
      filtered = true;
      continue;
    }
    if (best < 0 || est[a] < est[best]) best = a;
  }
  if (best < 0) {
    choice.reason = "NCCL_ALGO allows nothing possible here; using Ring";
    return choice;
  }
  choice.algo = static_cast<Algorithm>(best);
  int possible = 0;
  for (int a = 0; a < static_cast<int>(Algorithm::kCount); ++a)
    possible += est[a] >= 0 && (a != static_cast<int>(Algorithm::kTorus2D) || filter.names(coll, Algorithm::kTorus2D));
  choice.reason = possible == 1 ? (best == 0 ? "only Ring is possible" : "only one algorithm is possible")
                  : filtered    ? "the cheapest estimate NCCL_ALGO allows"
                                : "the cheapest estimate";
  if (filtered && !filter.allows(coll, Algorithm::kRing)) choice.reason = "NCCL_ALGO excludes Ring";
  return choice;
}

}  // namespace weft::tuning
