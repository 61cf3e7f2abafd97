// Broken links on real communicators (host backend, ranks as threads): the
// results are right and, read from the FIFO counters of every connection
// afterwards, no step (so no byte) ever went over a broken link, while the
// working links carried the data. Covers the seed's 8-rank mesh with link
// 0-1 broken (renumbered butterfly), links that force relays, random sets on
// meshes of 4 to 16 ranks, and every algorithm the planner may pick.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "nccl.h"

namespace weft::core {
namespace {

class Env {
 public:
  Env(const char* name, const std::string& value) : name_(name) { setenv(name, value.c_str(), 1); }
  ~Env() { unsetenv(name_); }

 private:
  const char* name_;
};

// Steps published on the connection from `rank` to `peer`, all channels.
uint64_t stepsSent(const Comm& comm, int peer) {
  uint64_t steps = 0;
  for (const Channel& channel : comm.channels) {
    const auto& conn = channel.send[static_cast<size_t>(peer)];
    if (conn) steps += __atomic_load_n(conn->end.tail, __ATOMIC_ACQUIRE);
  }
  return steps;
}

// Every rank runs AllReduce (int sums, every size class), AllGather and
// ReduceScatter under `algos` and checks the values.
void runAndCheck(ncclComm_t comm, int rank, int nranks) {
  for (size_t count : {size_t{1}, size_t{1000}, size_t{70001}}) {
    std::vector<int32_t> in(count), out(count);
    for (size_t i = 0; i < count; ++i) in[i] = static_cast<int32_t>(i % 1000) * (rank + 1);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    const int32_t ranksSum = nranks * (nranks + 1) / 2;
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(out[i], static_cast<int32_t>(i % 1000) * ranksSum) << i;
    std::vector<int32_t> all(count * static_cast<size_t>(nranks));
    ASSERT_EQ(ncclAllGather(in.data(), all.data(), count, ncclInt32, comm, nullptr), ncclSuccess);
    for (int r = 0; r < nranks; ++r)
      for (size_t i = 0; i < count; i += 97)
        ASSERT_EQ(all[static_cast<size_t>(r) * count + i], static_cast<int32_t>(i % 1000) * (r + 1));
    // Segment s of every rank's input: (i % 1000 + s) * (rank + 1).
    for (int s = 0; s < nranks; ++s)
      for (size_t i = 0; i < count; ++i)
        all[static_cast<size_t>(s) * count + i] = static_cast<int32_t>(i % 1000 + static_cast<size_t>(s)) * (rank + 1);
    ASSERT_EQ(ncclReduceScatter(all.data(), out.data(), count, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(out[i], static_cast<int32_t>(i % 1000 + static_cast<size_t>(rank)) * ranksSum) << i;
  }
}

// Runs the collectives on nranks threads with `links` broken, then checks
// the counters of every rank's connections. expectRelays: 1 the plan must
// relay, 0 it must not, -1 either.
void expectNothingCrosses(int nranks, const std::string& links, const char* algos, int expectRelays = 0) {
  Env backend("WEFT_BACKEND", "host");
  Env broken("WEFT_BROKEN_LINKS", links);
  Env algo("NCCL_ALGO", algos);
  Env buff("NCCL_BUFFSIZE", "65536");
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(static_cast<size_t>(nranks));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r)
    threads.emplace_back([&, r] {
      ncclComm_t& comm = comms[static_cast<size_t>(r)];
      ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, r), ncclSuccess);
      runAndCheck(comm, r, nranks);
    });
  for (auto& t : threads) t.join();
  uint64_t carried = 0;
  for (int r = 0; r < nranks; ++r) {
    const Comm& comm = *asComm(comms[static_cast<size_t>(r)]);
    for (int peer = 0; peer < nranks; ++peer) {
      if (peer == r) continue;
      const uint64_t steps = stepsSent(comm, peer);
      if (comm.brokenLinks.has(r, peer)) {
        EXPECT_EQ(steps, 0u) << "rank " << r << " sent " << steps << " steps to rank " << peer << " over broken link";
      }
      carried += steps;
    }
  }
  EXPECT_GT(carried, 0u);
  // The exchanges named in NCCL_ALGO really ran (not a fallback to the ring),
  // through relays where the plan needs them.
  const Comm& first = *asComm(comms[0]);
  if (std::string(algos).find("allreduce:Butterfly") != std::string::npos ||
      std::string(algos).find("allreduce:HalvingDoubling") != std::string::npos) {
    ASSERT_NE(first.exchangePlan, nullptr);
    EXPECT_TRUE(first.channels[0].exchangeConnected);
    if (expectRelays >= 0) {
      EXPECT_EQ(first.exchangePlan->relays.empty() ? 0 : 1, expectRelays);
    }
  }
  // The halving ReduceScatter ran: its scratch was made.
  if (std::string(algos).find("reducescatter:HalvingDoubling") != std::string::npos) {
    EXPECT_FALSE(first.channels[0].exchangeScratch.empty());
  }
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(BrokenLinkTraffic, SeedMeshButterflyRenumbered) {
  expectNothingCrosses(8, "0-1", "allreduce:Butterfly;allgather:HalvingDoubling");
}

TEST(BrokenLinkTraffic, HalvingDoublingAndRingsRouteAround) {
  expectNothingCrosses(8, "0-1,2-3,4-7", "allreduce:HalvingDoubling;allgather:Ring");
  expectNothingCrosses(6, "0-1,1-2", "allreduce:Ring;allgather:Ring");
}

// 5 ranks linked only around the cycle 0-1-2-3-4: a ring exists, but no
// numbering gives the exchange's 4-cycle of participants, so the pairs two
// hops apart exchange through the rank between them.
TEST(BrokenLinkTraffic, UnavoidableLinksGoThroughARelay) {
  const std::string chords = "0-2,0-3,1-3,1-4,2-4";
  expectNothingCrosses(5, chords, "allreduce:Butterfly;allgather:HalvingDoubling", 1);
  expectNothingCrosses(5, chords, "allreduce:HalvingDoubling", 1);
}

// The halving ReduceScatter on the same plans: renumbered, and relayed.
TEST(BrokenLinkTraffic, HalvingReduceScatterRoutesAround) {
  expectNothingCrosses(8, "0-1", "allreduce:HalvingDoubling;reducescatter:HalvingDoubling");
  expectNothingCrosses(6, "0-1,2-3", "allreduce:HalvingDoubling;reducescatter:HalvingDoubling");
  expectNothingCrosses(5, "0-2,0-3,1-3,1-4,2-4", "allreduce:HalvingDoubling;reducescatter:HalvingDoubling", 1);
}

TEST(BrokenLinkTraffic, DefaultChoiceNeverUsesABrokenLink) { expectNothingCrosses(5, "1-3,0-4", ""); }

TEST(BrokenLinkTraffic, RandomSetsOnMeshesOfFourToSixteen) {
  std::mt19937 random(2026);
  for (int nranks : {4, 7, 11, 16}) {
    std::string links;
    for (int i = 0; i < nranks / 3; ++i) {
      const int a = static_cast<int>(random() % static_cast<unsigned>(nranks));
      const int b = (a + 1 + static_cast<int>(random() % static_cast<unsigned>(nranks - 1))) % nranks;
      links += (links.empty() ? "" : ",") + std::to_string(a) + "-" + std::to_string(b);
    }
    SCOPED_TRACE(std::to_string(nranks) + " ranks, broken " + links);
    expectNothingCrosses(nranks, links, nranks % 2 ? "allreduce:Butterfly" : "allreduce:HalvingDoubling", -1);
  }
}

}  // namespace
}  // namespace weft::core
