// weft-sim's core: a cluster of identical nodes, the channels Weft's graph
// search builds for it, and one simulated AllReduce per (algorithm, size).
//
// Ring, Tree and OneShot replay Weft's own schedule: the rings and trees of
// graph::buildChannelPlan for N copies of the host, the planner's channels
// and chunks (weft_plan.h), every FIFO step of every rank (weft_schedules.h).
// Butterfly, HalvingDoubling, HierRing and Torus2D are textbook schedules
// (textbook.h), which Weft does not run: their results say so.
//
// Every channel runs at once; flows that share a port share its bandwidth
// (network.h). Channels with identical schedules are simulated once.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/plan.h"
#include "graph/topo.h"
#include "sim/weft_plan.h"
#include "tuning/cost_model.h"

namespace weft::sim {

enum class Mode { kAuto, kExact, kNodePeriodic };

struct SimConfig {
  int nodes = 1;
  tuning::LinkFigures links;
  PlanParams plan;                   // plan.channels <= 0: as many as the host's links need (graph::channelBudget)
  int torusRows = 0, torusCols = 0;  // 0: rows = nodes, cols = ranks per node
  // kAuto simulates every rank unless the ring-based schedules would take
  // more than maxExactOperations operations; then it simulates one node
  // (node-periodic mode: nodes are identical, so every node's ranks follow
  // the same times).
  Mode mode = Mode::kAuto;
  double maxExactOperations = 2e7;
};

struct SimResult {
  tuning::ModelAlgo algo = tuning::ModelAlgo::kRing;
  int64_t bytes = 0;
  bool ran = false;
  std::string note;        // why it did not run, or how it ran
  double simulatedUs = 0;  // simulated time of one AllReduce
  double modelUs = 0;      // the cost model's estimate (tuning::estimateAllReduce)
  int64_t operations = 0;  // operations the engine executed
  bool nodePeriodic = false;
  bool weftSchedule = false;  // Weft's own schedule (else a textbook one)
};

// Link bandwidths of `host` (latencies and gamma are kept from `base`):
// intraGBs what the graph search's rings can move per direction
// (graph::channelBudget's capacity), interGBs one NET's port speed and
// nicsPerNode the NETs of the host (none: base's figures are kept).
tuning::LinkFigures figuresFromTopology(const graph::Topology& host, const tuning::LinkFigures& base);

class Simulator {
 public:
  // `host` is one node (its GPUs become the node's ranks).
  static Result<Simulator> create(const graph::Topology& host, const SimConfig& config);

  SimResult allReduce(tuning::ModelAlgo algo, int64_t bytes) const;

  int nranks() const { return plan_.nranks; }
  int nodes() const { return plan_.nnodes; }
  int ranksPerNode() const { return plan_.ranksPerNode; }
  int channels() const { return static_cast<int>(plan_.rings.size()); }
  int treeDepth() const { return plan_.trees.empty() ? 0 : plan_.trees.back().depth; }
  const SimConfig& config() const { return config_; }
  tuning::CommShape shape() const;

 private:
  SimResult weftRing(int64_t bytes, SimResult r) const;
  SimResult weftTree(int64_t bytes, SimResult r) const;
  SimResult weftOneShot(int64_t bytes, SimResult r) const;
  SimResult textbook(tuning::ModelAlgo algo, int64_t bytes, SimResult r) const;

  SimConfig config_;
  graph::ChannelPlan plan_;
  std::vector<uint64_t> ringKey_, treeKey_;  // per channel: identical schedules share a key
};

}  // namespace weft::sim
