// Init as a barrier and abort during init: ranks that destroy (or exit)
// right after init returns break nobody, and ncclCommAbort ends an init
// waiting for a rank that never comes within a second, on shared memory and
// on network links.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;
double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Before init was a barrier, a rank could return and destroy its segments
// while a peer had not opened them yet (shm_open: No such file or directory).
TEST(InitBarrier, FourRanksInitAndDestroyAtOnceThirtyTimes) {
  runRanksRaw(RankMode::kProcesses, 4, [](int rank, int nranks, const ncclUniqueId& first) {
    ncclUniqueId id = first;
    // Each round's id is made by rank 0 and broadcast over the previous
    // round's communicator just before it is destroyed.
    for (int i = 0; i < 30; ++i) {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess)
          << "round " << i << ": " << ncclGetLastError(nullptr);
      ncclUniqueId next{};
      if (rank == 0) ASSERT_EQ(ncclGetUniqueId(&next), ncclSuccess);
      ASSERT_EQ(ncclBroadcast(&next, &next, sizeof(next), ncclChar, 0, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
      // The next round's init right after: no rank waits for the others to have destroyed.
      id = next;
    }
  });
}

TEST(InitBarrier, InitThenDestroyWithNoCallBetween) {
  for (int round = 0; round < 10; ++round)
    runRanksRaw(RankMode::kProcesses, 4, [](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
      ASSERT_EQ(ncclCommDestroy(comm), ncclSuccess);
    });
}

// A rank that aborts as soon as its init returns: its failure notice can
// reach peers still inside init's final barrier. Their init must succeed
// (every rank had entered the barrier and sent its part), and their next call
// fail naming the aborting rank. Twenty rounds, ranks as processes, whose
// scheduling varies the moment the notice lands.
TEST(InitBarrier, AbortRightAfterInitFailsOnlyTheNextCallOfTheOthers) {
  for (int round = 0; round < 20; ++round)
    runRanksRaw(RankMode::kProcesses, 3, [round](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess)
          << "round " << round << ": " << ncclGetLastError(nullptr);
      if (rank == 1) {
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        return;
      }
      int v = 1;
      const ncclResult_t rc = ncclAllReduce(&v, &v, 1, ncclInt32, ncclSum, comm, nullptr);
      EXPECT_NE(rc, ncclSuccess) << "round " << round << ": a call with an aborted rank succeeded";
      const std::string msg = ncclGetLastError(comm);
      EXPECT_NE(msg.find("rank 1"), std::string::npos) << "round " << round << ": " << msg;
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    });
}

void abortDuringInit(int nranksExpected) {
  runRanksRaw(RankMode::kThreads, 1, [&](int, int, const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    // Rank 0 of a communicator whose other ranks never come.
    ASSERT_EQ(ncclCommInitRankConfig(&comm, nranksExpected, id, 0, &config), ncclInProgress);
    ncclResult_t state = ncclSuccess;
    ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
    EXPECT_EQ(state, ncclInProgress);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = Clock::now();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    EXPECT_LT(secondsSince(t0), 1.0) << "abort waited for the bootstrap timeout";
  });
}

TEST(AbortDuringInit, ReturnsWithinASecondWhileWaitingForMissingRanks) { abortDuringInit(3); }

// Two ranks in one process on two virtual nodes, the second blocked before
// init: the first waits in the bootstrap ring; then with both present but one
// aborted, the other's network accept ends too.
TEST(AbortDuringInit, ReturnsWithinASecondOnNetworkLinks) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  abortDuringInit(2);
  std::atomic<int> aborted{0};
  runRanksRaw(RankMode::kThreads, 2, [&](int rank, int nranks, const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRankConfig(&comm, nranks, id, rank, &config), ncclInProgress);
    if (rank == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // somewhere in init, maybe in connect
      const auto t0 = Clock::now();
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      EXPECT_LT(secondsSince(t0), 1.0);
      aborted = 1;
      return;
    }
    // The survivor's init ends: completed before the abort, or failed because of it, within the bound.
    const auto t0 = Clock::now();
    ncclResult_t state = ncclInProgress;
    while (state == ncclInProgress && secondsSince(t0) < 10.0) {
      ASSERT_EQ(ncclCommGetAsyncError(comm, &state), ncclSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_NE(state, ncclInProgress) << "init still running 10 s after its peer aborted";
    while (!aborted.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    if (state == ncclSuccess) {  // init finished first: the next call fails, naming rank 0
      std::vector<int> v(1024, 1);
      const auto t1 = Clock::now();
      EXPECT_NE(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
      EXPECT_LT(secondsSince(t1), 5.0);
      EXPECT_NE(std::string(ncclGetLastError(comm)).find("rank 0"), std::string::npos) << ncclGetLastError(comm);
    }
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  });
}

// A rank that aborts tells the others: a peer blocked in a collective on it
// fails at once (not at WEFT_TIMEOUT), naming it.
TEST(Propagation, AbortOfOneRankEndsTheOthersBlockedCallsNamingIt) {
  runRanksRaw(RankMode::kProcesses, 4, [](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    if (rank == 3) {  // never joins the collective; aborts instead
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      return;
    }
    std::vector<float> v(1 << 16, 1.0f);
    const auto t0 = Clock::now();
    const ncclResult_t rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclFloat32, ncclSum, comm, nullptr);
    EXPECT_NE(rc, ncclSuccess);
    EXPECT_LT(secondsSince(t0), 5.0) << "WEFT_TIMEOUT is 600 s by default: the notice ended the wait";
    const std::string msg = ncclGetLastError(comm);
    EXPECT_NE(msg.find("rank 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("ncclCommAbort"), std::string::npos) << msg;
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_NE(async, ncclSuccess);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

}  // namespace
}  // namespace weft::test
