#include "tuning/algo.h"

#include <algorithm>
#include <cctype>
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

// "ring,tree" or "^tree" -> mask of algorithms.
Result<uint32_t> parseList(const std::string& text, const std::string& whole) {
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
    if (found < 0)
      return errorStatus(ncclInvalidArgument,
                         "NCCL_ALGO=\"%s\": unknown algorithm \"%s\" (expected Ring or Tree, optionally per "
                         "collective as allreduce:tree)",
                         whole.c_str(), name.c_str());
    mask |= 1u << found;
  }
  return exclude ? ~mask : mask;
}

}  // namespace

const char* algorithmName(Algorithm algo) { return algo == Algorithm::kTree ? "Tree" : "Ring"; }

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
      WEFT_ASSIGN_OR_RETURN(uint32_t mask, parseList(entry, text));
      for (uint32_t& m : filter.mask_) m = mask;
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
    WEFT_ASSIGN_OR_RETURN(uint32_t mask, parseList(entry.substr(colon + 1), text));
    filter.mask_[index] = mask;
  }
  return filter;
}

Choice chooseAlgorithm(CollKind coll, int64_t bytes, const Shape& shape, const LinkCosts& costs,
                       const AlgoFilter& filter, bool treesAvailable) {
  Choice choice{Algorithm::kRing, {-1, -1}, "only Ring is possible"};
  const double k = shape.nranks;
  const double mb = static_cast<double>(bytes) / 1e3;  // GB/s * us = 1e3 bytes
  const bool multiNode = shape.nnodes > 1;
  // A ring step is as slow as its slowest hop; allreduce takes 2(k-1) steps.
  const double hop = multiNode ? costs.interLatUs : costs.intraLatUs;
  const double ringBw = multiNode ? costs.interGBs : costs.intraGBs;
  const double ringSteps = coll == CollKind::kAllReduce ? 2 * (k - 1) : k - 1;
  const double ringFactor = coll == CollKind::kAllReduce ? 2 * (k - 1) / k
                            : coll == CollKind::kBroadcast || coll == CollKind::kReduce ? 1
                                                                                         : (k - 1) / k;
  choice.estimateUs[0] = ringSteps * hop + ringFactor * mb / ringBw;
  const bool treePossible = coll == CollKind::kAllReduce && treesAvailable && shape.treeDepth > 0 && k > 1;
  if (treePossible) {
    // Up then down: the inter-node levels and the intra-node chain, twice;
    // every byte crosses each link once per direction.
    const double interLevels = multiNode ? std::max(1, shape.treeDepth - (shape.ranksPerNode - 1)) : 0;
    const double chain = std::max(0, shape.ranksPerNode - 1);
    const double lat = 2 * (interLevels * costs.interLatUs + chain * costs.intraLatUs);
    choice.estimateUs[1] = lat + 2 * mb / ringBw;
  }
  const bool ringOk = filter.allows(coll, Algorithm::kRing);
  const bool treeOk = treePossible && filter.allows(coll, Algorithm::kTree);
  if (!ringOk && !treeOk) {
    choice.reason = "NCCL_ALGO allows nothing possible here; using Ring";
    return choice;
  }
  if (treeOk && (!ringOk || choice.estimateUs[1] < choice.estimateUs[0])) {
    choice.algo = Algorithm::kTree;
    choice.reason = ringOk ? "Tree is estimated faster" : "NCCL_ALGO excludes Ring";
  } else {
    choice.reason = !treePossible ? "Tree is not possible here" : treeOk ? "Ring is estimated faster"
                                                                         : "NCCL_ALGO excludes Tree";
  }
  return choice;
}

}  // namespace weft::tuning
