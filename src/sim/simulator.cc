#include "sim/simulator.h"

#include <algorithm>
#include <functional>
#include <memory>

#include "graph/channel_budget.h"
#include "graph/search.h"
#include "sim/engine.h"
#include "sim/network.h"
#include "sim/textbook.h"
#include "sim/weft_schedules.h"
#include "tuning/algo.h"
#include "tuning/tuning.h"

namespace weft::sim {
namespace {

using tuning::ModelAlgo;

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

uint64_t hashOf(const std::vector<int>& v) {
  uint64_t h = v.size();
  for (int x : v) h = mix(h, static_cast<uint64_t>(static_cast<uint32_t>(x)));
  return h;
}

// Channels whose schedules are identical run once and count `copies` times
// in the network's port shares.
struct Lane {
  uint64_t key;
  std::unique_ptr<FlowSchedule> schedule;
  int copies;
};

void addLane(std::vector<Lane>* lanes, uint64_t key, const std::function<std::unique_ptr<FlowSchedule>()>& make) {
  for (Lane& l : *lanes) {
    if (l.key == key) {
      ++l.copies;
      return;
    }
  }
  lanes->push_back(Lane{key, make(), 1});
}

// Counts every lane's flows, prices the connections, runs each lane; the
// collective ends with its slowest lane.
void runLanes(std::vector<Lane>& lanes, const ClusterShape& shape, const tuning::LinkFigures& links, SimResult* r) {
  Network network(shape, links);
  for (const Lane& l : lanes) network.count(l.schedule->flows(), l.copies);
  const double usPerReduceByte = 1.0 / (links.reduceGBs * 1e3);
  for (Lane& l : lanes) {
    l.schedule->bind(network);
    const RunResult run = sim::run(*l.schedule, usPerReduceByte);
    if (!run.ok) {
      r->ran = false;
      r->note = "simulation failed: " + run.error;
      return;
    }
    r->simulatedUs = std::max(r->simulatedUs, run.finishUs);
    r->operations += run.operations;
  }
  r->ran = true;
}

SimResult refused(SimResult r, std::string why) {
  r.ran = false;
  r.note = std::move(why);
  return r;
}

}  // namespace

tuning::LinkFigures figuresFromTopology(const graph::Topology& host, const tuning::LinkFigures& base) {
  tuning::LinkFigures f = base;
  const graph::RingSearch probe = graph::searchRings(host, 1);
  const graph::ChannelBudget budget = graph::channelBudget(host, probe, 1, 1, 32);
  if (budget.capacity > 0) f.intraGBs = budget.capacity;
  const std::vector<int> nets = host.nodesOf(graph::NodeType::kNet);
  if (!nets.empty()) {
    f.nicsPerNode = static_cast<int>(nets.size());
    if (host.node(nets[0]).speedGbs > 0) f.interGBs = host.node(nets[0]).speedGbs;
  }
  return f;
}

Result<Simulator> Simulator::create(const graph::Topology& host, const SimConfig& config) {
  const int gpus = static_cast<int>(host.nodesOf(graph::NodeType::kGpu).size());
  if (gpus < 1) return errorStatus(ncclInvalidArgument, "the node's topology has no GPU (expected at least one)");
  if (config.nodes < 1) return errorStatus(ncclInvalidArgument, "nodes = %d: expected at least 1", config.nodes);
  if (config.plan.stepBytes < config.plan.elemSize || config.plan.chunkSteps < 1)
    return errorStatus(ncclInvalidArgument,
                       "FIFO step of %lld bytes and %d steps per chunk: expected a step of at "
                       "least one element and at least one step",
                       static_cast<long long>(config.plan.stepBytes), config.plan.chunkSteps);
  Simulator s;
  s.config_ = config;
  // As the cuda backend sizes them: what the links need, at most its default
  // maximum, with the rings packed at the budget's speed.
  const graph::ChannelBudget budget =
      graph::channelBudget(host, graph::searchRings(host, 1), config.nodes, std::max(1, config.plan.minChannels),
                           tuning::kCudaDefaultMaxChannels);
  const int channels = config.plan.channels > 0 ? config.plan.channels : budget.channels;
  s.config_.plan.channels = std::max(1, channels);
  graph::SearchOptions options;
  options.ringSpeed = budget.ringSpeed;
  const graph::RingSearch search = graph::searchRings(host, s.config_.plan.channels, options);
  s.plan_ = graph::buildChannelPlan(search, graph::localRanks(host), config.nodes);
  if (static_cast<int>(s.plan_.rings.size()) != s.config_.plan.channels)
    return errorStatus(ncclInternalError, "the graph search built %zu channels, not %d", s.plan_.rings.size(),
                       s.config_.plan.channels);
  for (size_t c = 0; c < s.plan_.rings.size(); ++c) {
    s.ringKey_.push_back(hashOf(s.plan_.rings[c]));
    s.treeKey_.push_back(hashOf(s.plan_.trees[c].up));
  }
  return s;
}

tuning::CommShape Simulator::shape() const {
  tuning::CommShape c;
  c.nranks = plan_.nranks;
  c.nnodes = plan_.nnodes;
  c.ranksPerNode = plan_.ranksPerNode;
  c.torusRows = config_.torusRows;
  c.torusCols = config_.torusCols;
  return c;
}

SimResult Simulator::allReduce(ModelAlgo algo, int64_t bytes) const {
  SimResult r;
  r.algo = algo;
  r.bytes = bytes;
  const tuning::AlgoEstimate model = tuning::estimateAllReduce(algo, bytes, shape(), config_.links);
  r.modelUs = model.applies ? model.us : -1;
  if (nranks() < 2) return refused(r, "one rank: nothing to simulate");
  if (bytes < config_.plan.elemSize) return refused(r, "less than one element");
  switch (algo) {
    case ModelAlgo::kRing: return weftRing(bytes, r);
    case ModelAlgo::kTree: return weftTree(bytes, r);
    case ModelAlgo::kOneShot: return weftOneShot(bytes, r);
    default: return textbook(algo, bytes, r);
  }
}

SimResult Simulator::weftRing(int64_t bytes, SimResult r) const {
  r.weftSchedule = true;
  const std::vector<ChannelShare> shares = planAllReduce(bytes, false, treeDepth(), config_.plan);
  double fullOps = 0;
  for (const ChannelShare& s : shares) fullOps += WeftRingSchedule::fullOperations(s, config_.plan, nranks());
  r.nodePeriodic = nodes() > 1 && (config_.mode == Mode::kNodePeriodic ||
                                   (config_.mode == Mode::kAuto && fullOps > config_.maxExactOperations));
  const int positions = r.nodePeriodic ? ranksPerNode() : nranks();
  const int nics = std::max(1, config_.links.nicsPerNode);
  std::vector<Lane> lanes;
  for (const ChannelShare& s : shares) {
    const size_t c = static_cast<size_t>(s.channel);
    const uint64_t key = mix(mix(mix(ringKey_[c], s.count), s.chunkElems), static_cast<uint64_t>(s.channel % nics));
    addLane(&lanes, key,
            [&] { return std::make_unique<WeftRingSchedule>(plan_.rings[c], s, config_.plan, positions, s.channel); });
  }
  runLanes(lanes, ClusterShape{nodes(), ranksPerNode()}, config_.links, &r);
  if (r.ran) r.note = strFormat("Weft ring, %zu channels", shares.size());
  return r;
}

SimResult Simulator::weftTree(int64_t bytes, SimResult r) const {
  r.weftSchedule = true;
  const std::vector<ChannelShare> shares = planAllReduce(bytes, true, treeDepth(), config_.plan);
  const int nics = std::max(1, config_.links.nicsPerNode);
  std::vector<Lane> lanes;
  for (const ChannelShare& s : shares) {
    const size_t c = static_cast<size_t>(s.channel);
    const uint64_t key = mix(mix(mix(treeKey_[c], s.count), s.chunkElems), static_cast<uint64_t>(s.channel % nics));
    addLane(&lanes, key,
            [&] { return std::make_unique<WeftTreeSchedule>(plan_.trees[c], s, config_.plan, s.channel); });
  }
  runLanes(lanes, ClusterShape{nodes(), ranksPerNode()}, config_.links, &r);
  if (r.ran) r.note = strFormat("Weft double binary tree, %zu channels", shares.size());
  return r;
}

SimResult Simulator::weftOneShot(int64_t bytes, SimResult r) const {
  r.weftSchedule = true;
  if (nodes() != 1 || nranks() > tuning::kOneShotMaxRanks)
    return refused(r, strFormat("one-shot runs on one node of 2 to %d ranks", tuning::kOneShotMaxRanks));
  const std::vector<ChannelShare> shares = planAllReduce(bytes, false, treeDepth(), config_.plan);
  std::vector<Lane> lanes;
  for (const ChannelShare& s : shares)
    addLane(&lanes, mix(s.count, 1), [&] { return std::make_unique<WeftOneShotSchedule>(nranks(), s, config_.plan); });
  runLanes(lanes, ClusterShape{nodes(), ranksPerNode()}, config_.links, &r);
  if (r.ran) r.note = strFormat("Weft one-shot, %zu channels", shares.size());
  return r;
}

SimResult Simulator::textbook(ModelAlgo algo, int64_t bytes, SimResult r) const {
  const int k = nranks(), g = ranksPerNode();
  std::unique_ptr<FlowSchedule> schedule;
  const double s = static_cast<double>(bytes);
  if (algo == ModelAlgo::kButterfly) schedule = std::make_unique<ButterflySchedule>(k, s);
  if (algo == ModelAlgo::kHalvingDoubling) schedule = std::make_unique<HalvingDoublingSchedule>(k, s);
  if (algo == ModelAlgo::kHierarchicalRing || algo == ModelAlgo::kTorus2D) {
    const bool hier = algo == ModelAlgo::kHierarchicalRing;
    const int rows = !hier && config_.torusRows > 0 ? config_.torusRows : nodes();
    const int cols = !hier && config_.torusCols > 0 ? config_.torusCols : g;
    if (rows < 2 || cols < 2) return refused(r, strFormat("needs at least 2 x 2 (here %d x %d)", rows, cols));
    if (rows * cols != k) return refused(r, strFormat("%d x %d is not %d ranks", rows, cols, k));
    if (cols % g != 0 && g % cols != 0)
      return refused(r, strFormat("a row of %d ranks neither holds whole nodes of %d nor divides one", cols, g));
    const double fullOps = static_cast<double>(k) * 4.0 * (cols + rows - 2);
    r.nodePeriodic = nodes() > 1 && (config_.mode == Mode::kNodePeriodic ||
                                     (config_.mode == Mode::kAuto && fullOps > config_.maxExactOperations));
    const int actors = r.nodePeriodic ? std::max(cols, g) : k;
    schedule = std::make_unique<TorusSchedule>(rows, cols, s, actors, g);
    r.note = strFormat("textbook %s, %d x %d", hier ? "hierarchical ring" : "2D torus", rows, cols);
  }
  if (!schedule) return refused(r, "no schedule for this algorithm");
  if (r.note.empty()) r.note = algo == ModelAlgo::kButterfly ? "textbook butterfly" : "textbook halving-doubling";
  std::vector<Lane> lanes;
  lanes.push_back(Lane{0, std::move(schedule), 1});
  const std::string note = r.note;
  runLanes(lanes, ClusterShape{nodes(), g}, config_.links, &r);
  if (r.ran) r.note = note;
  return r;
}

}  // namespace weft::sim
