// The portable algorithms under a team of several threads (team_coop.h, an
// emulation of the cuda backend's thread block): k ranks in one process,
// each a team of N threads, over a full mesh of in-process FIFOs, every
// algorithm entered the way the cuda kernels enter it (run_work.h:
// runReducingOp, runDataOnly, runSendRecv, items separated by a team
// barrier). Each case runs two calls back to back on the same FIFOs and
// checks every rank's output against a scalar reference (values whose float
// sums are exact), that no wait failed, and that every FIFO ends drained with
// both ends agreeing on their positions. Teams jitter (team_coop.h) so that
// a thread that reads what the leader writes without a barrier in between
// sees the old value often. Also: the emulation's own barrier semantics, and
// a mismatched call that must end every thread of every team.

#include <gtest/gtest.h>

#include "team_coop_cases.h"

namespace weft::device {
namespace {

using namespace team_cases;  // NOLINT(google-build-using-namespace): the harness, for this file only

// The emulation itself: agree() is an AND over the team, the leader's value
// reaches everyone, a failed leader wait fails the whole team, and a thread
// that skips a barrier breaks the team (a failed run) instead of hanging it.
TEST(TeamCoop, EmulatedBlockPrimitives) {
  constexpr int kSize = 4;
  std::atomic<uint32_t> abortFlag{0};
  // Waits time out after 50 ms; barriers only after 10 s, so that on a
  // loaded machine the leader's wait fails before its team's barrier does.
  Team team(kSize, &abortFlag, 50 * 1000000ll, false, 10 * 1000000000ll);
  std::vector<int> agreed(kSize), shared(kSize), waited(kSize), failed(kSize);
  std::vector<std::thread> threads;
  for (int t = 0; t < kSize; ++t)
    threads.emplace_back([&, t] {
      TeamCoop coop(team, t);
      shared[static_cast<size_t>(t)] = coop.broadcastFromLeader(t == 0 ? 42 : -t);
      agreed[static_cast<size_t>(t)] = coop.agree(t != 2) ? 1 : 0;
      failed[static_cast<size_t>(t)] = coop.failed() ? 1 : 0;  // a failed agree fails the team
      TeamCoop fresh(team, t);
      waited[static_cast<size_t>(t)] = fresh.waitUntil([] { return false; }, [] { return WaitSite{7, 0, 0}; }) ? 1 : 0;
      failed[static_cast<size_t>(t)] += fresh.failed() ? 1 : 0;
    });
  for (std::thread& th : threads) th.join();
  for (int t = 0; t < kSize; ++t) {
    EXPECT_EQ(agreed[static_cast<size_t>(t)], 0) << t;
    EXPECT_EQ(shared[static_cast<size_t>(t)], 42) << t;
    EXPECT_EQ(waited[static_cast<size_t>(t)], 0) << t;
    EXPECT_EQ(failed[static_cast<size_t>(t)], 2) << t;
  }
  EXPECT_EQ(abortFlag.load(), 1u) << "a timed-out wait aborts the run";
  EXPECT_FALSE(team.broken());

  Team skipped(2, &abortFlag, 50 * 1000000ll, false);
  bool leaderFailed = false;
  std::thread other([&] { TeamCoop(skipped, 1); });  // never reaches the barrier
  TeamCoop leader(skipped, 0);
  leader.sync();
  leaderFailed = leader.failed();
  other.join();
  EXPECT_TRUE(skipped.broken());
  EXPECT_TRUE(leaderFailed);
}

// reduceCopy's 16-byte pack loop, which only the device pass runs
// (reduce_copy.h): each thread takes packs rank, rank + size, ... with Unroll
// in flight; every pack is written once, combined in source order, with the
// pre-op on the own input only.
TEST(TeamCoop, DevicePackLoopCoversEveryPackOnce) {
  std::atomic<uint32_t> abortFlag{0};
  for (int size : {1, 3, 4, 8})
    for (int64_t nPacks : {int64_t{1}, int64_t{5}, int64_t{31}, int64_t{97}}) {
      SCOPED_TRACE(::testing::Message() << "team " << size << " packs " << nPacks);
      const int64_t n = nPacks * 4;  // int32 elements
      alignas(16) static int32_t a[97 * 4], b[97 * 4], out1[97 * 4], out2[97 * 4];
      for (int64_t i = 0; i < n; ++i) {
        a[i] = static_cast<int32_t>(i * 3 - 100);
        b[i] = static_cast<int32_t>(50 - i * 2);
        out1[i] = out2[i] = -1;
      }
      const int32_t* srcs[2] = {a, b};
      int32_t* dsts[2] = {out1, out2};
      const FuncPreMulSum<int32_t> op{3};
      Team team(size, &abortFlag, kTimeoutNs, false);
      std::vector<std::thread> threads;
      for (int t = 0; t < size; ++t)
        threads.emplace_back([&, t] {
          TeamCoop coop(team, t);
          reduceCopyPacks<2, 2, 4>(coop, op, srcs, dsts, nPacks, 1, false);  // pre-op on source 1
        });
      for (std::thread& th : threads) th.join();
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(out1[i], a[i] + 3 * b[i]) << i;
        ASSERT_EQ(out2[i], out1[i]) << i;
      }
    }
}

TEST(TeamCoop, RingAllReduce) {
  for (Proto proto : {Proto::kSimple, Proto::kLL, Proto::kLL128}) {
    sweep(Func::kAllReduce, Algo::kRing, proto, DataType::kFloat32, {2, 3, 4});
    sweep(Func::kAllReduce, Algo::kRing, proto, DataType::kInt32, {3});
    sweep(Func::kAllReduce, Algo::kRing, proto, DataType::kFloat32, {3}, true);
  }
}

TEST(TeamCoop, RingReduceScatter) {
  for (Proto proto : {Proto::kSimple, Proto::kLL, Proto::kLL128}) {
    sweep(Func::kReduceScatter, Algo::kRing, proto, DataType::kFloat32, {3, 4});
    sweep(Func::kReduceScatter, Algo::kRing, proto, DataType::kInt32, {3});
  }
}

TEST(TeamCoop, RingAllGatherAndBroadcast) {
  for (Proto proto : {Proto::kSimple, Proto::kLL, Proto::kLL128}) {
    sweep(Func::kAllGather, Algo::kRing, proto, DataType::kUint8, {3, 4});
    sweep(Func::kAllGather, Algo::kRing, proto, DataType::kUint8, {3}, true);
    sweep(Func::kBroadcast, Algo::kRing, proto, DataType::kUint8, {3, 4});
  }
}

TEST(TeamCoop, RingReduce) {
  for (Proto proto : {Proto::kSimple, Proto::kLL, Proto::kLL128}) {
    sweep(Func::kReduce, Algo::kRing, proto, DataType::kFloat32, {3, 4});
    sweep(Func::kReduce, Algo::kRing, proto, DataType::kInt32, {3});
  }
}

TEST(TeamCoop, TreeAllReduce) {
  for (Proto proto : {Proto::kSimple, Proto::kLL, Proto::kLL128}) {
    sweep(Func::kAllReduce, Algo::kTree, proto, DataType::kFloat32, {2, 4, 5});
    sweep(Func::kAllReduce, Algo::kTree, proto, DataType::kInt32, {5});
  }
}

TEST(TeamCoop, OneShot) {
  for (Proto proto : {Proto::kSimple, Proto::kLL}) {
    sweep(Func::kAllReduce, Algo::kOneShot, proto, DataType::kFloat32, {2, 4});
    sweep(Func::kAllReduce, Algo::kOneShot, proto, DataType::kInt32, {3});
    sweep(Func::kReduceScatter, Algo::kOneShot, proto, DataType::kFloat32, {3});
    sweep(Func::kAllGather, Algo::kOneShot, proto, DataType::kUint8, {3});
    sweep(Func::kBroadcast, Algo::kOneShot, proto, DataType::kUint8, {3});
  }
}

TEST(TeamCoop, ButterflyAllReduce) {
  sweep(Func::kAllReduce, Algo::kButterfly, Proto::kSimple, DataType::kFloat32, {3, 4, 5});
  sweep(Func::kAllReduce, Algo::kButterfly, Proto::kSimple, DataType::kInt32, {5});
}

TEST(TeamCoop, HalvingDoublingAllReduce) {
  sweep(Func::kAllReduce, Algo::kHalvingDoubling, Proto::kSimple, DataType::kFloat32, {3, 4, 5});
  sweep(Func::kAllReduce, Algo::kHalvingDoubling, Proto::kSimple, DataType::kInt32, {5});
}

TEST(TeamCoop, HalvingReduceScatterAndDoublingAllGather) {
  sweep(Func::kReduceScatter, Algo::kHalvingDoubling, Proto::kSimple, DataType::kFloat32, {3, 4, 5});
  sweep(Func::kReduceScatter, Algo::kHalvingDoubling, Proto::kSimple, DataType::kInt32, {3});
  sweep(Func::kAllGather, Algo::kHalvingDoubling, Proto::kSimple, DataType::kUint8, {3, 4, 5});
}

// Links 0-1 and 0-2 broken: rank 0 reaches its partners through relays
// (recvSend between a stage's sends and receives).
TEST(TeamCoop, ExchangesThroughRelays) {
  for (Algo algo : {Algo::kButterfly, Algo::kHalvingDoubling})
    for (int team : kTeams)
      for (uint64_t count : kCounts) {
        Case c{Func::kAllReduce, algo, Proto::kSimple, DataType::kFloat32, 4, team, count};
        c.brokenLinks = true;
        runCase(c);
        if (HasFatalFailure()) return;
      }
}

TEST(TeamCoop, HierRingAndTorusAllReduce) {
  sweep(Func::kAllReduce, Algo::kHierRing, Proto::kSimple, DataType::kFloat32, {4});
  sweep(Func::kAllReduce, Algo::kHierRing, Proto::kSimple, DataType::kInt32, {4});
  sweep(Func::kAllReduce, Algo::kTorus2D, Proto::kSimple, DataType::kFloat32, {3, 4});
  sweep(Func::kAllReduce, Algo::kTorus2D, Proto::kSimple, DataType::kInt32, {4});
}

// Teams of other sizes, including a wide one.
TEST(TeamCoop, OtherTeamSizes) {
  for (int team : {2, 5, 8})
    for (uint64_t count : {uint64_t{13}, uint64_t{1203}}) {
      for (Proto proto : {Proto::kSimple, Proto::kLL})
        for (Algo algo : {Algo::kRing, Algo::kTree, Algo::kOneShot})
          runCase(Case{Func::kAllReduce, algo, proto, DataType::kFloat32, 4, team, count});
      for (Algo algo : {Algo::kButterfly, Algo::kHalvingDoubling, Algo::kHierRing, Algo::kTorus2D})
        runCase(Case{Func::kAllReduce, algo, Proto::kSimple, DataType::kInt32, 4, team, count});
      runCase(Case{Func::kReduceScatter, Algo::kHalvingDoubling, Proto::kSimple, DataType::kFloat32, 5, team, count});
      if (HasFatalFailure()) return;
    }
}

// One rank a call ahead: the call signatures differ, the leader that sees it
// records the mismatch and its team fails its waits; every thread of every
// team ends (no barrier left waiting, no hang).
TEST(TeamCoop, MismatchedCallEndsEveryThread) {
  for (Proto proto : {Proto::kSimple, Proto::kLL})
    for (Algo algo : {Algo::kRing, Algo::kTree})
      for (int team : {1, 4}) {
        Case c{Func::kAllReduce, algo, proto, DataType::kFloat32, 3, team, 1203};
        c.mismatchRank = 1;
        runCase(c);
      }
  Case c{Func::kAllReduce, Algo::kHalvingDoubling, Proto::kSimple, DataType::kFloat32, 5, 3, 1203};
  c.mismatchRank = 2;
  runCase(c);
}

TEST(TeamCoop, SendRecv) { sweep(Func::kSendRecv, Algo::kRing, Proto::kSimple, DataType::kUint8, {2, 3}); }

// Direct mode: ranks write final segments straight into the next rank's
// output (one address space), as the cuda team does between ranks of one
// process on one GPU, and read first steps in place (AllReduce,
// ReduceScatter): team-safe with many threads.
TEST(TeamCoop, RingDirect) {
  for (Func func : {Func::kAllReduce, Func::kAllGather, Func::kBroadcast, Func::kReduceScatter})
    for (int team : kTeams)
      for (uint64_t count : kCounts) {
        const bool reduces = func == Func::kAllReduce || func == Func::kReduceScatter;
        Case c{func, Algo::kRing, Proto::kSimple, reduces ? DataType::kFloat32 : DataType::kUint8, 3, team, count};
        c.root = 1;
        c.direct = true;
        runCase(c);
        if (HasFatalFailure()) return;
      }
}

// Direct mode between processes (one process here): the leader resolves and
// the team follows; cross-memory writes copy a slice once the whole team
// wrote it, and a refused write sends that slice and the rest of the call
// through the slot on every thread. AllReduce reads first steps in place
// where the consumer reaches the input and the producer offers it.
TEST(TeamCoop, RingDirectBetweenProcesses) {
  struct Way {
    DirectWay way;
    int refuseEvery;
    int cannotReach;
    int readsOff;
  };
  for (Way w : {Way{DirectWay::kPointer, 0, -1, -1}, Way{DirectWay::kCrossMemory, 0, -1, -1},
                Way{DirectWay::kCrossMemory, 3, -1, -1}, Way{DirectWay::kPointer, 0, 1, -1},
                Way{DirectWay::kPointer, 0, -1, 2}})
    for (Func func : {Func::kAllReduce, Func::kAllGather, Func::kReduceScatter})
      for (int team : kTeams)
        for (uint64_t count : kCounts) {
          const bool reduces = func == Func::kAllReduce || func == Func::kReduceScatter;
          if (!reduces && (w.cannotReach >= 0 || w.readsOff >= 0)) continue;  // reads: the reducing calls only
          Case c{func, Algo::kRing, Proto::kSimple, reduces ? DataType::kFloat32 : DataType::kUint8, 3, team, count};
          c.direct = c.shared = true;
          c.sharedWay = w.way;
          c.refuseEvery = w.refuseEvery;
          c.cannotReach = w.cannotReach;
          c.readsOff = w.readsOff;
          runCase(c);
          if (HasFatalFailure()) return;
        }
}

}  // namespace
}  // namespace weft::device
