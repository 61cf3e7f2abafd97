#include "tuning/algo.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "tuning/figures.h"

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

// The algorithms written for LL as well as Simple.
bool runsLL(Algorithm a) { return a == Algorithm::kRing || a == Algorithm::kTree || a == Algorithm::kOneShot; }

// Which algorithms can run this call here (before NCCL_ALGO), bit i =
// Algorithm i.
uint32_t possibleAlgorithms(CollKind coll, int64_t bytes, const Shape& shape, bool treesAvailable,
                            bool oneShotAvailable, bool exchangeAvailable, bool hierAvailable, TorusShape torus) {
  const bool allReduce = coll == CollKind::kAllReduce;
  auto bit = [](Algorithm a) { return 1u << static_cast<int>(a); };
  uint32_t mask = bit(Algorithm::kRing);
  if (shape.nranks < 2) return mask;
  if (allReduce && treesAvailable && shape.treeDepth > 0) mask |= bit(Algorithm::kTree);
  // At 2 ranks every one-shot but AllReduce's is its ring: not offered.
  const int minRanks = allReduce ? 2 : 3;
  if (oneShotAvailable && shape.nnodes == 1 && shape.nranks >= minRanks && shape.nranks <= kOneShotMaxRanks &&
      bytes <= oneShotMaxBytes(coll))
    mask |= bit(Algorithm::kOneShot);
  if (exchangeAvailable) {
    if (allReduce) mask |= bit(Algorithm::kButterfly);
    if (allReduce || coll == CollKind::kAllGather || coll == CollKind::kReduceScatter)
      mask |= bit(Algorithm::kHalvingDoubling);
  }
  if (hierAvailable && allReduce && shape.nnodes > 1 && shape.ranksPerNode > 1)
    mask |= bit(Algorithm::kHierarchicalRing);
  if (allReduce && torus.rows > 0) mask |= bit(Algorithm::kTorus2D);
  return mask;
}

}  // namespace

std::string describeEstimates(const Choice& choice) {
  std::string text;
  for (int a = 0; a < static_cast<int>(Algorithm::kCount); ++a) {
    char item[96];
    const double e = choice.estimateUs[a];
    const double ll = choice.llUs[a];
    const double ll128 = choice.ll128Us[a];
    const char* name = algorithmName(static_cast<Algorithm>(a));
    if (e < 0) {
      snprintf(item, sizeof item, "%s%s -", a ? ", " : "", name);
    } else {
      char lines[48] = "";
      if (ll >= 0 && ll128 >= 0)
        snprintf(lines, sizeof lines, " (LL %.1f us, LL128 %.1f us)", ll, ll128);
      else if (ll >= 0)
        snprintf(lines, sizeof lines, " (LL %.1f us)", ll);
      else if (ll128 >= 0)
        snprintf(lines, sizeof lines, " (LL128 %.1f us)", ll128);
      snprintf(item, sizeof item, "%s%s %.1f us%s", a ? ", " : "", name, e, lines);
    }
    text += item;
  }
  return text;
}

LinkFigures hostLinkFigures(bool oversubscribed) {
  return modelLinks(defaultFigures(true), LinkType::kShm, 0, oversubscribed);
}

Choice chooseAlgorithm(CollKind coll, int64_t bytes, const Shape& shape, const LinkFigures& links,
                       const AlgoFilter& filter, bool treesAvailable, bool oneShotAvailable, bool exchangeAvailable,
                       bool hierAvailable, TorusShape torus, const LineLinks& lines) {
  Choice choice{Algorithm::kRing,
                {-1, -1, -1, -1, -1, -1, -1},
                {-1, -1, -1, -1, -1, -1, -1},
                {-1, -1, -1, -1, -1, -1, -1},
                "only Ring is possible"};
  double* est = choice.estimateUs;
  const uint32_t possible =
      possibleAlgorithms(coll, bytes, shape, treesAvailable, oneShotAvailable, exchangeAvailable, hierAvailable, torus);
  const CommShape model{shape.nranks, shape.nnodes, shape.ranksPerNode, torus.rows, torus.cols};
  for (int a = 0; a < static_cast<int>(Algorithm::kCount); ++a) {
    if (!((possible >> a) & 1u)) continue;
    const AlgoEstimate e = estimateCollective(coll, static_cast<Algorithm>(a), bytes, model, links);
    if (e.applies) est[a] = e.us;
    const auto algo = static_cast<Algorithm>(a);
    if (lines.ll != nullptr && runsLL(algo)) {
      const AlgoEstimate ll = estimateCollective(coll, algo, bytes, model, *lines.ll);
      if (ll.applies) choice.llUs[a] = ll.us;
    }
    if (lines.ll128 != nullptr && (algo == Algorithm::kRing || (lines.ll128Trees && algo == Algorithm::kTree))) {
      const AlgoEstimate ll128 = estimateCollective(coll, algo, bytes, model, *lines.ll128);
      if (ll128.applies) choice.ll128Us[a] = ll128.us;
    }
  }
  if (shape.nranks < 2) est[0] = 0;
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
    if (best < 0 || choice.cheapestUs(a) < choice.cheapestUs(best)) best = a;
  }
  if (best < 0) {
    choice.reason = "NCCL_ALGO allows nothing possible here; using Ring";
    return choice;
  }
  // The ring, the default, stays unless another algorithm is clearly
  // cheaper; Torus2D, named in NCCL_ALGO, is taken at its estimate.
  const bool ringKept = best != 0 && best != static_cast<int>(Algorithm::kTorus2D) && est[0] >= 0 &&
                        filter.allows(coll, Algorithm::kRing) &&
                        choice.cheapestUs(best) > (1 - kRingPreference) * choice.cheapestUs(0);
  if (ringKept) best = 0;
  choice.algo = static_cast<Algorithm>(best);
  int candidates = 0;
  for (int a = 0; a < static_cast<int>(Algorithm::kCount); ++a)
    candidates +=
        est[a] >= 0 && (a != static_cast<int>(Algorithm::kTorus2D) || filter.names(coll, Algorithm::kTorus2D));
  choice.reason = candidates == 1 ? (best == 0 ? "only Ring is possible" : "only one algorithm is possible")
                  : filtered      ? "the cheapest estimate NCCL_ALGO allows"
                                  : "the cheapest estimate";
  if (filtered && !filter.allows(coll, Algorithm::kRing)) choice.reason = "NCCL_ALGO excludes Ring";
  if (ringKept) choice.reason = "Ring: the cheapest estimate is within 5 % of the ring's";
  return choice;
}

}  // namespace weft::tuning
