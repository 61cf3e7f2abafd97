// Algorithm choice: NCCL_ALGO parsing and a first cost model. Pure
// functions of narrow inputs (sizes, shape of the communicator), so the
// choice can be tested and explained without a communicator.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"

namespace weft::tuning {

// kOneShot: every rank of a node sends its input to every other and each
// combines all (device/oneshot.h); Weft's own name for NCCL_ALGO.
// kButterfly (recursive doubling, device/butterfly.h) and kHalvingDoubling
// (Rabenseifner, device/halving_doubling.h): pairwise exchanges in log2
// rounds; NCCL_ALGO also accepts RecDoubling and Rabenseifner for them.
// kHierarchicalRing (device/hier_ring.h; alias HierRing): reduce-scatter in
// each node, allreduce across nodes per local index, allgather in the node.
// kTorus2D (device/torus.h; alias Torus): the same on a grid of rows and
// columns (core/torus_grid.h); chosen only where NCCL_ALGO names it.
enum class Algorithm : int {
  kRing = 0,
  kTree = 1,
  kOneShot = 2,
  kButterfly = 3,
  kHalvingDoubling = 4,
  kHierarchicalRing = 5,
  kTorus2D = 6,
  kCount = 7
};
enum class CollKind : int { kAllReduce = 0, kAllGather, kReduceScatter, kBroadcast, kReduce, kCount };

const char* algorithmName(Algorithm algo);
const char* collKindName(CollKind coll);

// Which algorithms each collective may use. NCCL_ALGO syntax: a comma list
// of algorithm names applies to every collective ("Ring,Tree"); a leading ^
// excludes the list instead ("^Tree"); "coll:list" entries separated by ';'
// set one collective ("allreduce:tree;broadcast:ring"). Names are
// case-insensitive. Unknown names are an error naming them.
class AlgoFilter {
 public:
  static Result<AlgoFilter> parse(const std::string& text);
  bool allows(CollKind coll, Algorithm algo) const {
    return (mask_[static_cast<int>(coll)] >> static_cast<int>(algo)) & 1u;
  }
  // Whether the text listed `algo` for `coll` by name (not through "^" or
  // the default): opt-in algorithms compete only then.
  bool names(CollKind coll, Algorithm algo) const {
    return (named_[static_cast<int>(coll)] >> static_cast<int>(algo)) & 1u;
  }

 private:
  uint32_t mask_[static_cast<int>(CollKind::kCount)] = {~0u, ~0u, ~0u, ~0u, ~0u};
  uint32_t named_[static_cast<int>(CollKind::kCount)] = {0, 0, 0, 0, 0};
};

// What the cost model needs to know about the communicator.
struct Shape {
  int nranks;
  int nnodes;        // hosts (or virtual nodes)
  int ranksPerNode;  // the largest count on one node
  int treeDepth;     // levels of the channel trees; 0: no trees built
};

// Link figures the model uses (microseconds, GB/s). Defaults are measured
// orders of magnitude for the host backend: shared memory within a node,
// sockets between nodes.
struct LinkCosts {
  double intraLatUs = 0.5;
  double interLatUs = 20.0;
  double intraGBs = 8.0;
  double interGBs = 1.0;
  // Combining two inputs into one output, GB/s of output (the exchanges'
  // reduction term; the other estimates fold it into their bandwidth).
  double reduceGBs = 8.0;
};

// The host backend's figures; a hand-off costs far more when ranks outnumber
// cores (the peer must first get a core).
LinkCosts hostLinkCosts(bool oversubscribed);

// Largest node a one-shot AllReduce serves (a verb combines at most 4 inputs).
constexpr int kOneShotMaxRanks = 4;
// Largest one-shot AllReduce: beyond it each rank's k-1 copies cost more
// than the ring's hand-offs save (measured on 2 ranks: one-shot ahead at
// 128 KiB, the ring ahead at 512 KiB).
constexpr int64_t kOneShotMaxBytes = 256 << 10;
// One-shot AllGather and ReduceScatter (all ranks' bytes) move what their
// ring moves, in one hand-off: 4 ranks on 2 cores, 30-40 % faster up to
// 4 KiB, ~20 % at 32 KiB, 5-15 % slower at 256 KiB (k-1 FIFOs written at
// once). Broadcast one-shot has the root write k-1 copies: faster up to
// 512 B, slower from 4 KiB (the ring's root does not wait for the chain).
constexpr int64_t kOneShotGatherMaxBytes = 64 << 10;
constexpr int64_t kOneShotBroadcastMaxBytes = 2 << 10;

// The 2D torus's grid; rows 0: none.
struct TorusShape {
  int rows;
  int cols;
};

struct Choice {
  Algorithm algo;
  double estimateUs[static_cast<int>(Algorithm::kCount)];  // <0: not possible
  const char* reason;
};

// Picks the cheapest allowed algorithm for `bytes` of `coll`. Rings are
// always possible; trees only for AllReduce, when trees exist and the
// backend runs them; one-shot for AllReduce, AllGather, ReduceScatter and
// Broadcast on one node of 2 to kOneShotMaxRanks ranks whose backend runs
// it (at 2 ranks only AllReduce differs from its ring). When the filter allows
// nothing possible, Ring is used and the reason says so.
//
// Butterfly (AllReduce) and HalvingDoubling (AllReduce, AllGather,
// ReduceScatter) need
// exchangeAvailable: the backend runs them and an exchange plan exists;
// HierarchicalRing (AllReduce) hierAvailable: nodes of one size, 2 or more
// of 2 or more ranks. Torus2D (AllReduce) a grid (torus.rows > 0), and only
// where the filter names it: the model prices it like the hierarchical ring
// on its rows and columns, which on one host beats the ring by hand-offs
// alone, something no measurement here backs (its three phases do not
// overlap as the ring's steps do).
// Their estimates are alpha-beta sums over their rounds: latency per round,
// bytes per round over the link bandwidth, combined bytes over reduceGBs.
Choice chooseAlgorithm(CollKind coll, int64_t bytes, const Shape& shape, const LinkCosts& costs,
                       const AlgoFilter& filter, bool treesAvailable, bool oneShotAvailable = false,
                       bool exchangeAvailable = false, bool hierAvailable = false, TorusShape torus = {0, 0});

// "Ring 3.1 us, Tree -, ..." : every algorithm's estimate (- where impossible).
std::string describeEstimates(const Choice& choice);

}  // namespace weft::tuning
