// One-shot AllReduce on the host data path, k ranks as threads over a full
// mesh of in-process FIFOs: every rank ends with the same bits, equal to the
// inputs combined in rank order (pre-op on each input, post-op once), for
// messages from a few elements to many FIFO slots per peer; and the step
// tally matches what actually flowed on every link.
#include "device/oneshot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "device/backend/host/host_run.h"
#include "device/step_tally.h"
#include "fifo_link.h"
#include "transport/connection.h"

namespace weft::device {
namespace {

// links[from][to], every ordered pair of k ranks.
struct Mesh {
  int k;
  std::vector<std::vector<std::unique_ptr<Link>>> links;
  Mesh(int ranks, int64_t stepBytes) : k(ranks), links(static_cast<size_t>(ranks)) {
    for (int from = 0; from < k; ++from) {
      links[static_cast<size_t>(from)].resize(static_cast<size_t>(k));
      for (int to = 0; to < k; ++to)
        if (to != from)
          links[static_cast<size_t>(from)][static_cast<size_t>(to)] = std::make_unique<Link>(stepBytes, from, to);
    }
  }
  Link& link(int from, int to) { return *links[static_cast<size_t>(from)][static_cast<size_t>(to)]; }

  ChannelView view(int rank) {
    ChannelView v{};
    v.rank = rank;
    v.tree.up = -1;
    for (int& child : v.tree.down) child = -1;
    for (int peer = 0; peer < k; ++peer) {
      if (peer == rank) continue;
      v.flatRecv[v.nFlat] = &link(peer, rank).consumer;
      v.flatSend[v.nFlat] = &link(rank, peer).producer;
      v.nFlat += 1;
    }
    v.flatOwnAt = rank;
    return v;
  }
};

struct Case {
  int k;
  uint64_t count;
  uint64_t chunkElems;
  int64_t stepBytes;
  RedOpKind op;
  bool inPlace;
};

// Input element i of rank r: values whose float sums depend on the order.
float input(int r, uint64_t i) { return static_cast<float>((i * 7 + 3) % 13) * (r % 2 ? 1e-3f : 1e3f) + 0.1f * r; }

float expected(const Case& c, uint64_t i, float scale) {
  float acc = 0;
  for (int r = 0; r < c.k; ++r) {
    const float x = c.op == RedOpKind::kPreMulSum ? input(r, i) * scale : input(r, i);
    acc = r == 0 ? x : (c.op == RedOpKind::kMax ? std::max(acc, x) : acc + x);
  }
  if (c.op == RedOpKind::kSumPostDiv) acc = acc / static_cast<float>(c.k);
  return acc;
}

void runCase(const Case& c) {
  SCOPED_TRACE(::testing::Message() << "k=" << c.k << " count=" << c.count << " chunk=" << c.chunkElems
                                    << " stepBytes=" << c.stepBytes << " op=" << static_cast<int>(c.op)
                                    << (c.inPlace ? " in-place" : ""));
  Mesh mesh(c.k, c.stepBytes);
  const float scale = 0.5f;
  std::vector<std::vector<float>> send(static_cast<size_t>(c.k)), recv(static_cast<size_t>(c.k));
  std::vector<WorkItem> items(static_cast<size_t>(c.k));
  std::vector<ChannelView> views;
  std::vector<StepTally> tallies(static_cast<size_t>(c.k));
  for (int r = 0; r < c.k; ++r) {
    auto& s = send[static_cast<size_t>(r)];
    auto& d = recv[static_cast<size_t>(r)];
    s.resize(c.count);
    for (uint64_t i = 0; i < c.count; ++i) s[i] = input(r, i);
    d.assign(c.count, -1.0f);
    WorkItem& item = items[static_cast<size_t>(r)];
    item.kind = WorkItem::Kind::kColl;
    CollWork& w = item.coll;
    w.func = Func::kAllReduce;
    w.algo = Algo::kOneShot;
    w.proto = Proto::kSimple;
    w.dtype = DataType::kFloat32;
    w.op = c.op;
    std::memcpy(&w.scalarBits, &scale, sizeof(scale));
    if (c.op == RedOpKind::kSumPostDiv) w.scalarBits = static_cast<uint64_t>(c.k);
    w.sendbuff = s.data();
    w.recvbuff = c.inPlace ? s.data() : d.data();
    w.count = c.count;
    w.channelStart = 0;
    w.channelCount = c.count;
    w.chunkElems = c.chunkElems;
    w.alignElems = 1;
    views.push_back(mesh.view(r));
    tallyWorkItem(views.back(), item, &tallies[static_cast<size_t>(r)]);
  }
  HostWaitConfig config;
  config.spinCount = 16;
  config.timeoutNs = 5 * 1000000000ll;  // a protocol error ends as a failed wait
  std::vector<WaitFailureInfo> failures(static_cast<size_t>(c.k));
  std::vector<std::thread> threads;
  for (int r = 0; r < c.k; ++r)
    threads.emplace_back([&, r] {
      failures[static_cast<size_t>(r)] =
          hostRunChannel(views[static_cast<size_t>(r)], &items[static_cast<size_t>(r)], 1, config);
    });
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < c.k; ++r)
    ASSERT_EQ(failures[static_cast<size_t>(r)].kind, WaitFailure::kNone)
        << "rank " << r << " waited on rank " << failures[static_cast<size_t>(r)].site.peer;
  for (int r = 0; r < c.k; ++r) {
    const std::vector<float>& out = c.inPlace ? send[static_cast<size_t>(r)] : recv[static_cast<size_t>(r)];
    for (uint64_t i = 0; i < c.count; ++i) {
      ASSERT_EQ(out[i], expected(c, i, scale)) << "rank " << r << " element " << i;
      ASSERT_EQ(std::memcmp(&out[i], c.inPlace ? &send[0][i] : &recv[0][i], sizeof(float)), 0)
          << "rank " << r << " differs from rank 0 at " << i;
    }
  }
  // Every link carried what both ends' tallies say, and nothing is left in it.
  for (int from = 0; from < c.k; ++from)
    for (int to = 0; to < c.k; ++to) {
      if (from == to) continue;
      Link& link = mesh.link(from, to);
      const StepTally& sender = tallies[static_cast<size_t>(from)];
      const StepTally& receiver = tallies[static_cast<size_t>(to)];
      uint64_t sent = 0, received = 0;
      for (int i = 0; i < sender.size(); ++i)
        if (sender.end(i) == &link.producer) sent = sender.steps(i);
      for (int i = 0; i < receiver.size(); ++i)
        if (receiver.end(i) == &link.consumer) received = receiver.steps(i);
      const uint64_t stepElems = static_cast<uint64_t>(c.stepBytes) / sizeof(float);
      uint64_t steps = 0;
      for (uint64_t base = 0; base < c.count; base += c.chunkElems)
        steps += (std::min(c.chunkElems, c.count - base) + stepElems - 1) / stepElems;
      EXPECT_EQ(sent, steps) << from << " -> " << to;
      EXPECT_EQ(received, steps) << from << " -> " << to;
      EXPECT_EQ(*link.producer.tail, steps) << from << " -> " << to;
      EXPECT_EQ(*link.consumer.head, steps) << from << " -> " << to;
    }
}

TEST(OneShot, EveryRankGetsTheSameBitsInRankOrder) {
  for (int k : {2, 3, 4})
    for (uint64_t count : {1ull, 2ull, 5ull, 1000ull, 4096ull + 3})
      runCase({k, count, 2048, 1024, RedOpKind::kSum, false});
}

TEST(OneShot, InPlaceAndEveryKindOfOperator) {
  for (int k : {2, 3, 4})
    for (RedOpKind op : {RedOpKind::kSum, RedOpKind::kMax, RedOpKind::kPreMulSum, RedOpKind::kSumPostDiv})
      for (bool inPlace : {false, true}) runCase({k, 777, 256, 512, op, inPlace});
}

// A chunk of many FIFO slots per peer: the sends of a chunk fill the FIFOs
// before anyone receives; chunks are at most the FIFO's depth, so nobody
// waits for a receive that waits for it.
TEST(OneShot, ChunksAsDeepAsTheFifo) {
  for (int k : {2, 3, 4}) runCase({k, 100000, kFifoSteps * 256, 1024, RedOpKind::kSum, false});
}

}  // namespace
}  // namespace weft::device
