// StepTally counts the FIFO steps a work item moves on each connection by
// running the algorithms with counting primitives; the proxy posts exactly
// that many network sends and receives. Checked three ways: against what
// flows when the real host data path runs the same work on k threads over
// in-process FIFOs (the final tail/head counters), against counts derived
// independently from each algorithm's definition, and sender against
// receiver on every connection.
#include "device/step_tally.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#include "device/backend/host/host_run.h"
#include "fifo_link.h"
#include "transport/connection.h"

namespace weft::device {
namespace {

uint64_t tallied(const StepTally& tally, const FifoEnd* end) {
  for (int i = 0; i < tally.size(); ++i)
    if (tally.end(i) == end) return tally.steps(i);
  return 0;
}

// Runs each rank's work items on its own thread with the host data path.
void runRanks(const std::vector<ChannelView>& views, const std::vector<std::vector<WorkItem>>& items) {
  HostWaitConfig config;
  config.spinCount = 16;                 // the test machine's cores are few and shared
  config.timeoutNs = 30 * 1000000000ll;  // a miscount on the data path ends as a failed wait, not a hang
  std::vector<WaitFailureInfo> failures(views.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < views.size(); ++r)
    threads.emplace_back([&, r] { failures[r] = hostRunChannel(views[r], items[r].data(), items[r].size(), config); });
  for (std::thread& t : threads) t.join();
  for (size_t r = 0; r < views.size(); ++r)
    ASSERT_EQ(failures[r].kind, WaitFailure::kNone) << "rank " << r << " waited on " << failures[r].site.peer;
}

// ---- rings -------------------------------------------------------------------------

// k ranks in ring order `order` (position -> rank), link p from order[p] to order[p+1].
struct Ring {
  std::vector<int32_t> order;
  std::vector<std::unique_ptr<Link>> links;  // by position of the sender
  std::vector<int> position;                 // rank -> position

  Ring(std::vector<int32_t> ringOrder, int64_t stepBytes) : order(std::move(ringOrder)), position(order.size()) {
    const int k = static_cast<int>(order.size());
    for (int p = 0; p < k; ++p) {
      position[static_cast<size_t>(order[static_cast<size_t>(p)])] = p;
      links.push_back(std::make_unique<Link>(stepBytes, order[static_cast<size_t>(p)], at(p + 1)));
    }
  }
  int k() const { return static_cast<int>(order.size()); }
  int at(int p) const { return order[static_cast<size_t>(ringMod(p, k()))]; }
  Link& sendOf(int rank) { return *links[static_cast<size_t>(position[static_cast<size_t>(rank)])]; }
  Link& recvOf(int rank) { return *links[static_cast<size_t>(ringMod(position[static_cast<size_t>(rank)] - 1, k()))]; }

  ChannelView view(int rank) {
    ChannelView v{};
    v.id = 0;
    v.rank = rank;
    const int p = position[static_cast<size_t>(rank)];
    v.ring = RingView{k(), p, at(p - 1), at(p + 1), order.data()};
    v.ringSend = &sendOf(rank).producer;
    v.ringRecv = &recvOf(rank).consumer;
    v.tree.up = -1;
    for (int& child : v.tree.down) child = -1;
    return v;
  }
};

struct RingCase {
  Func func;
  int k;
  uint64_t count;         // elements per rank (AllReduce, Broadcast, Reduce: of the whole buffer)
  uint64_t channelStart;  // this channel's share
  uint64_t channelCount;
  uint64_t chunkElems;
  uint64_t alignElems;
  int64_t stepBytes;
  int root;
};

bool dataOnly(Func func) { return func == Func::kAllGather || func == Func::kBroadcast; }
int64_t elemBytes(Func func) { return dataOnly(func) ? 1 : 4; }

// Steps rank `rank` should send to next and receive from prev, from each
// algorithm's definition (ring.h's comments), not from its code.
std::pair<uint64_t, uint64_t> expectedRingSteps(const RingCase& c, const Ring& ring, int rank) {
  const int64_t stepElems = c.stepBytes / elemBytes(c.func);
  const int64_t n = static_cast<int64_t>(c.channelCount), chunk = static_cast<int64_t>(c.chunkElems);
  const int k = c.k, p = ring.position[static_cast<size_t>(rank)];
  auto steps = [&](int64_t len) { return static_cast<uint64_t>(len > 0 ? divUp(len, stepElems) : 0); };
  uint64_t perChunkSteps = 0;  // one pass of every chunk, once
  for (int64_t base = 0; base < n; base += chunk) perChunkSteps += steps(minOf(chunk, n - base));
  const int prev = ring.at(p - 1), next = ring.at(p + 1);
  switch (c.func) {
    case Func::kAllReduce: {
      // Per loop of k segments: segment j is reduced on its way from position
      // j+1 to j (sent by every position but j), then gathered from j around
      // to j-1 (sent by every position but j-1). Receives mirror the sends
      // of the previous position.
      uint64_t sends = 0, recvs = 0;
      const int64_t align = static_cast<int64_t>(c.alignElems);
      for (int64_t base = 0; base < n; base += chunk * k) {
        const int64_t real = minOf(chunk, roundUp(divUp(n - base, static_cast<int64_t>(k)), align));
        for (int j = 0; j < k; ++j) {
          const uint64_t s = steps(minOf(real, n - base - j * real));
          sends += (j != p ? s : 0) + (j != ringMod(p + 1, k) ? s : 0);
          recvs += (j != ringMod(p - 1, k) ? s : 0) + (j != p ? s : 0);
        }
      }
      return {sends, recvs};
    }
    case Func::kReduceScatter:
    case Func::kAllGather: return {(k - 1) * perChunkSteps, (k - 1) * perChunkSteps};
    case Func::kBroadcast: return {next != c.root ? perChunkSteps : 0, rank != c.root ? perChunkSteps : 0};
    case Func::kReduce: return {rank != c.root ? perChunkSteps : 0, prev != c.root ? perChunkSteps : 0};
    default: return {0, 0};
  }
}

// Buffers for one rank, large enough for any of the ring collectives.
struct Buffers {
  std::vector<uint32_t> send, recv;
  explicit Buffers(const RingCase& c) : send(c.count * static_cast<uint64_t>(c.k)), recv(send.size()) {}
};

WorkItem ringItem(const RingCase& c, Buffers& buffers) {
  WorkItem item{};
  item.kind = WorkItem::Kind::kColl;
  CollWork& w = item.coll;
  w.func = c.func;
  w.algo = Algo::kRing;
  w.proto = Proto::kSimple;
  w.dtype = dataOnly(c.func) ? DataType::kUint8 : DataType::kFloat32;
  w.op = RedOpKind::kSum;
  w.root = c.root;
  w.sendbuff = buffers.send.data();
  w.recvbuff = buffers.recv.data();
  w.count = c.count;
  w.channelStart = c.channelStart;
  w.channelCount = c.channelCount;
  w.chunkElems = c.chunkElems;
  w.alignElems = c.alignElems;
  return item;
}

// Ring order (position -> rank) 1, 0, k-1, k-2, ...: reversed and rotated,
// so positions and ranks differ.
std::vector<int32_t> scrambledOrder(int k) {
  std::vector<int32_t> order;
  for (int p = 0; p < k; ++p) order.push_back(ringMod(1 - p, k));
  return order;
}

bool rooted(Func func) { return func == Func::kBroadcast || func == Func::kReduce; }

// Tallies, runs and compares one case; `run` false skips the data path.
void checkRing(const RingCase& c, bool run) {
  SCOPED_TRACE(::testing::Message() << "func " << static_cast<int>(c.func) << " k=" << c.k << " count=" << c.count
                                    << " share=[" << c.channelStart << "+" << c.channelCount << ") chunk="
                                    << c.chunkElems << " stepBytes=" << c.stepBytes << " root=" << c.root);
  Ring ring(scrambledOrder(c.k), c.stepBytes);
  std::vector<Buffers> buffers(static_cast<size_t>(c.k), Buffers(c));
  std::vector<ChannelView> views;
  std::vector<std::vector<WorkItem>> items;
  std::vector<StepTally> tallies(static_cast<size_t>(c.k));
  uint64_t sentTotal = 0, receivedTotal = 0;
  for (int r = 0; r < c.k; ++r) {
    views.push_back(ring.view(r));
    items.push_back({ringItem(c, buffers[static_cast<size_t>(r)])});
    tallyWorkItem(views.back(), items.back()[0], &tallies[static_cast<size_t>(r)]);
    const uint64_t sent = tallied(tallies[static_cast<size_t>(r)], views.back().ringSend);
    const uint64_t received = tallied(tallies[static_cast<size_t>(r)], views.back().ringRecv);
    const auto [expectSent, expectReceived] = expectedRingSteps(c, ring, r);
    EXPECT_EQ(sent, expectSent) << "rank " << r << " to next";
    EXPECT_EQ(received, expectReceived) << "rank " << r << " from prev";
    sentTotal += sent;
    receivedTotal += received;
  }
  EXPECT_EQ(sentTotal, receivedTotal);
  if (!run) return;
  ASSERT_NO_FATAL_FAILURE(runRanks(views, items));
  for (int r = 0; r < c.k; ++r) {
    const StepTally& t = tallies[static_cast<size_t>(r)];
    EXPECT_EQ(tallied(t, views[static_cast<size_t>(r)].ringSend), ring.sendOf(r).published()) << "rank " << r;
    EXPECT_EQ(tallied(t, views[static_cast<size_t>(r)].ringRecv), ring.recvOf(r).released()) << "rank " << r;
  }
}

const Func kRingFuncs[] = {Func::kAllReduce, Func::kReduceScatter, Func::kAllGather, Func::kBroadcast, Func::kReduce};

TEST(StepTallyRing, MatchesWhatTheDataPathMoves) {
  struct Shape {
    uint64_t count, start, share, chunk, align;
    int64_t stepBytes;
  };
  const Shape shapes[] = {{1000, 0, 1000, 64, 4, 64},
                          {777, 100, 500, 96, 8, 256},
                          {3, 0, 3, 4, 1, 64},
                          {4099, 3, 4096, 1024, 16, 4096},
                          {0, 0, 0, 64, 4, 64}};
  for (Func func : kRingFuncs)
    for (int k = 2; k <= 5; ++k)
      for (const Shape& s : shapes)
        checkRing({func, k, s.count, s.start, s.share, s.chunk, s.align, s.stepBytes, (k + 1) / 2}, true);
}

TEST(StepTallyRing, MatchesTheAlgorithmsDefinitionOverAGrid) {
  const uint64_t counts[] = {1, 2, 5, 17, 64, 100, 1023, 4096, 10007};
  const uint64_t chunks[] = {8, 24, 256, 1 << 20};
  const int64_t stepBytes[] = {16, 100, 4096};
  for (Func func : kRingFuncs)
    for (int k = 2; k <= 5; ++k)
      for (uint64_t count : counts)
        for (uint64_t chunk : chunks)
          for (int64_t step : stepBytes)
            for (int root = 0; root < k; root += rooted(func) ? 1 : k)
              checkRing({func, k, count, 0, count, chunk, 8, step, root}, false);
}

// Several items on one channel add up, and a point-to-point item counts its
// send and receive sides: AllReduce, Broadcast and send-to-next/receive-from-
// prev in one work list, run back to back on persistent FIFOs.
TEST(StepTallyRing, ItemsOfOneWorkListAddUp) {
  for (int k = 2; k <= 4; ++k) {
    const RingCase allReduce{Func::kAllReduce, k, 900, 0, 900, 64, 4, 128, 0};
    const RingCase broadcast{Func::kBroadcast, k, 3000, 0, 3000, 512, 1, 128, k - 1};
    Ring ring(scrambledOrder(k), 128);
    std::vector<Buffers> buffers(static_cast<size_t>(k), Buffers(broadcast));
    std::vector<ChannelView> views;
    std::vector<std::vector<WorkItem>> items;
    std::vector<StepTally> tallies(static_cast<size_t>(k));
    for (int r = 0; r < k; ++r) {
      Buffers& b = buffers[static_cast<size_t>(r)];
      views.push_back(ring.view(r));
      WorkItem p2p{};
      p2p.kind = WorkItem::Kind::kP2p;
      p2p.p2p = P2pWork{views.back().ringSend,
                        views.back().ringRecv,
                        reinterpret_cast<const char*>(b.send.data()),
                        reinterpret_cast<char*>(b.recv.data()),
                        1001,
                        1001};
      items.push_back({ringItem(allReduce, b), ringItem(broadcast, b), p2p});
      for (const WorkItem& item : items.back()) tallyWorkItem(views.back(), item, &tallies[static_cast<size_t>(r)]);
      const uint64_t p2pSteps = divUp<uint64_t>(1001, 128);
      const auto ar = expectedRingSteps(allReduce, ring, r);
      const auto bc = expectedRingSteps(broadcast, ring, r);
      EXPECT_EQ(tallied(tallies[static_cast<size_t>(r)], views.back().ringSend), ar.first + bc.first + p2pSteps);
      EXPECT_EQ(tallied(tallies[static_cast<size_t>(r)], views.back().ringRecv), ar.second + bc.second + p2pSteps);
    }
    ASSERT_NO_FATAL_FAILURE(runRanks(views, items));
    for (int r = 0; r < k; ++r) {
      EXPECT_EQ(tallied(tallies[static_cast<size_t>(r)], views[static_cast<size_t>(r)].ringSend),
                ring.sendOf(r).published());
      EXPECT_EQ(tallied(tallies[static_cast<size_t>(r)], views[static_cast<size_t>(r)].ringRecv),
                ring.recvOf(r).released());
    }
  }
}

// ---- trees -------------------------------------------------------------------------

// k ranks in a tree of the given arity rooted at rank 0: parent (r-1)/arity.
struct Tree {
  int k, arity;
  std::vector<std::unique_ptr<Link>> up, down;  // by child rank: child -> parent, parent -> child

  Tree(int ranks, int treeArity, int64_t stepBytes) : k(ranks), arity(treeArity), up(ranks), down(ranks) {
    for (int r = 1; r < k; ++r) {
      up[static_cast<size_t>(r)] = std::make_unique<Link>(stepBytes, r, parent(r));
      down[static_cast<size_t>(r)] = std::make_unique<Link>(stepBytes, parent(r), r);
    }
  }
  int parent(int r) const { return r == 0 ? -1 : (r - 1) / arity; }

  ChannelView view(int rank) {
    ChannelView v{};
    v.rank = rank;
    v.ring = RingView{k, rank, -1, -1, nullptr};
    v.tree.up = parent(rank);
    for (int& child : v.tree.down) child = -1;
    if (rank > 0) {
      v.treeUpSend = &up[static_cast<size_t>(rank)]->producer;
      v.treeDownRecv = &down[static_cast<size_t>(rank)]->consumer;
    }
    for (int child = arity * rank + 1; child <= arity * rank + arity && child < k; ++child) {
      const int c = v.tree.nDown++;
      v.tree.down[c] = child;
      v.treeUpRecv[c] = &up[static_cast<size_t>(child)]->consumer;
      v.treeDownSend[c] = &down[static_cast<size_t>(child)]->producer;
    }
    return v;
  }
};

// Tree AllReduce with the data split over `channels` channels: on every
// edge of every channel, steps up == steps down == the channel's chunk steps,
// the tallies of both ends agree, and the data path moves exactly that.
TEST(StepTallyTree, UpEqualsDownOnEveryEdgeForEveryChannelCount) {
  const uint64_t count = 5000, chunk = 256;
  const int64_t stepBytes = 256;  // 64 floats
  for (int arity = 2; arity <= kMaxTreeChildren; ++arity)
    for (int k = 2; k <= 7; ++k)
      for (uint64_t channels = 1; channels <= 3; ++channels)
        for (uint64_t c = 0; c < channels; ++c) {
          SCOPED_TRACE(::testing::Message() << "arity " << arity << " k=" << k << " channel " << c << "/" << channels);
          const uint64_t share = roundUp<uint64_t>(divUp(count, channels), 4);
          const uint64_t start = c * share, n = minOf(share, count - start);
          uint64_t expected = 0;
          for (uint64_t base = 0; base < n; base += chunk) expected += divUp<uint64_t>(minOf(chunk, n - base), 64);
          Tree tree(k, arity, stepBytes);
          std::vector<std::vector<float>> buffers(static_cast<size_t>(k), std::vector<float>(count, 1.0f));
          std::vector<ChannelView> views;
          std::vector<std::vector<WorkItem>> items;
          std::vector<StepTally> tallies(static_cast<size_t>(k));
          for (int r = 0; r < k; ++r) {
            views.push_back(tree.view(r));
            WorkItem item{};
            item.kind = WorkItem::Kind::kColl;
            item.coll = CollWork{Func::kAllReduce,
                                 Algo::kTree,
                                 Proto::kSimple,
                                 DataType::kFloat32,
                                 RedOpKind::kSum,
                                 0,  // scalarIsPointer
                                 0,  // direct
                                 0,  // directRead
                                 0,  // root
                                 0,  // seq
                                 buffers[static_cast<size_t>(r)].data(),
                                 buffers[static_cast<size_t>(r)].data(),
                                 count,
                                 start,
                                 n,
                                 chunk,
                                 4,
                                 0,
                                 nullptr};
            items.push_back({item});
            tallyWorkItem(views.back(), item, &tallies[static_cast<size_t>(r)]);
          }
          for (int r = 1; r < k; ++r) {
            const StepTally& mine = tallies[static_cast<size_t>(r)];
            const StepTally& parents = tallies[static_cast<size_t>(tree.parent(r))];
            EXPECT_EQ(tallied(mine, &tree.up[static_cast<size_t>(r)]->producer), expected) << "rank " << r << " up";
            EXPECT_EQ(tallied(parents, &tree.up[static_cast<size_t>(r)]->consumer), expected) << "rank " << r;
            EXPECT_EQ(tallied(parents, &tree.down[static_cast<size_t>(r)]->producer), expected) << "rank " << r;
            EXPECT_EQ(tallied(mine, &tree.down[static_cast<size_t>(r)]->consumer), expected) << "rank " << r << " down";
          }
          ASSERT_NO_FATAL_FAILURE(runRanks(views, items));
          for (int r = 1; r < k; ++r) {
            EXPECT_EQ(tree.up[static_cast<size_t>(r)]->published(), expected) << "rank " << r << " up";
            EXPECT_EQ(tree.down[static_cast<size_t>(r)]->published(), expected) << "rank " << r << " down";
            EXPECT_EQ(tree.down[static_cast<size_t>(r)]->released(), expected) << "rank " << r << " down";
          }
          for (int r = 0; r < k; ++r)
            EXPECT_EQ(buffers[static_cast<size_t>(r)][start], static_cast<float>(k)) << "the sum, on rank " << r;
        }
}

}  // namespace
}  // namespace weft::device
