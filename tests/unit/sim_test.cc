// The simulator (src/sim/): its engine's FIFO semantics, every algorithm's
// simulated time against the survey's closed forms (seed 001) where they
// apply, the node-periodic mode against the full one, and the double binary
// tree's small-message advantage over the ring at 24,576 GPUs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "device/step_fifo.h"
#include "graph/topo.h"
#include "sim/engine.h"
#include "sim/flow_schedule.h"
#include "sim/simulator.h"

namespace weft::sim {
namespace {

using tuning::ModelAlgo;

static_assert(kWeftFifoSlots == device::kFifoSteps, "the simulator's FIFO depth is Weft's");

// Two actors, one connection: the sender writes `messages` messages, the
// receiver combines each (slow), so the window decides when the sender ends.
class PingSchedule : public Schedule {
 public:
  PingSchedule(int messages, int window) : messages_(messages) {
    Connection c;
    c.fromActor = 0;
    c.toActor = 1;
    c.latUs = 1;
    c.usPerByte = 1e-3;
    c.window = window;
    conns_.push_back(c);
  }
  int actors() const override { return 2; }
  const std::vector<Connection>& connections() const override { return conns_; }
  bool next(int actor, Op* op) override {
    if (done_[actor] == messages_) return false;
    ++done_[actor];
    op->bytes = 1000;
    if (actor == 0) op->send[op->nSend++] = 0;
    if (actor == 1) {
      op->recv[op->nRecv++] = 0;
      op->reduceBytes = 1000;
    }
    return true;
  }

 private:
  int messages_;
  int done_[2] = {0, 0};
  std::vector<Connection> conns_;
};

TEST(SimEngine, SenderRunsAtMostWindowMessagesAhead) {
  // Writes take 1 us, arrive 1 us later; the receiver combines for 10 us.
  // Receiver: message m ends at 12 + 10 m. With 2 slots the sender writes
  // message 9 once message 7 was released (at 82): it ends at 83.
  PingSchedule narrow(10, 2);
  const RunResult a = run(narrow, 0.01);
  ASSERT_TRUE(a.ok) << a.error;
  EXPECT_DOUBLE_EQ(a.actorFinishUs[1], 102);
  EXPECT_DOUBLE_EQ(a.actorFinishUs[0], 83);
  EXPECT_EQ(a.operations, 20);
  PingSchedule wide(10, 10);
  const RunResult b = run(wide, 0.01);
  ASSERT_TRUE(b.ok) << b.error;
  EXPECT_DOUBLE_EQ(b.actorFinishUs[0], 10);
  EXPECT_DOUBLE_EQ(b.actorFinishUs[1], 102);
}

// Both actors receive first: nothing can start.
class StuckSchedule : public Schedule {
 public:
  StuckSchedule() {
    conns_.resize(2);
    conns_[0].fromActor = 0;
    conns_[0].toActor = 1;
    conns_[1].fromActor = 1;
    conns_[1].toActor = 0;
  }
  int actors() const override { return 2; }
  const std::vector<Connection>& connections() const override { return conns_; }
  bool next(int actor, Op* op) override {
    if (used_[actor]++) return false;
    op->recv[op->nRecv++] = actor == 0 ? 1 : 0;
    return true;
  }

 private:
  int used_[2] = {0, 0};
  std::vector<Connection> conns_;
};

TEST(SimEngine, DeadlockIsReportedNotHidden) {
  StuckSchedule stuck;
  const RunResult r = run(stuck, 0);
  EXPECT_FALSE(r.ok);
  EXPECT_NE(r.error.find("deadlock"), std::string::npos) << r.error;
}

// ---- Against the survey's closed forms: one link type everywhere (every
// rank its own node and NIC), alpha 5 us, 12.5 GB/s, gamma 1/100 GB/s.

constexpr double kAlpha = 5.0, kGBs = 12.5, kReduceGBs = 100.0;
const tuning::SeedTerms kTerms{kAlpha, kGBs * 1e3, 1.0 / (kReduceGBs * 1e3)};
const int64_t kSizes[] = {8, 64 << 10, 1 << 20, 16 << 20, 256 << 20};

SimConfig uniform(int nodes) {
  SimConfig c;
  c.nodes = nodes;
  c.links.intraLatUs = c.links.interLatUs = kAlpha;
  c.links.intraGBs = c.links.interGBs = kGBs;
  c.links.nicsPerNode = 1;
  c.links.reduceGBs = kReduceGBs;
  return c;
}

Simulator make(int perNode, const SimConfig& config) {
  auto s = Simulator::create(graph::syntheticTopology(perNode), config);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

double simulated(const Simulator& s, ModelAlgo algo, int64_t bytes) {
  const SimResult r = s.allReduce(algo, bytes);
  EXPECT_TRUE(r.ran) << r.note;
  return r.simulatedUs;
}

void expectWithin(double sim, double formula, double tolerance, const char* what, int64_t bytes) {
  const double err = std::fabs(sim - formula) / formula;
  std::printf("  %-34s %11lld B: simulated %12.2f us, closed form %12.2f us, error %5.2f %%\n", what,
              static_cast<long long>(bytes), sim, formula, 100 * err);
  EXPECT_LE(err, tolerance) << what << " at " << bytes << " bytes";
}

TEST(SimVersusSeed, RingOneChannelOneChunk) {
  // One channel, FIFO steps large enough that a segment is one message: the
  // survey's ring, 2(N-1) steps of S/N.
  SimConfig c = uniform(8);
  c.plan.channels = 1;
  c.plan.stepBytes = int64_t{1} << 30;
  c.plan.chunkSteps = 1;
  const Simulator s = make(1, c);
  for (int64_t bytes : kSizes)
    expectWithin(simulated(s, ModelAlgo::kRing, bytes),
                 tuning::seedClosedForm(ModelAlgo::kRing, static_cast<double>(bytes), 8, 1, kTerms), 0.10, "ring",
                 bytes);
}

TEST(SimVersusSeed, RingWithWeftsChannelsAndChunks) {
  // Weft's defaults (4 channels sharing the NIC, 512 KiB steps, 4 per
  // chunk): where bandwidth dominates the formula still holds.
  SimConfig c = uniform(8);
  c.plan.channels = 4;
  const Simulator s = make(1, c);
  for (int64_t bytes : {int64_t{64} << 20, int64_t{256} << 20})
    expectWithin(simulated(s, ModelAlgo::kRing, bytes),
                 tuning::seedClosedForm(ModelAlgo::kRing, static_cast<double>(bytes), 8, 1, kTerms), 0.10,
                 "ring, Weft's chunking", bytes);
}

TEST(SimVersusSeed, Butterfly) {
  const Simulator s = make(1, uniform(16));
  for (int64_t bytes : kSizes)
    expectWithin(simulated(s, ModelAlgo::kButterfly, bytes),
                 tuning::seedClosedForm(ModelAlgo::kButterfly, static_cast<double>(bytes), 16, 1, kTerms), 0.10,
                 "butterfly", bytes);
}

TEST(SimVersusSeed, HalvingDoubling) {
  const Simulator s = make(1, uniform(16));
  for (int64_t bytes : kSizes)
    expectWithin(simulated(s, ModelAlgo::kHalvingDoubling, bytes),
                 tuning::seedClosedForm(ModelAlgo::kHalvingDoubling, static_cast<double>(bytes), 16, 1, kTerms), 0.10,
                 "halving-doubling", bytes);
}

// The survey prices the torus's column phase at S where the schedule moves
// S/n: its formula holds where latency dominates; the corrected one
// everywhere, and the survey's overprices large messages.
void checkTorus(const Simulator& s, ModelAlgo algo, int rows, int cols, const char* what) {
  for (int64_t bytes : kSizes) {
    const double sim = simulated(s, algo, bytes), b = static_cast<double>(bytes);
    expectWithin(sim, tuning::torusClosedForm(b, rows, cols, kTerms), 0.10, what, bytes);
    if (bytes <= (64 << 10))
      expectWithin(sim, tuning::seedClosedForm(algo, b, rows * cols, cols, kTerms), 0.10, what, bytes);
  }
  EXPECT_LT(simulated(s, algo, 256 << 20),
            0.8 * tuning::seedClosedForm(algo, 256.0 * (1 << 20), rows * cols, cols, kTerms));
}

TEST(SimVersusSeed, Torus2D) {
  SimConfig c = uniform(16);
  c.torusRows = 4;
  c.torusCols = 4;
  checkTorus(make(1, c), ModelAlgo::kTorus2D, 4, 4, "2D torus 4x4");
}

TEST(SimVersusSeed, HierarchicalRing) {
  // 4 nodes of 4 ranks, a NIC per rank (rails): each rank's own link, as
  // the formula assumes.
  SimConfig c = uniform(4);
  c.links.nicsPerNode = 4;
  checkTorus(make(4, c), ModelAlgo::kHierarchicalRing, 4, 4, "hierarchical ring 4 nodes x 4");
}

TEST(SimVersusSeed, DoubleBinaryTree) {
  // Weft's tree on two channels (tree 0 and tree 1, half the data each),
  // chunked into the bound's optimal k chunks per tree.
  for (int64_t bytes : {int64_t{64} << 20, int64_t{256} << 20}) {
    SimConfig c = uniform(16);
    c.plan.channels = c.plan.minChannels = 2;
    const double b = static_cast<double>(bytes);
    const double k = tuning::seedTreeChunks(b, 16, kTerms);
    c.plan.stepBytes = static_cast<int64_t>(std::ceil(b / 2 / k / 64)) * 64;
    c.plan.chunkSteps = 1;
    const Simulator s = make(1, c);
    expectWithin(simulated(s, ModelAlgo::kTree, bytes), tuning::seedClosedForm(ModelAlgo::kTree, b, 16, 1, kTerms),
                 0.10, "double binary tree", bytes);
  }
}

// ---- Node-periodic mode: one node simulated, the others by symmetry.

TEST(SimNodePeriodic, MatchesTheFullSimulation) {
  SimConfig c;
  c.nodes = 8;
  c.plan.channels = 2;
  for (ModelAlgo algo : {ModelAlgo::kRing, ModelAlgo::kHierarchicalRing}) {
    for (int64_t bytes : {int64_t{1} << 20, int64_t{16} << 20}) {
      c.mode = Mode::kExact;
      const SimResult full = make(4, c).allReduce(algo, bytes);
      c.mode = Mode::kNodePeriodic;
      const SimResult periodic = make(4, c).allReduce(algo, bytes);
      ASSERT_TRUE(full.ran && periodic.ran) << full.note << periodic.note;
      EXPECT_FALSE(full.nodePeriodic);
      EXPECT_TRUE(periodic.nodePeriodic);
      EXPECT_LT(periodic.operations, full.operations);
      EXPECT_NEAR(periodic.simulatedUs, full.simulatedUs, 0.01 * full.simulatedUs)
          << tuning::modelAlgoName(algo) << " " << bytes;
    }
  }
}

// ---- The double binary tree against the ring at 24,576 GPUs (3072 nodes
// of 8), small messages. Per-hop latencies are the LL protocol's in NCCL's
// tuning model: 0.47 us over NVLink (x1.8 when the job spans nodes: 0.85),
// 5.0 us per tree level across the network.

TEST(SimAtScale, TreeCutsSmallMessageLatencyByOrdersOfMagnitude) {
  SimConfig c;
  c.nodes = 3072;
  c.links.intraLatUs = 0.85;
  c.links.interLatUs = 5.0;
  const Simulator s = make(8, c);
  ASSERT_EQ(s.nranks(), 24576);
  for (int64_t bytes : {int64_t{8}, int64_t{1} << 10}) {
    const double ring = simulated(s, ModelAlgo::kRing, bytes);
    const double tree = simulated(s, ModelAlgo::kTree, bytes);
    std::printf("  24576 ranks, %lld B: ring %.0f us, tree %.1f us, ratio %.0fx\n", static_cast<long long>(bytes), ring,
                tree, ring / tree);
    EXPECT_GT(ring / tree, 100.0);
    EXPECT_LT(ring / tree, 1000.0);
  }
}

TEST(SimAtScale, ModelAndSimulationPickTheSameOfRingAndTree) {
  SimConfig c;
  c.nodes = 16;
  c.plan.channels = 4;
  const Simulator s = make(8, c);
  for (int64_t bytes : {int64_t{8}, int64_t{1} << 30}) {
    const SimResult ring = s.allReduce(ModelAlgo::kRing, bytes);
    const SimResult tree = s.allReduce(ModelAlgo::kTree, bytes);
    ASSERT_TRUE(ring.ran && tree.ran);
    EXPECT_EQ(ring.simulatedUs < tree.simulatedUs, ring.modelUs < tree.modelUs) << bytes << " bytes";
  }
}

TEST(Simulator, RefusesWhatItCannotRun) {
  SimConfig c;
  c.nodes = 2;
  const Simulator s = make(4, c);
  const SimResult oneShot = s.allReduce(ModelAlgo::kOneShot, 1024);
  EXPECT_FALSE(oneShot.ran);
  EXPECT_NE(oneShot.note.find("one node"), std::string::npos) << oneShot.note;
  c.torusRows = 3;
  c.torusCols = 3;
  const SimResult torus = make(4, c).allReduce(ModelAlgo::kTorus2D, 1024);
  EXPECT_FALSE(torus.ran);
  EXPECT_NE(torus.note.find("is not 8 ranks"), std::string::npos) << torus.note;
  SimConfig noNodes;
  noNodes.nodes = 0;
  auto none = Simulator::create(graph::syntheticTopology(4), noNodes);
  EXPECT_FALSE(none.ok());
}

TEST(Simulator, OneShotIsOneHandOffPerChunk) {
  // One node of 3: each rank writes 1 KiB to both peers (sharing its link:
  // 2 w), the last write lands alpha later, then it combines 2 inputs.
  SimConfig c = uniform(1);
  const Simulator s = make(3, c);
  const double w = 1024 / (kGBs * 1e3), r = 1024 * kTerms.usPerByteReduce;
  EXPECT_NEAR(simulated(s, ModelAlgo::kOneShot, 1024), 2 * w + kAlpha + 2 * r, 1e-9);
  // 1 MiB in 512 KiB steps, 4 to a chunk: one chunk, two sends then two
  // combines. The sends end at 4 ws (two steps to two peers); the first
  // combine starts then (its data came at 2 ws + alpha), the second when
  // both the first combine (2 rs) and its data (alpha after the sends) allow.
  const double ws = (512 << 10) / (kGBs * 1e3), rs = (512 << 10) * kTerms.usPerByteReduce;
  EXPECT_NEAR(simulated(s, ModelAlgo::kOneShot, 1 << 20), 4 * ws + std::max(kAlpha, 2 * rs) + 2 * rs, 1e-6);
}

TEST(Simulator, LinkFiguresComeFromTheTopology) {
  tuning::LinkFigures base;
  base.intraLatUs = 0.7;
  const tuning::LinkFigures f = figuresFromTopology(graph::syntheticTopology(4, 6.0, 3.0), base);
  EXPECT_DOUBLE_EQ(f.interGBs, 3.0);  // the NET's port speed
  EXPECT_EQ(f.nicsPerNode, 1);
  EXPECT_GT(f.intraGBs, 0);
  EXPECT_NE(f.intraGBs, base.intraGBs);  // what the searched rings carry, not the default
  EXPECT_DOUBLE_EQ(f.intraLatUs, 0.7);   // latencies are kept
}

TEST(Simulator, NonPowersOfTwoFoldInAndOut) {
  // 12 ranks: 8 exchange, ranks 8..11 fold into 0..3 first and get the
  // result last. Critical path (hop = alpha + write w, r = combine): fold in
  // (alpha + w + r), two rounds among the folded ranks (2 (alpha + w + r)),
  // the third round with rank 4, which did not fold and whose message is
  // already there (w + r), the fold out (w + alpha): 4 alpha + 5 w + 4 r,
  // one alpha more than 8 ranks' 3 (alpha + w + r), not two.
  const Simulator s = make(1, uniform(12));
  const double w = 1024 / (kGBs * 1e3), r = 1024 * kTerms.usPerByteReduce;
  EXPECT_NEAR(simulated(s, ModelAlgo::kButterfly, 1024), 4 * kAlpha + 5 * w + 4 * r, 1e-9);
  const SimResult hd = s.allReduce(ModelAlgo::kHalvingDoubling, 1024);
  EXPECT_TRUE(hd.ran) << hd.note;
  EXPECT_GT(hd.simulatedUs, tuning::seedClosedForm(ModelAlgo::kHalvingDoubling, 1024, 8, 1, kTerms));
}

}  // namespace
}  // namespace weft::sim
