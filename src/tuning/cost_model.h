// Alpha-beta-gamma cost model of every AllReduce algorithm (and of the other
// collectives' Ring, OneShot and HalvingDoubling): a message costs
// alpha (latency per hop) plus bytes times beta (time per byte on the link
// it crosses), and a reduction costs bytes times gamma per input combined.
// Pure functions of the communicator's shape and its link figures. The
// planner ranks algorithms by these formulas and no others (algo.h,
// chooseAlgorithm, on the figures of figures.h), and the simulator
// (src/sim/) checks its replayed schedules against the same formulas.
//
// Two families of functions:
//  - seedClosedForm: the textbook formulas with one alpha, one bandwidth and
//    one gamma for every link (the survey's notation: N ranks, S bytes, n
//    ranks per group, m groups);
//  - estimateAllReduce / estimateCollective / estimateEveryAlgorithm: the
//    same schedules priced with the link each hop really crosses (within a
//    node or between nodes) and the share of a NIC each concurrent flow gets.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "tuning/kinds.h"

namespace weft::tuning {

// Every algorithm the model prices: the planner's own (kinds.h). Ring, Tree
// and OneShot are priced as Weft runs them, the others as their textbook
// schedules (which Weft's run).
using ModelAlgo = Algorithm;

const char* modelAlgoName(ModelAlgo algo);  // "Ring", "Tree", "OneShot", "Butterfly", "HalvingDoubling", ...

// Link figures. A caller fills them from the topology
// (sim::figuresFromTopology) or from measured costs; defaults are a GPU cluster's
// orders of magnitude (NVLink within a node, one 100 Gb/s-class NIC per node).
struct LinkFigures {
  double intraLatUs = 1.0;   // alpha of one hop between ranks of a node
  double intraGBs = 100.0;   // what one rank can send to its node's peers, GB/s
  double interLatUs = 5.0;   // alpha of one hop between nodes
  double interGBs = 12.5;    // one NIC's bandwidth per direction, GB/s
  int nicsPerNode = 1;       // NICs a node's flows spread over
  double reduceGBs = 200.0;  // gamma: bytes of one extra input combined per second, GB/s
};

// The communicator's shape. torusRows x torusCols = nranks for kTorus2D
// (0: the model uses rows = nodes, cols = ranks per node).
struct CommShape {
  int nranks = 1;
  int nnodes = 1;
  int ranksPerNode = 1;  // ranks of every node (the model assumes equal nodes)
  int torusRows = 0;
  int torusCols = 0;
};

struct AlgoEstimate {
  bool applies = false;  // false: the shape does not allow it (reason says why)
  double us = 0;         // total
  double latencyUs = 0;  // alpha terms
  double wireUs = 0;     // beta terms (bytes on links)
  double reduceUs = 0;   // gamma terms
  const char* reason = "";
};

using EveryEstimate = std::array<AlgoEstimate, static_cast<std::size_t>(ModelAlgo::kCount)>;

// The model's estimate of one AllReduce of `bytes` per rank.
AlgoEstimate estimateAllReduce(ModelAlgo algo, int64_t bytes, const CommShape& shape, const LinkFigures& links);

// The model's estimate of one call of `coll` by `algo`: `bytes` is the
// buffer of AllReduce, Broadcast and Reduce and all ranks' bytes of
// AllGather and ReduceScatter (as the planner counts them). AllReduce is
// estimateAllReduce; the others run Ring, OneShot (AllGather, ReduceScatter,
// Broadcast on one node) and HalvingDoubling (AllGather, ReduceScatter).
// The planner (algo.h, chooseAlgorithm) prices every candidate with this
// function and nothing else.
AlgoEstimate estimateCollective(CollKind coll, Algorithm algo, int64_t bytes, const CommShape& shape,
                                const LinkFigures& links);

// Every algorithm's estimate, indexed by ModelAlgo; entries with applies ==
// false cannot run on this shape (e.g. OneShot across nodes, Torus2D with a
// shape that does not tile nranks). The planner picks the cheapest entry it
// allows: cheapestAlgorithm does exactly that.
EveryEstimate estimateEveryAlgorithm(int64_t bytes, const CommShape& shape, const LinkFigures& links);

// The cheapest applicable entry whose bit is set in `allowed` (bit i =
// ModelAlgo i); kCount when none is.
ModelAlgo cheapestAlgorithm(const EveryEstimate& estimates, uint32_t allowed = ~0u);

// The survey's closed forms (seed 001), one link type: alpha in us, bytes per
// us for the bandwidth, us per byte for gamma; n ranks per group and m groups
// for the hierarchical forms (N = n m). kHierarchicalRing and kTorus2D
// both give the survey's 2D-torus formula as written (its own
// "hierarchical ring" reduces to one leader per group, which Weft does not
// build; Weft's reduce-scatters in the node, the torus with rows = nodes).
// kTree is the double binary tree's
// bound with its optimal chunk count; kOneShot has no formula there (returns
// -1). kHalvingDoubling is Rabenseifner's (Thakur, Rabenseifner and Gropp,
// 2005), which the survey does not give.
struct SeedTerms {
  double alphaUs;
  double bytesPerUs;
  double usPerByteReduce;
};
double seedClosedForm(ModelAlgo algo, double bytes, int nranks, int groupSize, const SeedTerms& terms);

// The 2D torus with each phase's bytes counted as the schedule moves them:
// the column allreduce runs on the S/n bytes the row reduce-scatter left
// (the survey's formula, above, prices it at S). m rows, n columns.
double torusClosedForm(double bytes, int rows, int cols, const SeedTerms& terms);

// The double binary tree's bound with `chunks` chunks per tree:
// (2h + 2k)(2 alpha + S/(kB) + S/(2k) C), h = ceil(log2 N).
double seedTreeBound(double bytes, int nranks, double chunks, const SeedTerms& terms);

// The double binary tree's chunk count that minimises its bound: k =
// sqrt(S h / (2 alpha B)), h = ceil(log2 N), at least 1.
double seedTreeChunks(double bytes, int nranks, const SeedTerms& terms);

}  // namespace weft::tuning
