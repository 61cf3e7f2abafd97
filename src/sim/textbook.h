// Textbook AllReduce schedules that Weft does not run (yet): each exchange
// is one whole message, as the formulas assume. Ranks are numbered node by
// node. Ranks beyond the largest power of two p fold in (rank p+i sends
// its data to rank i first) and fold out (rank i sends it the result last).
#pragma once

#include <vector>

#include "sim/flow_schedule.h"

namespace weft::sim {

// Butterfly (recursive doubling): log2 p rounds; in round i rank r sends all
// S bytes to r ^ 2^i, receives the partner's and combines them.
class ButterflySchedule : public FlowSchedule {
 public:
  ButterflySchedule(int nranks, double bytes);
  int actors() const override { return nranks_; }
  bool next(int actor, Op* op) override;

 private:
  int nranks_, pow2_, rounds_;
  double bytes_;
  std::vector<int32_t> foldIn_, foldOut_;  // per extra rank (r - p)
  std::vector<int32_t> exchange_;          // round * p + r: r -> r ^ 2^round
  std::vector<int> stage_;
};

// Recursive halving then doubling (Rabenseifner): reduce-scatter rounds at
// distance 1, 2, 4, ... exchanging half of what is left, then allgather
// rounds back down. The nearest partners first, so the largest halves stay
// inside a node.
class HalvingDoublingSchedule : public FlowSchedule {
 public:
  HalvingDoublingSchedule(int nranks, double bytes);
  int actors() const override { return nranks_; }
  bool next(int actor, Op* op) override;

 private:
  int nranks_, pow2_, rounds_;
  double bytes_;
  std::vector<int32_t> foldIn_, foldOut_;
  std::vector<int32_t> exchange_;  // round * p + r, used by both halves
  std::vector<int> stage_;
};

// 2D torus over rows x cols ranks (row-major): ring reduce-scatter along
// each row, ring allreduce along each column on the row's 1/cols share,
// ring allgather along each row. The hierarchical ring is the torus whose
// rows are the nodes. `actors` < nranks simulates only the first `actors`
// ranks, whole rows and whole nodes, every peer beyond them standing for
// the rank at the same place in the simulated block (node-periodic mode:
// exact, since every rank moves the same bytes).
class TorusSchedule : public FlowSchedule {
 public:
  TorusSchedule(int rows, int cols, double bytes, int actors, int ranksPerNode);
  int actors() const override { return actors_; }
  bool next(int actor, Op* op) override;

 private:
  int rows_, cols_, actors_;
  double bytes_;
  std::vector<int32_t> rowScatter_, column_, rowGather_;  // per simulated rank: its outgoing connection
  std::vector<int32_t> rowScatterIn_, columnIn_, rowGatherIn_;
  std::vector<int> stage_;
};

}  // namespace weft::sim
