// Links that must carry no data (WEFT_BROKEN_LINKS, or missing from the
// topology), and what the algorithms do about them: rings re-routed around
// them, and the pairwise-exchange plan (logical rank order and relays) that
// never partners a broken pair. Pure: ranks and links in, orders out.
#pragma once

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace weft::core {

// Unordered rank pairs.
class LinkSet {
 public:
  void add(int a, int b) { links_.insert(key(a, b)); }
  bool has(int a, int b) const { return links_.count(key(a, b)) != 0; }
  bool empty() const { return links_.empty(); }
  size_t size() const { return links_.size(); }
  const std::set<std::pair<int, int>>& pairs() const { return links_; }

 private:
  static std::pair<int, int> key(int a, int b) { return a < b ? std::make_pair(a, b) : std::make_pair(b, a); }
  std::set<std::pair<int, int>> links_;
};

// "0-1,2-5" -> links; every rank in [0, nranks), no self link. Errors name
// the variable, the entry and what was expected.
Result<LinkSet> parseBrokenLinks(const std::string& text, int nranks);

// A ring order (a cycle through every rank) that uses no broken link: `order`
// itself when it uses none, else the first cycle found from it, preferring
// each rank's successor in `order`. Fails when no cycle exists (or the search
// gives up on a large, heavily broken set).
Result<std::vector<int>> routeRing(const std::vector<int>& order, const LinkSet& broken);

// One relayed direction of an exchange: in slot `slot` (exchange.h), what
// logical rank `from` sends to `to` goes through rank `via`.
struct RelayHop {
  int slot;
  int from, to;  // logical ranks
  int via;       // rank
};

// The pairwise-exchange plan every rank computes alike (device/exchange.h).
struct ExchangePlan {
  std::vector<int> physical;  // logical rank -> rank
  std::vector<int> logical;   // rank -> logical rank
  std::vector<RelayHop> relays;
  // Rank of the partner of logical rank L in `slot` (fold: kFoldSlot), -1: none.
  int partnerRank(int L, int slot) const;
  // Where logical rank L's data for slot `slot` goes: the partner or the relay.
  int hopRank(int L, int slot) const;
};

// The hierarchical ring's shape: every node's ranks, nodes of one size.
struct HierPlan {
  std::vector<std::vector<int>> nodes;
  // This rank's node and index in it, and its four ring neighbours.
  struct Place {
    int node, local;
    int intraPrev, intraNext, interPrev, interNext;
  };
  Place placeOf(int rank) const;
};

// The plan when it applies: at least 2 nodes of at least 2 ranks, all of one
// size, and no broken link on either ring. Null otherwise.
std::shared_ptr<const HierPlan> planHierarchy(const std::vector<std::vector<int>>& nodes, const LinkSet& broken);

// The ranks `rank` exchanges with under `plan` (partners, its relays, the
// ranks it relays for), each once: the connections the plan needs. The
// relation is symmetric, so both ends of each connection ask for it.
std::vector<int> exchangePeers(const ExchangePlan& plan, int rank);

// Chooses logical ranks so that no partnered pair is broken; when none is
// found, relays each broken pair's exchange through a third rank, never
// using one connection twice in a slot and giving no rank more than
// maxDutiesPerRank forwarded directions. Fails when even that is impossible.
Result<ExchangePlan> planExchange(int nranks, const LinkSet& broken, int maxDutiesPerRank);

}  // namespace weft::core
