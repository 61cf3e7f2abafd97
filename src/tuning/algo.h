// Algorithm choice: NCCL_ALGO parsing and the choice by the cost model. Pure
// functions of narrow inputs (sizes, shape of the communicator), so the
// choice can be tested and explained without a communicator.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "tuning/cost_model.h"
#include "tuning/kinds.h"

namespace weft::tuning {

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

// The host backend's built-in figures (no tuning file): shared memory
// within a node, sockets between nodes, as measured orders of magnitude; a
// hand-off costs far more when ranks outnumber cores (the peer must first
// get a core). tuning/figures.h holds them per link type and protocol.
LinkFigures hostLinkFigures(bool oversubscribed);

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

// Another algorithm replaces the ring only when its estimate is at least
// this much lower. The model prices the ring and Rabenseifner's
// halving-doubling alike per byte (both bandwidth-optimal), but the ring
// pipelines its steps and combines and forwards a chunk in one pass, which
// the model leaves out; measured on the host, the ring is ahead at large
// sizes (4 ranks, 2 MiB: 1.4 ms against 6.5 ms, docs/performance.md).
constexpr double kRingPreference = 0.05;

// The 2D torus's grid; rows 0: none.
struct TorusShape {
  int rows;
  int cols;
};

struct Choice {
  Algorithm algo;
  double estimateUs[static_cast<int>(Algorithm::kCount)];  // under Simple; <0: not possible
  double llUs[static_cast<int>(Algorithm::kCount)];        // under LL; <0: not priced
  double ll128Us[static_cast<int>(Algorithm::kCount)];     // under LL128; <0: not priced
  const char* reason;
  // The algorithm's cheapest estimate of Simple, LL and LL128.
  double cheapestUs(int a) const {
    double best = estimateUs[a];
    if (llUs[a] >= 0 && llUs[a] < best) best = llUs[a];
    if (ll128Us[a] >= 0 && ll128Us[a] < best) best = ll128Us[a];
    return best;
  }
};

// Which algorithms the line protocols may be priced for: `links` null: not
// priced at all (the protocol cannot run, or may not be chosen by the model).
struct LineLinks {
  const LinkFigures* ll = nullptr;     // Ring, Tree, OneShot
  const LinkFigures* ll128 = nullptr;  // Ring, and Tree where ll128Trees
  bool ll128Trees = false;
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
// Every estimate is the cost model's (cost_model.h, estimateCollective) on
// `links`: there is no second set of formulas. With `lines.ll` (LL can run
// and may be chosen), Ring, Tree and OneShot are priced under LL too, with
// `lines.ll128` Ring (and Tree with ll128Trees) under LL128, and an
// algorithm competes with the cheapest of its protocols.
Choice chooseAlgorithm(CollKind coll, int64_t bytes, const Shape& shape, const LinkFigures& links,
                       const AlgoFilter& filter, bool treesAvailable, bool oneShotAvailable = false,
                       bool exchangeAvailable = false, bool hierAvailable = false, TorusShape torus = {0, 0},
                       const LineLinks& lines = {});

// "Ring 3.1 us (LL 2.9 us, LL128 3.0 us), Tree -, ..." : every algorithm's
// estimate (- where impossible).
std::string describeEstimates(const Choice& choice);

}  // namespace weft::tuning
