// ncclCommShrink: the ranks left out take no part (they may be dead, hung or
// busy), the survivors are renumbered in parent order, NCCL_SHRINK_DEFAULT
// leaves the parent usable, NCCL_SHRINK_ABORT ends a call blocked on an
// excluded rank, and bad arguments or lists that differ between ranks fail
// with a message naming them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// An AllReduce of value + 1 on every rank equals `expected`.
void expectSum(ncclComm_t comm, int value, int expected) {
  std::vector<int> in(3000, value + 1), out(3000, 0);
  ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  EXPECT_EQ(out.front(), expected);
  EXPECT_EQ(out.back(), expected);
}

// Every rank's first call, checked on the ranks that will shrink: a rank
// that dies or is left out may see it fail, when a survivor that finished
// it already reports the dead rank while this one is still in it.
void firstCall(ncclComm_t comm, int rank, int expected, bool check) {
  if (check) return expectSum(comm, rank, expected);
  std::vector<int> v(3000, rank + 1);
  (void)ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr);
}

void expectShape(ncclComm_t comm, int rank, int nranks) {
  int r = -1, n = -1;
  ASSERT_EQ(ncclCommUserRank(comm, &r), ncclSuccess);
  ASSERT_EQ(ncclCommCount(comm, &n), ncclSuccess);
  EXPECT_EQ(r, rank);
  EXPECT_EQ(n, nranks);
}

void expectMessage(ncclComm_t comm, std::initializer_list<const char*> fragments) {
  const std::string msg = ncclGetLastError(comm);
  for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "\"" << f << "\" not in: " << msg;
}

class ShrinkModes : public ::testing::TestWithParam<RankMode> {};

// Rank 1 of 4 is left out and makes no call; the others become ranks 0-2
// of the child, and afterwards the parent still runs with all four.
TEST_P(ShrinkModes, DefaultBuildsTheSurvivorsAndLeavesTheParentUsable) {
  runRanks(GetParam(), 4, [](RankContext& ctx) {
    if (ctx.rank != 1) {
      int exclude[] = {1};
      ncclComm_t child = nullptr;
      ASSERT_EQ(ncclCommShrink(ctx.comm, exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
          << ncclGetLastError(ctx.comm);
      ASSERT_NE(child, nullptr);
      expectShape(child, ctx.rank == 0 ? 0 : ctx.rank - 1, 3);
      expectSum(child, ctx.rank, 1 + 3 + 4);  // parent ranks 0, 2, 3
      EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    }
    expectSum(ctx.comm, ctx.rank, 1 + 2 + 3 + 4);
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, ShrinkModes, ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const ::testing::TestParamInfo<RankMode>& p) { return std::string(modeName(p.param)); });

// The use it exists for: a rank dies, the survivors' call fails naming it,
// and they go on without it. Two of five ranks left out: rank 0 dies (the
// process that hosted the bootstrap root), rank 3 stays alive and idle.
void recoverFromADeadRank(int flags) {
  runRanksRaw(RankMode::kProcesses, 5, [flags](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    firstCall(comm, rank, 15, rank != 0 && rank != 3);
    if (rank == 0) _exit(0);  // dies holding its communicator, as a crash would
    if (rank == 3) {          // left out alive: the survivors' notice ends its parent
      std::this_thread::sleep_for(std::chrono::seconds(1));
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      return;
    }
    std::vector<float> big(1 << 18, 1.0f);
    ncclResult_t rc = ncclSuccess;
    for (int i = 0; i < 50 && rc == ncclSuccess; ++i)
      rc = ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat32, ncclSum, comm, nullptr);
    EXPECT_NE(rc, ncclSuccess) << "a call with a dead rank succeeded";
    const auto t0 = std::chrono::steady_clock::now();
    int exclude[] = {3, 0};
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommShrink(comm, exclude, 2, &child, nullptr, flags), ncclSuccess) << ncclGetLastError(comm);
    EXPECT_LT(secondsSince(t0), 10.0);
    expectShape(child, rank == 4 ? 2 : rank - 1, 3);  // parent ranks 1, 2, 4
    expectSum(child, rank, 2 + 3 + 5);
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  });
}

TEST(Shrink, AbortRecoversFromADeadRank) { recoverFromADeadRank(NCCL_SHRINK_ABORT); }
TEST(Shrink, DefaultRecoversFromADeadRank) { recoverFromADeadRank(NCCL_SHRINK_DEFAULT); }

// A rank that should stay but dies before the shrink fails it on the
// others, named, well before any timeout.
TEST(Shrink, ASurvivorThatDiesFailsTheShrinkNamingIt) {
  runRanksRaw(RankMode::kProcesses, 4, [](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    firstCall(comm, rank, 10, rank < 2);
    if (rank == 2) _exit(0);
    if (rank == 3) {  // excluded, alive
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    int exclude[] = {3};
    ncclComm_t child = nullptr;
    // DEFAULT: ABORT would tell every peer at once that this rank left, and
    // a peer still finishing the first AllReduce (rank 3, under a
    // sanitizer) would fail in it.
    EXPECT_EQ(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclRemoteError);
    EXPECT_EQ(child, nullptr);
    EXPECT_LT(secondsSince(t0), 10.0);
    expectMessage(comm, {"rank 2", "gone"});
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  });
}

// NCCL_SHRINK_ABORT ends a call blocked on the rank left out (alive, never
// joining), on another thread of the shrinking rank; the parent then
// refuses calls, and the child works.
TEST(Shrink, AbortEndsACallBlockedOnTheExcludedRank) {
  std::atomic<int> finished{0};
  runRanksRaw(RankMode::kThreads, 3, [&](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    if (rank == 2) {  // never calls: ranks 0 and 1 block on it
      while (finished.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      return;
    }
    std::atomic<ncclResult_t> blockedRc{ncclSuccess};
    std::vector<int> v(1000, 1);
    std::thread blocked(
        [&] { blockedRc = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr); });
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    int exclude[] = {2};
    ncclComm_t child = nullptr;
    EXPECT_EQ(ncclCommShrink(comm, exclude, 1, &child, nullptr, NCCL_SHRINK_ABORT), ncclSuccess)
        << ncclGetLastError(comm);
    blocked.join();
    EXPECT_LT(secondsSince(t0), 10.0) << "the shrink waited for the blocked call's timeout";
    EXPECT_NE(blockedRc.load(), ncclSuccess);
    if (child != nullptr) {
      expectShape(child, rank, 2);
      expectSum(child, rank, 1 + 2);
      EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    }
    EXPECT_NE(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    expectMessage(comm, {"NCCL_SHRINK_ABORT", "ncclCommDestroy"});
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    ++finished;
  });
}

// Each bad argument is named with its value; the communicator stays usable.
TEST(Shrink, BadArgumentsAreNamedAndLeaveTheCommUsable) {
  runRanks(RankMode::kThreads, 3, [](RankContext& ctx) {
    ncclComm_t child = reinterpret_cast<ncclComm_t>(0x1);
    const int other = (ctx.rank + 1) % ctx.nranks;
    int list[] = {other, other};
    EXPECT_EQ(ncclCommShrink(ctx.comm, list, 1, nullptr, nullptr, 0), ncclInvalidArgument);
    expectMessage(ctx.comm, {"newcomm", "NULL"});
    EXPECT_EQ(ncclCommShrink(ctx.comm, list, -1, &child, nullptr, 0), ncclInvalidArgument);
    expectMessage(ctx.comm, {"excludeRanksCount", "-1", "0 to 2"});
    EXPECT_EQ(child, nullptr);
    EXPECT_EQ(ncclCommShrink(ctx.comm, list, 3, &child, nullptr, 0), ncclInvalidArgument);
    expectMessage(ctx.comm, {"excludeRanksCount", "3"});
    EXPECT_EQ(ncclCommShrink(ctx.comm, nullptr, 1, &child, nullptr, 0), ncclInvalidArgument);
    expectMessage(ctx.comm, {"excludeRanksList", "NULL"});
    int outOfRange[] = {7};
    EXPECT_EQ(ncclCommShrink(ctx.comm, outOfRange, 1, &child, nullptr, 0), ncclInvalidArgument);
    expectMessage(ctx.comm, {"excludeRanksList[0]", "7", "0 to 2"});
    int self[] = {other, ctx.rank};
    EXPECT_EQ(ncclCommShrink(ctx.comm, self, 2, &child, nullptr, 0), ncclInvalidArgument);
    expectMessage(ctx.comm, {"excludeRanksList[1]", "calling rank"});
    EXPECT_EQ(ncclCommShrink(ctx.comm, list, 2, &child, nullptr, 0), ncclInvalidArgument);
    expectMessage(ctx.comm, {"excludeRanksList[1]", "listed already"});
    EXPECT_EQ(ncclCommShrink(ctx.comm, list, 1, &child, nullptr, 7), ncclInvalidArgument);
    expectMessage(ctx.comm, {"shrinkFlags", "7", "NCCL_SHRINK_ABORT"});
    EXPECT_EQ(child, nullptr);
    expectSum(ctx.comm, ctx.rank, 1 + 2 + 3);
  });
}

// Survivors that disagree on the list all fail, naming a rank that differs.
TEST(Shrink, ListsThatDifferFailOnEveryCaller) {
  runRanks(RankMode::kThreads, 4, [](RankContext& ctx) {
    if (ctx.rank == 3) return;
    int mostExclude[] = {3};
    int rank2Excludes[] = {1, 3};
    ncclComm_t child = nullptr;
    const ncclResult_t rc = ctx.rank == 2 ? ncclCommShrink(ctx.comm, rank2Excludes, 2, &child, nullptr, 0)
                                          : ncclCommShrink(ctx.comm, mostExclude, 1, &child, nullptr, 0);
    EXPECT_EQ(rc, ncclInvalidUsage);
    EXPECT_EQ(child, nullptr);
    expectMessage(ctx.comm, {"another excludeRanksList"});
  });
}

// Excluding every other rank leaves a communicator of one.
TEST(Shrink, ExcludingEveryOtherRankLeavesOne) {
  runRanks(RankMode::kThreads, 3, [](RankContext& ctx) {
    if (ctx.rank != 2) return;
    int exclude[] = {0, 1};
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommShrink(ctx.comm, exclude, 2, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
        << ncclGetLastError(ctx.comm);
    expectShape(child, 0, 1);
    expectSum(child, ctx.rank, 3);
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
}

// Excluding nobody gives a copy of the parent.
TEST(Shrink, ExcludingNobodyCopiesTheParent) {
  runRanks(RankMode::kThreads, 3, [](RankContext& ctx) {
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommShrink(ctx.comm, nullptr, 0, &child, nullptr, NCCL_SHRINK_DEFAULT), ncclSuccess)
        << ncclGetLastError(ctx.comm);
    expectShape(child, ctx.rank, 3);
    expectSum(child, ctx.rank, 6);
    EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
  });
}

}  // namespace
}  // namespace weft::test
