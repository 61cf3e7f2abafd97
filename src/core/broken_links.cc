#include "core/broken_links.h"

#include <algorithm>
#include <cstdlib>
#include <random>
#include <sstream>

#include "device/exchange.h"

namespace weft::core {
namespace {

using device::ExchangeShape;
using device::kFoldSlot;

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t");
  const size_t e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

bool parseRank(const std::string& text, int* rank) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || text.size() > 9) return false;
  *rank = std::atoi(text.c_str());
  return true;
}

// The search for a ring or a logical order gives up after this many steps:
// plenty for the meshes of a machine, bounded for pathological sets.
constexpr long kSearchBudget = 2000000;

// Depth-first search for a Hamiltonian cycle in the graph of unbroken links.
class RingRouter {
 public:
  RingRouter(const std::vector<int>& order, const LinkSet& broken) : order_(order), broken_(broken) {
    const int n = static_cast<int>(order.size());
    position_.resize(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) position_[static_cast<size_t>(order[static_cast<size_t>(i)])] = i;
    used_.assign(static_cast<size_t>(n), false);
  }
  bool run(std::vector<int>* out) {
    path_.assign(1, order_[0]);
    used_[static_cast<size_t>(order_[0])] = true;
    if (!extend()) return false;
    *out = path_;
    return true;
  }

 private:
  bool extend() {
    const int n = static_cast<int>(order_.size());
    if (++steps_ > kSearchBudget) return false;
    const int last = path_.back();
    if (static_cast<int>(path_.size()) == n) return !broken_.has(last, path_[0]);
    // Candidates in ring order after `last`: the searched ring where it can be kept.
    for (int d = 1; d < n; ++d) {
      const int next = order_[static_cast<size_t>((position_[static_cast<size_t>(last)] + d) % n)];
      if (used_[static_cast<size_t>(next)] || broken_.has(last, next)) continue;
      used_[static_cast<size_t>(next)] = true;
      path_.push_back(next);
      if (extend()) return true;
      path_.pop_back();
      used_[static_cast<size_t>(next)] = false;
      if (steps_ > kSearchBudget) return false;
    }
    return false;
  }

  const std::vector<int>& order_;
  const LinkSet& broken_;
  std::vector<int> position_;
  std::vector<bool> used_;
  std::vector<int> path_;
  long steps_ = 0;
};

// Logical pairs that exchange, per logical rank: fold partner and every
// round's partner.
std::vector<std::vector<int>> exchangePartners(int nranks) {
  const ExchangeShape shape(nranks);
  std::vector<std::vector<int>> partners(static_cast<size_t>(nranks));
  for (int L = 0; L < nranks; ++L) {
    if (shape.foldPartner(L) >= 0) partners[static_cast<size_t>(L)].push_back(shape.foldPartner(L));
    if (shape.newRank(L) < 0) continue;
    for (int i = 0; i < shape.rounds; ++i) partners[static_cast<size_t>(L)].push_back(shape.partner(L, i));
  }
  return partners;
}

// Backtracking: logical rank L gets the first free rank whose links to every
// already placed partner work. Identity order when nothing is broken.
class OrderSearch {
 public:
  OrderSearch(int nranks, const LinkSet& broken) : n_(nranks), broken_(broken), partners_(exchangePartners(nranks)) {
    physical_.assign(static_cast<size_t>(n_), -1);
    taken_.assign(static_cast<size_t>(n_), false);
  }
  bool run(std::vector<int>* out) {
    if (!place(0)) return false;
    *out = physical_;
    return true;
  }

 private:
  bool place(int L) {
    if (L == n_) return true;
    if (++steps_ > kSearchBudget) return false;
    for (int r = 0; r < n_; ++r) {
      if (taken_[static_cast<size_t>(r)] || !fits(L, r)) continue;
      taken_[static_cast<size_t>(r)] = true;
      physical_[static_cast<size_t>(L)] = r;
      if (place(L + 1)) return true;
      taken_[static_cast<size_t>(r)] = false;
      physical_[static_cast<size_t>(L)] = -1;
      if (steps_ > kSearchBudget) return false;
    }
    return false;
  }
  bool fits(int L, int r) const {
    for (int other : partners_[static_cast<size_t>(L)])
      if (other < L && broken_.has(physical_[static_cast<size_t>(other)], r)) return false;
    return true;
  }

  int n_;
  const LinkSet& broken_;
  std::vector<std::vector<int>> partners_;
  std::vector<int> physical_;
  std::vector<bool> taken_;
  long steps_ = 0;
};

// Relays for every broken pair of the identity order, slot by slot.
Status addRelays(const LinkSet& broken, int maxDuties, ExchangePlan* plan) {
  const int n = static_cast<int>(plan->physical.size());
  const ExchangeShape shape(n);
  std::vector<int> duties(static_cast<size_t>(n), 0);
  std::vector<int> slots;
  if (shape.rem > 0) slots.push_back(kFoldSlot);
  for (int i = 0; i < shape.rounds; ++i) slots.push_back(i);
  for (int slot : slots) {
    std::set<std::pair<int, int>> used;  // directed (rank, rank) connections of this slot
    std::vector<std::pair<int, int>> relayed;
    for (int L = 0; L < n; ++L) {
      const int P = plan->partnerRank(L, slot);
      if (P < 0) continue;
      const int me = plan->physical[static_cast<size_t>(L)];
      if (broken.has(me, P)) {
        if (me < P) relayed.emplace_back(me, P);
      } else {
        used.insert({me, P});
      }
    }
    for (auto [a, b] : relayed) {
      int via = -1;
      for (int t = 1; t < n && via < 0; ++t) {
        const int v = (b + t) % n;
        if (v == a || broken.has(a, v) || broken.has(v, b) || duties[static_cast<size_t>(v)] + 2 > maxDuties) continue;
        if (used.count({a, v}) || used.count({v, b}) || used.count({b, v}) || used.count({v, a})) continue;
        via = v;
      }
      if (via < 0)
        return errorStatus(ncclInvalidUsage, "WEFT_BROKEN_LINKS: no rank can relay between ranks %d and %d", a, b);
      for (auto link : {std::make_pair(a, via), std::make_pair(via, b), std::make_pair(b, via), std::make_pair(via, a)})
        used.insert(link);
      duties[static_cast<size_t>(via)] += 2;
      const int La = plan->logical[static_cast<size_t>(a)], Lb = plan->logical[static_cast<size_t>(b)];
      plan->relays.push_back({slot, La, Lb, via});
      plan->relays.push_back({slot, Lb, La, via});
    }
  }
  return okStatus();
}

}  // namespace

Result<LinkSet> parseBrokenLinks(const std::string& text, int nranks) {
  LinkSet links;
  std::stringstream in(text);
  for (std::string entry; std::getline(in, entry, ',');) {
    entry = trim(entry);
    if (entry.empty()) continue;
    const size_t dash = entry.find('-');
    int a = -1, b = -1;
    if (dash == std::string::npos || !parseRank(trim(entry.substr(0, dash)), &a) ||
        !parseRank(trim(entry.substr(dash + 1)), &b))
      return errorStatus(ncclInvalidArgument,
                         "WEFT_BROKEN_LINKS=\"%s\": entry \"%s\" is not a link (expected rank-rank, as in 0-1,2-5)",
                         text.c_str(), entry.c_str());
    if (a >= nranks || b >= nranks || a == b)
      return errorStatus(ncclInvalidArgument,
                         "WEFT_BROKEN_LINKS=\"%s\": link %d-%d is not between two ranks of this communicator "
                         "(expected two different ranks below %d)",
                         text.c_str(), a, b, nranks);
    links.add(a, b);
  }
  return links;
}

Result<std::vector<int>> routeRing(const std::vector<int>& order, const LinkSet& broken) {
  const size_t n = order.size();
  bool clean = true;
  for (size_t i = 0; i < n && n > 1; ++i) clean = clean && !broken.has(order[i], order[(i + 1) % n]);
  if (clean) return order;
  std::vector<int> ring;
  if (!RingRouter(order, broken).run(&ring))
    return errorStatus(ncclInvalidUsage, "WEFT_BROKEN_LINKS: no ring through all %zu ranks avoids the %zu broken links",
                       n, broken.size());
  return ring;
}

int ExchangePlan::partnerRank(int L, int slot) const {
  const ExchangeShape shape(static_cast<int>(physical.size()));
  int other = -1;
  if (slot == kFoldSlot)
    other = shape.foldPartner(L);
  else if (shape.newRank(L) >= 0 && slot < shape.rounds)
    other = shape.partner(L, slot);
  return other < 0 ? -1 : physical[static_cast<size_t>(other)];
}

int ExchangePlan::hopRank(int L, int slot) const {
  const int P = partnerRank(L, slot);
  if (P < 0) return -1;
  for (const RelayHop& hop : relays)
    if (hop.slot == slot && hop.from == L) return hop.via;
  return P;
}

std::vector<int> exchangePeers(const ExchangePlan& plan, int rank) {
  std::vector<int> peers;
  auto add = [&](int peer) {
    if (peer >= 0 && peer != rank && std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
  };
  const int L = plan.logical[static_cast<size_t>(rank)];
  for (int slot = 0; slot < device::kExchangeSlots; ++slot) add(plan.hopRank(L, slot));
  for (const RelayHop& hop : plan.relays) {
    if (hop.via != rank) continue;
    add(plan.physical[static_cast<size_t>(hop.from)]);
    add(plan.physical[static_cast<size_t>(hop.to)]);
  }
  return peers;
}

namespace {

ExchangePlan planFor(const std::vector<int>& physical) {
  ExchangePlan plan;
  plan.physical = physical;
  plan.logical.assign(physical.size(), 0);
  for (size_t L = 0; L < physical.size(); ++L) plan.logical[static_cast<size_t>(physical[L])] = static_cast<int>(L);
  return plan;
}

// Orders to try relays on when no order avoids every broken link: the
// rotations of rank order, then shuffles from a fixed seed (the same on
// every rank: mt19937's sequence is fixed by the standard, and the shuffle is
// written out here rather than left to the library).
std::vector<int> candidateOrder(int nranks, int attempt) {
  std::vector<int> order(static_cast<size_t>(nranks));
  for (int L = 0; L < nranks; ++L) order[static_cast<size_t>(L)] = (L + attempt) % nranks;
  if (attempt < nranks) return order;
  std::mt19937 random(static_cast<uint32_t>(attempt));
  for (int i = nranks - 1; i > 0; --i)
    std::swap(order[static_cast<size_t>(i)], order[random() % static_cast<uint32_t>(i + 1)]);
  return order;
}

constexpr int kRelayOrderAttempts = 256;

}  // namespace

Result<ExchangePlan> planExchange(int nranks, const LinkSet& broken, int maxDutiesPerRank) {
  // Nothing broken: rank order, without a search (whose recursion is as deep
  // as the communicator is large).
  if (broken.empty()) return planFor(candidateOrder(nranks, 0));
  std::vector<int> physical;
  if (OrderSearch(nranks, broken).run(&physical)) return planFor(physical);
  Status last = okStatus();
  for (int attempt = 0; attempt < kRelayOrderAttempts; ++attempt) {
    ExchangePlan plan = planFor(candidateOrder(nranks, attempt));
    last = addRelays(broken, maxDutiesPerRank, &plan);
    if (last.ok()) return plan;
  }
  return last;
}

HierPlan::Place HierPlan::placeOf(int rank) const {
  const int N = static_cast<int>(nodes.size());
  const int m = static_cast<int>(nodes[0].size());
  for (int n = 0; n < N; ++n)
    for (int i = 0; i < m; ++i) {
      if (nodes[static_cast<size_t>(n)][static_cast<size_t>(i)] != rank) continue;
      auto at = [&](int node, int local) {
        return nodes[static_cast<size_t>((node + N) % N)][static_cast<size_t>((local + m) % m)];
      };
      return Place{n, i, at(n, i - 1), at(n, i + 1), at(n - 1, i), at(n + 1, i)};
    }
  return Place{-1, -1, -1, -1, -1, -1};
}

std::shared_ptr<const HierPlan> planHierarchy(const std::vector<std::vector<int>>& nodes, const LinkSet& broken) {
  if (nodes.size() < 2 || nodes[0].size() < 2) return nullptr;
  for (const auto& node : nodes)
    if (node.size() != nodes[0].size()) return nullptr;
  auto plan = std::make_shared<HierPlan>();
  plan->nodes = nodes;
  for (const auto& node : nodes)
    for (int rank : node) {
      const HierPlan::Place p = plan->placeOf(rank);
      if (broken.has(rank, p.intraNext) || broken.has(rank, p.interNext)) return nullptr;
    }
  return plan;
}

}  // namespace weft::core
