// The cuda backend's copy of a channel's exchange, hierarchical ring and
// torus views (Channel::mirroredAlgos, what cudaMirrorAlgoViews copies to
// the device): every FIFO end the host view holds becomes the device mirror
// of the same connection, absent ends stay absent, the exchange order and
// the ReduceScatter scratch become the device copies given, and an end
// without a mirror is an error rather than a host pointer handed to a
// kernel. Runs without a GPU: the "device" pointers are host addresses the
// test can recognise.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "core/broken_links.h"
#include "core/comm.h"

namespace weft::core {
namespace {

constexpr int kRanks = 8;

// One channel of rank `rank` of 8, connected to every peer both ways, with
// the exchange (links `broken`: by default 0-1 and 2-3, a renumbered
// butterfly), a hierarchical ring of 2 nodes of 4 and a 4 x 2 torus
// connected.
LinkSet linksOf(const std::vector<std::pair<int, int>>& pairs) {
  LinkSet set;
  for (const auto& [a, b] : pairs) set.add(a, b);
  return set;
}

class MirrorFixture {
 public:
  explicit MirrorFixture(int rank, const LinkSet& broken = linksOf({{0, 1}, {2, 3}}))
      : rank_(rank), mirrors_(2 * kRanks) {
    auto plan = planExchange(kRanks, broken, device::kMaxRelayDuties);
    EXPECT_TRUE(plan.ok()) << plan.status().message();
    exchange_ = std::make_shared<ExchangePlan>(plan.value());
    hier_ = planHierarchy({{0, 1, 2, 3}, {4, 5, 6, 7}}, LinkSet());
    torus_ = planHierarchy({{0, 1}, {2, 3}, {4, 5}, {6, 7}}, LinkSet());
    EXPECT_NE(hier_, nullptr);
    EXPECT_NE(torus_, nullptr);
    channel.id = 3;
    channel.send.resize(kRanks);
    channel.recv.resize(kRanks);
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer == rank) continue;
      for (int dir = 0; dir < 2; ++dir) {
        auto conn = std::make_unique<transport::Connection>();
        conn->deviceEnd = &mirrors_[static_cast<size_t>(2 * peer + dir)];
        (dir == 0 ? channel.send : channel.recv)[static_cast<size_t>(peer)] = std::move(conn);
      }
    }
    channel.exchangeConnected = true;
    channel.exchangePlan = exchange_.get();
    channel.hierConnected = true;
    channel.hierPlan = hier_.get();
    channel.torusConnected = true;
    channel.torusPlan = torus_.get();
    channel.exchangeScratchBytes = 4096;
    channel.invalidateView();
  }

  int rank() const { return rank_; }
  // The mirror this test gave the connection to or from `peer`.
  const device::FifoEnd* mirrorOf(int peer, bool send) const {
    return &mirrors_[static_cast<size_t>(2 * peer + (send ? 0 : 1))];
  }
  // The peer and direction of a host end of the channel; -1 if none.
  int peerOf(const device::FifoEnd* end, bool* send) const {
    for (int peer = 0; peer < kRanks; ++peer)
      for (int dir = 0; dir < 2; ++dir) {
        const auto& conn = (dir == 0 ? channel.send : channel.recv)[static_cast<size_t>(peer)];
        if (conn && &conn->end == end) {
          *send = dir == 0;
          return peer;
        }
      }
    return -1;
  }

  Channel channel;

 private:
  int rank_;
  std::vector<device::FifoEnd> mirrors_;
  std::shared_ptr<ExchangePlan> exchange_;
  std::shared_ptr<const HierPlan> hier_;
  std::shared_ptr<const HierPlan> torus_;
};

// `mirrored` is the device form of `host`: null for null, else the mirror of
// the same connection in the same direction.
void expectMirror(const MirrorFixture& f, const device::FifoEnd* host, const device::FifoEnd* mirrored,
                  const char* what) {
  if (host == nullptr) {
    EXPECT_EQ(mirrored, nullptr) << what;
    return;
  }
  bool send = false;
  const int peer = f.peerOf(host, &send);
  ASSERT_GE(peer, 0) << what << ": the host view holds an end that is not the channel's";
  EXPECT_EQ(mirrored, f.mirrorOf(peer, send)) << what << " (peer " << peer << ")";
}

TEST(AlgoMirror, EveryEndBecomesItsConnectionsMirror) {
  int32_t physical[kRanks] = {};
  alignas(8) char scratch[64];
  for (int rank = 0; rank < kRanks; ++rank) {
    MirrorFixture f(rank);
    const device::AlgoViews host = *f.channel.view(rank).algos;
    ASSERT_EQ(host.exchange.nranks, kRanks);
    ASSERT_EQ(host.hier.nodes, 2);
    ASSERT_EQ(host.torus.nodes, 4);
    device::AlgoViews out;
    ASSERT_TRUE(f.channel.mirroredAlgos(rank, physical, scratch, &out).ok());
    int ends = 0;
    for (int s = 0; s < device::kExchangeSlots; ++s) {
      expectMirror(f, host.exchange.send[s], out.exchange.send[s], "exchange send");
      expectMirror(f, host.exchange.recv[s], out.exchange.recv[s], "exchange recv");
      ends += host.exchange.send[s] != nullptr ? 1 : 0;
    }
    EXPECT_GE(ends, 3) << "rank " << rank << ": 3 butterfly rounds at 8 ranks";
    EXPECT_EQ(out.exchange.nRelays, host.exchange.nRelays);
    for (int d = 0; d < host.exchange.nRelays; ++d) {
      expectMirror(f, host.exchange.relays[d].recv, out.exchange.relays[d].recv, "relay recv");
      expectMirror(f, host.exchange.relays[d].send, out.exchange.relays[d].send, "relay send");
    }
    for (const auto& [h, o] : {std::make_pair(host.hier, out.hier), std::make_pair(host.torus, out.torus)}) {
      expectMirror(f, h.intraRecv, o.intraRecv, "intra recv");
      expectMirror(f, h.intraSend, o.intraSend, "intra send");
      expectMirror(f, h.interRecv, o.interRecv, "inter recv");
      expectMirror(f, h.interSend, o.interSend, "inter send");
      EXPECT_EQ(o.nodes, h.nodes);
      EXPECT_EQ(o.local, h.local);
    }
    EXPECT_NE(out.hier.intraSend, nullptr);
    EXPECT_NE(out.torus.interSend, nullptr);
    // Shape fields unchanged; the order and the scratch are the device copies.
    EXPECT_EQ(out.exchange.logical, host.exchange.logical);
    EXPECT_EQ(out.exchange.physical, physical);
    EXPECT_EQ(out.exchange.scratch, static_cast<void*>(scratch));
    EXPECT_EQ(out.exchange.scratchBytes, 4096u);
    // The host view sizes the pieces alike (the step tally reads it), with
    // no memory on the cuda backend.
    EXPECT_EQ(host.exchange.scratchBytes, 4096u);
    EXPECT_EQ(host.exchange.scratch, nullptr);
  }
}

// Links that no renumbering avoids (every rank linked only to its ring
// neighbours of an 8-cycle but for a few chords): relay duties, mirrored too.
TEST(AlgoMirror, RelayDutiesAreMirrored) {
  std::vector<std::pair<int, int>> pairs;
  for (int a = 0; a < kRanks; ++a)
    for (int b = a + 2; b < kRanks; ++b)
      if (!(a == 0 && b == kRanks - 1) && (b - a) % 4 != 0) pairs.push_back({a, b});
  const LinkSet broken = linksOf(pairs);
  int32_t physical[kRanks] = {};
  int relays = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    MirrorFixture f(rank, broken);
    const device::AlgoViews host = *f.channel.view(rank).algos;
    device::AlgoViews out;
    ASSERT_TRUE(f.channel.mirroredAlgos(rank, physical, nullptr, &out).ok());
    ASSERT_EQ(out.exchange.nRelays, host.exchange.nRelays);
    for (int d = 0; d < host.exchange.nRelays; ++d) {
      expectMirror(f, host.exchange.relays[d].recv, out.exchange.relays[d].recv, "relay recv");
      expectMirror(f, host.exchange.relays[d].send, out.exchange.relays[d].send, "relay send");
      EXPECT_NE(out.exchange.relays[d].recv, nullptr);
      EXPECT_EQ(out.exchange.relays[d].slot, host.exchange.relays[d].slot);
    }
    relays += host.exchange.nRelays;
  }
  EXPECT_GT(relays, 0) << "the broken links should force relays";
}

TEST(AlgoMirror, AnEndWithoutAMirrorIsAnError) {
  MirrorFixture f(0);
  const device::AlgoViews host = *f.channel.view(0).algos;
  bool send = false;
  const int peer = f.peerOf(host.exchange.send[0], &send);
  ASSERT_GE(peer, 0);
  f.channel.send[static_cast<size_t>(peer)]->deviceEnd = nullptr;
  int32_t physical[kRanks] = {};
  device::AlgoViews out;
  const Status status = f.channel.mirroredAlgos(0, physical, nullptr, &out);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.message().find("no device mirror"), std::string::npos) << status.message();
  EXPECT_NE(status.message().find("channel 3"), std::string::npos) << status.message();
}

TEST(AlgoMirror, NoDeviceOrderIsAnError) {
  MirrorFixture f(2);
  device::AlgoViews out;
  EXPECT_FALSE(f.channel.mirroredAlgos(2, nullptr, nullptr, &out).ok());
}

// The mirror is remade when the view changes: a new connection or a newly
// connected algorithm moves the generation on.
TEST(AlgoMirror, ChangesMoveTheGenerationOn) {
  Channel channel;
  EXPECT_FALSE(channel.hasAlgoViews());
  const uint64_t before = channel.viewGeneration();
  channel.invalidateView();
  EXPECT_GT(channel.viewGeneration(), before);
  channel.torusConnected = true;
  EXPECT_TRUE(channel.hasAlgoViews());
}

}  // namespace
}  // namespace weft::core
