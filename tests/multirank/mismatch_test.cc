// Mismatched calls: ranks that disagree on a call's count, datatype, op,
// root, collective, order or send/recv size must fail, every rank of them,
// within seconds, with a message that names both sides' calls; matched calls
// must never be flagged (the rest of the suite runs with the check on, which
// is the default).
#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "multirank/coll_check.h"
#include "multirank/harness.h"
#include "nccl.h"

namespace weft::test {
namespace {

using Clock = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// A rank's part of a mismatch: the call it makes (its result is returned).
using RankCall = std::function<ncclResult_t(int rank, ncclComm_t comm)>;

// Every rank runs `call` once, which must fail within kBoundSeconds on every
// rank (or, where the rank's own part completed, its next call must); every
// message says "mismatched calls", and a rank that found the mismatch itself
// (ncclInvalidUsage) names both calls: `expectOnDetector`.
constexpr double kBoundSeconds = 10.0;

void expectMismatch(RankMode mode, int nranks, const RankCall& call, const std::vector<std::string>& expectOnDetector) {
  // A missed mismatch would wait for this long, not 600 s.
  ScopedEnv timeout("WEFT_TIMEOUT", "30");
  runRanksRaw(mode, nranks, [&](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, n, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
    // One matched call first: the check must not fire on it.
    std::vector<float> ok(1000, 1.0f);
    ASSERT_EQ(ncclAllReduce(ok.data(), ok.data(), ok.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess)
        << ncclGetLastError(comm);
    ASSERT_EQ(ok[999], static_cast<float>(n));
    const Clock::time_point start = Clock::now();
    ncclResult_t rc = call(rank, comm);
    // A rank whose peers all agreed with it may finish the call (a broadcast
    // root whose data went out): its next call fails instead.
    if (rc == ncclSuccess) rc = ncclAllReduce(ok.data(), ok.data(), ok.size(), ncclFloat32, ncclSum, comm, nullptr);
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    const std::string why = ncclGetLastError(comm);
    EXPECT_NE(rc, ncclSuccess) << "rank " << rank << ": the mismatched call and the next succeeded";
    EXPECT_LT(seconds, kBoundSeconds) << "rank " << rank << ": " << why;
    EXPECT_TRUE(contains(why, "mismatched calls")) << "rank " << rank << ": " << why;
    // The rank that found it (invalid usage) names both calls; the others
    // were told by it (remote error) and carry its message.
    if (rc == ncclInvalidUsage)
      for (const std::string& text : expectOnDetector)
        EXPECT_TRUE(contains(why, text)) << "rank " << rank << ": " << why;
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  });
}

class Mismatch : public ::testing::TestWithParam<RankMode> {};

TEST_P(Mismatch, Count) {
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<float> data(rank == 0 ? 1024 : 2048, 1.0f);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
                 },
                 {"AllReduce(count 1024, float, sum", "AllReduce(count 2048, float, sum"});
}

TEST_P(Mismatch, Datatype) {
  expectMismatch(GetParam(), 3,
                 [](int rank, ncclComm_t comm) {
                   std::vector<int32_t> data(256, 1);
                   return ncclAllReduce(data.data(), data.data(), data.size(), rank == 1 ? ncclInt32 : ncclFloat32,
                                        ncclSum, comm, nullptr);
                 },
                 {"AllReduce(count 256, int32, sum", "AllReduce(count 256, float, sum"});
}

TEST_P(Mismatch, Op) {
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<int32_t> data(64, 1);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclInt32, rank == 0 ? ncclSum : ncclMax,
                                        comm, nullptr);
                 },
                 {"int32, sum", "int32, max"});
}

TEST_P(Mismatch, Root) {
  expectMismatch(GetParam(), 3,
                 [](int rank, ncclComm_t comm) {
                   std::vector<char> data(4096, 1);
                   // Ranks 0 and 1 say root 0, rank 2 says root 1: whichever rank
                   // receives from a rank of the other opinion finds it.
                   return ncclBroadcast(data.data(), data.data(), data.size(), ncclInt8, rank == 2 ? 1 : 0, comm,
                                        nullptr);
                 },
                 {"root 0", "root 1"});
}

TEST_P(Mismatch, Collective) {
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<float> send(512, 1.0f), recv(1024, 0.0f);
                   if (rank == 0) return ncclAllGather(send.data(), recv.data(), 512, ncclFloat32, comm, nullptr);
                   return ncclReduceScatter(recv.data(), send.data(), 512, ncclFloat32, ncclSum, comm, nullptr);
                 },
                 {"AllGather(2048 bytes per rank", "ReduceScatter(count 512, float, sum"});
}

TEST_P(Mismatch, SendRecvSize) {
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<char> buffer(8192, 1);
                   if (rank == 0) return ncclSend(buffer.data(), 4096, ncclInt8, 1, comm, nullptr);
                   return ncclRecv(buffer.data(), 8192, ncclInt8, 0, comm, nullptr);
                 },
                 {"Send/Recv(4096 bytes)", "Send/Recv(8192 bytes)"});
}

// Small calls run under LL on the host (no tail: the signature travels in an
// LL pack of its own) unless NCCL_PROTO says Simple; both must catch them.
TEST_P(Mismatch, SmallCountUnderLL) {
  ScopedEnv proto("NCCL_PROTO", "LL");
  expectMismatch(GetParam(), 3,
                 [](int rank, ncclComm_t comm) {
                   std::vector<float> data(rank == 2 ? 32 : 16, 1.0f);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
                 },
                 {"AllReduce(count 16, float, sum", "AllReduce(count 32, float, sum"});
}

TEST_P(Mismatch, SmallOpUnderSimple) {
  ScopedEnv proto("NCCL_PROTO", "Simple");
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<int32_t> data(2, 1);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclInt32, rank == 0 ? ncclSum : ncclMin,
                                        comm, nullptr);
                 },
                 {"int32, sum", "int32, min"});
}

TEST_P(Mismatch, DatatypeUnderLL) {
  ScopedEnv proto("NCCL_PROTO", "LL");
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<int64_t> data(4, 1);
                   return ncclAllReduce(data.data(), data.data(), data.size(), rank == 0 ? ncclInt64 : ncclFloat64,
                                        ncclMax, comm, nullptr);
                 },
                 {"int64, max", "double, max"});
}

INSTANTIATE_TEST_SUITE_P(Modes, Mismatch, ::testing::Values(RankMode::kThreads, RankMode::kProcesses));

// Four ranks on two virtual nodes: steps that crossed the network are not
// checked, but rank 1's call reaches rank 0... through rank 0's own node
// neighbour: every rank still fails, in bounded time.
TEST(MismatchNodes, ReachesEveryRank) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "2");
  expectMismatch(RankMode::kProcesses, 4,
                 [](int rank, ncclComm_t comm) {
                   std::vector<float> data(rank == 1 ? 300 : 200, 1.0f);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
                 },
                 {"count 200", "count 300"});
}

// Matched calls in every form the planner reuses or batches (repeats, groups
// of collectives, collectives with send/recv) are never flagged.
TEST(MismatchNone, RepeatsAndGroups) {
  runRanks(RankMode::kProcesses, 3, [](RankContext& ctx) {
    std::vector<double> data(3000, 1.0);
    for (int i = 0; i < 50; ++i)
      ASSERT_EQ(ncclAllReduce(data.data(), data.data(), 16, ncclFloat64, ncclSum, ctx.comm, nullptr), ncclSuccess)
          << ncclGetLastError(ctx.comm);
    std::vector<double> send(64, 1.0), recv(64, 0.0);
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclAllReduce(data.data(), data.data(), 1000, ncclFloat64, ncclSum, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclBroadcast(data.data(), data.data(), 7, ncclFloat64, i % ctx.nranks, ctx.comm, nullptr),
                ncclSuccess);
      ASSERT_EQ(ncclSend(send.data(), 64, ncclFloat64, (ctx.rank + 1) % ctx.nranks, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRecv(recv.data(), 64, ncclFloat64, (ctx.rank + ctx.nranks - 1) % ctx.nranks, ctx.comm, nullptr),
                ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(ctx.comm);
    }
    EXPECT_EQ(recv[63], 1.0);
  });
}

}  // namespace
}  // namespace weft::test
