// The schedules Weft runs, replayed step by step: one channel's ring
// AllReduce (device/ring.h) and tree AllReduce (device/tree.h), over the
// rings and trees the graph search built and the chunks the planner cut
// (weft_plan.h). Every verb call becomes one operation per FIFO step of at
// most stepBytes, as the Simple protocol's primitives move it.
#pragma once

#include <vector>

#include "graph/trees.h"
#include "sim/flow_schedule.h"
#include "sim/weft_plan.h"

namespace weft::sim {

// One channel's ring AllReduce. `order` lists the ranks in ring order.
// positions == order.size() simulates every rank. positions < order.size()
// simulates only the first `positions` (one node's, nodes being identical
// and the ring visiting them in order): the last of them sends to the
// first, standing in for the next node's, which is exact when every ring
// segment has the same length; the tail loop's segments are then all given
// their mean length (node-periodic mode).
class WeftRingSchedule : public FlowSchedule {
 public:
  WeftRingSchedule(const std::vector<int>& order, const ChannelShare& share, const PlanParams& params, int positions,
                   int rail);
  int actors() const override { return positions_; }
  bool next(int actor, Op* op) override;

  // Operations every rank would run in the full (not node-periodic) ring.
  static double fullOperations(const ChannelShare& share, const PlanParams& params, int nranks);

 private:
  struct Cursor {
    uint64_t base = 0;
    int64_t verb = 0;  // 0 .. 2k-2 within a loop
    double offset = 0;
  };
  // Segment j's length in the loop starting at `base`; `filled`: segments
  // that are not empty.
  double segment(uint64_t base, int64_t j, int64_t* filled) const;

  int k_;
  int positions_;
  ChannelShare share_;
  double stepElems_;
  double elemSize_;
  bool meanTail_;
  std::vector<Cursor> cursors_;
};

// One channel's tree AllReduce over `tree` (reduce up, then broadcast down,
// both pipelined by chunk).
class WeftTreeSchedule : public FlowSchedule {
 public:
  WeftTreeSchedule(const graph::RankTree& tree, const ChannelShare& share, const PlanParams& params, int rail);
  int actors() const override { return static_cast<int>(tree_.up.size()); }
  bool next(int actor, Op* op) override;

 private:
  struct Cursor {
    int phase = 0;  // 0 up, 1 down, 2 done
    uint64_t base = 0;
    double offset = 0;
  };
  const graph::RankTree& tree_;
  ChannelShare share_;
  double stepElems_;
  double elemSize_;
  std::vector<int32_t> upConn_;    // rank -> parent
  std::vector<int32_t> downConn_;  // parent -> rank
  std::vector<Cursor> cursors_;
};

// One channel's one-shot AllReduce on one node (device/oneshot.h): per
// chunk every rank writes its data to every peer (a send per FIFO step),
// then combines what the peers wrote (a receive per FIFO step).
class WeftOneShotSchedule : public FlowSchedule {
 public:
  WeftOneShotSchedule(int nranks, const ChannelShare& share, const PlanParams& params);
  int actors() const override { return nranks_; }
  bool next(int actor, Op* op) override;

 private:
  struct Cursor {
    double base = 0;    // the chunk's first byte
    double offset = 0;  // bytes of the chunk sent or combined so far
    bool combining = false;
  };
  int nranks_;
  double bytes_;
  double chunkBytes_;
  double stepBytes_;
  std::vector<int32_t> conn_;  // from * nranks + to
  std::vector<Cursor> cursors_;
};

}  // namespace weft::sim
