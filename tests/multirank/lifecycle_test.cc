// Communicator lifecycle: init and destroy in a loop without leaking file
// descriptors, threads or shared memory; 32 ranks on two cores; finalize,
// non-blocking init; and failures: a dead peer, a silent peer (timeout), and
// an abort from another thread all end a blocked call with an error naming
// the peer, in bounded time.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

int countEntries(const char* dir) {
  int n = 0;
  if (DIR* d = opendir(dir)) {
    while (readdir(d)) ++n;
    closedir(d);
  }
  return n;
}

int openFds() { return countEntries("/proc/self/fd"); }

// Shared-memory segments this process created (src/common/shm.cc names them
// /weft-<pid namespace>-<pid>-...). Counting all of /dev/shm would also count
// the segments of tests running beside this one under ctest -j.
int ownShmSegments() {
  struct stat st {};
  stat("/proc/self/ns/pid", &st);
  char ns[32];
  std::snprintf(ns, sizeof(ns), "%llx", static_cast<unsigned long long>(st.st_ino));
  const std::string prefix = "weft-" + std::string(ns) + "-" + std::to_string(getpid()) + "-";
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d))
      if (std::string(e->d_name).rfind(prefix, 0) == 0) ++n;
    closedir(d);
  }
  return n;
}
int threadCount() { return countEntries("/proc/self/task"); }

// /proc/self/task lists a thread for a moment after pthread_join returned:
// the join ends when the thread clears its tid, a few steps of its exit
// before the kernel unlists it (a count right after a join saw the joined
// thread in 11 of 20000 tries). So counts wait for the threads just joined
// to go. The baseline: the lowest of the readings over 50 ms.
int settledThreadCount() {
  int lowest = threadCount();
  for (int i = 0; i < 50; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    lowest = std::min(lowest, threadCount());
  }
  return lowest;
}

// The count once it is back down to `baseline`, or after 10 s: a leaked
// thread never leaves, and the check fails.
int threadCountBackTo(int baseline) {
  const auto giveUp = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int n = threadCount();
  while (n > baseline && std::chrono::steady_clock::now() < giveUp) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    n = threadCount();
  }
  return n;
}

void allreduceOnce(const RankContext& ctx) {
  std::vector<int> in(4096, 1), out(4096, 0);
  ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, ncclSum, ctx.comm, nullptr), ncclSuccess)
      << ncclGetLastError(ctx.comm);
  ASSERT_EQ(out[0], ctx.nranks);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST(Lifecycle, InitDestroyLoopLeaksNothingThreads) {
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");  // worker threads too
  ScopedEnv minChannels("NCCL_MIN_NCHANNELS", "2");
  runRanks(RankMode::kThreads, 3, allreduceOnce);  // warm up lazily created state
  const int fds = openFds(), threads = settledThreadCount();
  for (int i = 0; i < 20; ++i) runRanks(RankMode::kThreads, 3, allreduceOnce);
  EXPECT_EQ(openFds(), fds);
  EXPECT_EQ(threadCountBackTo(threads), threads);
  EXPECT_EQ(ownShmSegments(), 0);
}

TEST(Lifecycle, InitDestroyLoopLeaksNothingProcesses) {
  runRanksRaw(RankMode::kProcesses, 3, [](int rank, int nranks, const ncclUniqueId& id) {
    // The id of the first communicator only: later ones come from splits.
    RankContext ctx{rank, nranks, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, nranks, id, rank), ncclSuccess);
    allreduceOnce(ctx);
    const int fds = openFds(), threads = settledThreadCount();
    for (int i = 0; i < 20; ++i) {
      RankContext child{rank, nranks, nullptr};
      ASSERT_EQ(ncclCommSplit(ctx.comm, 0, rank, &child.comm, nullptr), ncclSuccess) << ncclGetLastError(ctx.comm);
      allreduceOnce(child);
      ASSERT_EQ(ncclCommDestroy(child.comm), ncclSuccess);
    }
    EXPECT_EQ(openFds(), fds) << "rank " << rank;
    EXPECT_EQ(threadCountBackTo(threads), threads) << "rank " << rank;
    EXPECT_EQ(ncclCommDestroy(ctx.comm), ncclSuccess);
    // Every segment this rank created was unlinked once its peer mapped it.
    EXPECT_EQ(ownShmSegments(), 0) << "rank " << rank << ": shared-memory segments left behind";
  });
}

class ThirtyTwo : public ::testing::TestWithParam<RankMode> {};

TEST_P(ThirtyTwo, RanksInitAndReduceOnTwoCores) { runRanks(GetParam(), 32, allreduceOnce); }

INSTANTIATE_TEST_SUITE_P(Modes, ThirtyTwo, ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const ::testing::TestParamInfo<RankMode>& p) { return std::string(modeName(p.param)); });

TEST(Lifecycle, FinalizeThenDestroyAndAsyncErrorIsClean) {
  runRanksRaw(RankMode::kThreads, 2, [](int rank, int nranks, const ncclUniqueId& id) {
    RankContext ctx{rank, nranks, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, nranks, id, rank), ncclSuccess);
    allreduceOnce(ctx);
    ncclResult_t async = ncclInternalError;
    ASSERT_EQ(ncclCommGetAsyncError(ctx.comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    EXPECT_EQ(ncclCommFinalize(ctx.comm), ncclSuccess);
    std::vector<int> v(4, 0);
    EXPECT_EQ(ncclAllReduce(v.data(), v.data(), 4, ncclInt32, ncclSum, ctx.comm, nullptr), ncclInvalidUsage)
        << "a finalized communicator accepts no more work";
    EXPECT_EQ(ncclCommDestroy(ctx.comm), ncclSuccess);
  });
}

TEST(Lifecycle, NonBlockingInitCompletesThroughAsyncError) {
  runRanksRaw(RankMode::kThreads, 3, [](int rank, int nranks, const ncclUniqueId& id) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    RankContext ctx{rank, nranks, nullptr};
    const ncclResult_t rc = ncclCommInitRankConfig(&ctx.comm, nranks, id, rank, &config);
    ASSERT_TRUE(rc == ncclSuccess || rc == ncclInProgress) << ncclGetErrorString(rc);
    ncclResult_t state = ncclInProgress;
    const auto t0 = std::chrono::steady_clock::now();
    while (state == ncclInProgress && secondsSince(t0) < 60) {
      ASSERT_EQ(ncclCommGetAsyncError(ctx.comm, &state), ncclSuccess);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_EQ(state, ncclSuccess);
    allreduceOnce(ctx);
    EXPECT_EQ(ncclCommDestroy(ctx.comm), ncclSuccess);
  });
}

// A rank that exits without a word: the others fail fast, naming it.
TEST(Failures, DeadPeerFailsTheCallNamingIt) {
  runRanksRaw(RankMode::kProcesses, 3, [](int rank, int nranks, const ncclUniqueId& id) {
    RankContext ctx{rank, nranks, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, nranks, id, rank), ncclSuccess);
    allreduceOnce(ctx);
    if (rank == 2) _exit(0);  // dies holding its communicator, as a crash would
    std::vector<float> big(1 << 20, 1.0f);
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t rc = ncclSuccess;
    for (int i = 0; i < 50 && rc == ncclSuccess; ++i)
      rc = ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat32, ncclSum, ctx.comm, nullptr);
    EXPECT_TRUE(rc == ncclRemoteError || rc == ncclSystemError) << ncclGetErrorString(rc);
    EXPECT_LT(secondsSince(t0), 20.0) << "the failure took too long to notice";
    // Rank 2 died; whoever waited on it names it, and a rank that was waiting
    // on a survivor that already gave up and exited names that one.
    const std::string msg = ncclGetLastError(ctx.comm);
    EXPECT_NE(msg.find("exited"), std::string::npos) << msg;
    EXPECT_TRUE(msg.find("rank 2") != std::string::npos || msg.find("rank 0") != std::string::npos) << msg;
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(ctx.comm, &async), ncclSuccess);
    EXPECT_NE(async, ncclSuccess);
    EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
  });
}

// A peer that is alive but never joins the call: WEFT_TIMEOUT ends the wait.
TEST(Failures, SilentPeerTimesOutNamingIt) {
  ScopedEnv timeout("WEFT_TIMEOUT", "1");
  std::atomic<int> done{0};
  runRanksRaw(RankMode::kThreads, 2, [&](int rank, int nranks, const ncclUniqueId& id) {
    RankContext ctx{rank, nranks, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, nranks, id, rank), ncclSuccess);
    if (ctx.rank == 1) {
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
      return;
    }
    std::vector<int> v(1000, 1);
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, ctx.comm, nullptr);
    EXPECT_NE(rc, ncclSuccess);
    EXPECT_LT(secondsSince(t0), 10.0);
    const std::string msg = ncclGetLastError(ctx.comm);
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    done = 1;
    EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
  });
}

// ncclCommAbort from another thread ends a call blocked on a missing peer.
TEST(Failures, AbortFromAnotherThreadReturnsAndEndsTheBlockedCall) {
  std::atomic<int> finished{0};
  runRanksRaw(RankMode::kThreads, 2, [&](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    if (rank == 1) {  // never calls: rank 0 blocks on it
      while (!finished.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      return;
    }
    std::atomic<ncclResult_t> rc{ncclSuccess};
    std::vector<int> v(1000, 1);
    std::thread blocked([&] { rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    blocked.join();
    EXPECT_LT(secondsSince(t0), 5.0) << "abort must return promptly";
    EXPECT_NE(rc.load(), ncclSuccess);
    finished = 1;
  });
}

}  // namespace
}  // namespace weft::test
