// Ranks on different hosts: each process claims its own host with
// NCCL_HOSTID, so every connection between them goes through the network
// transport and the proxy (no shared memory, no process-liveness checks).
// Every collective and point-to-point pattern runs across them, on rings and
// trees; and a peer that dies or closes its sockets makes the survivors fail
// in bounded time with a message naming the link.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Runs body on nranks processes, each its own host, with its communicator.
void runHosts(int nranks, const std::function<void(RankContext&)>& body) {
  runRanksRaw(RankMode::kProcesses, nranks, [&](int rank, int n, const ncclUniqueId& id) {
    const std::string host = "weft-test-host-" + std::to_string(rank);
    setenv("NCCL_HOSTID", host.c_str(), 1);
    RankContext ctx{rank, n, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, n, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
    body(ctx);
    if (ctx.comm) {
      EXPECT_EQ(ncclCommDestroy(ctx.comm), ncclSuccess);
    }
  });
}

std::vector<CollCase> everyCollective(int nranks) {
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{4097}, size_t{300001}}) {
    cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, count, 0, false});
    cases.push_back({CollOp::kAllReduce, ncclInt64, TestOp::kMax, count, 0, true});
  }
  cases.push_back({CollOp::kAllReduce, ncclBfloat16, TestOp::kPreMulPtr, 5000, 0, false});
  cases.push_back({CollOp::kBroadcast, ncclInt8, TestOp::kSum, 70001, nranks - 1, false});
  cases.push_back({CollOp::kReduce, ncclUint32, TestOp::kProd, 12345, 1, true});
  cases.push_back({CollOp::kAllGather, ncclFloat64, TestOp::kSum, 9999, 0, false});
  cases.push_back({CollOp::kReduceScatter, ncclInt32, TestOp::kAvg, 20000, 0, true});
  cases.push_back({CollOp::kAlltoAll, ncclUint8, TestOp::kSum, 33333, 0, false});
  cases.push_back({CollOp::kGather, ncclFloat16, TestOp::kSum, 1000, 2, false});
  cases.push_back({CollOp::kScatter, ncclInt64, TestOp::kSum, 1000, 3, false});
  return cases;
}

class AcrossHosts : public ::testing::TestWithParam<const char*> {};

TEST_P(AcrossHosts, EveryCollectiveOverTheNetwork) {
  ScopedEnv algo("NCCL_ALGO", GetParam());
  ScopedEnv buff("NCCL_BUFFSIZE", "131072");  // 16 KiB steps: many network messages per call
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  ScopedEnv minChannels("NCCL_MIN_NCHANNELS", "2");
  runHosts(4, [](RankContext& ctx) {
    for (const CollCase& c : everyCollective(ctx.nranks)) runAndCheck(ctx, c);
  });
}

INSTANTIATE_TEST_SUITE_P(Algorithms, AcrossHosts, ::testing::Values("Ring", "allreduce:tree"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           return std::string(p.param[0] == 'R' ? "ring" : "tree");
                         });

// Several sockets and helper threads per connection, and none at all.
TEST(AcrossHostsSockets, ThreadAndSocketCountsAllCarryTheData) {
  for (const char* threads : {"0", "4"}) {
    ScopedEnv nthreads("NCCL_SOCKET_NTHREADS", threads);
    ScopedEnv nsocks("NCCL_NSOCKS_PERTHREAD", "2");
    runHosts(3, [](RankContext& ctx) {
      for (size_t count : {size_t{5}, size_t{1} << 20})
        runAndCheck(ctx, {CollOp::kAllReduce, ncclInt32, TestOp::kSum, count, 0, false});
      runAndCheck(ctx, {CollOp::kAllGather, ncclUint8, TestOp::kSum, 200000, 0, true});
    });
  }
}

// Checks a survivor's failure: the right code, in bounded time, naming a
// peer (the dead one, or one that gave up before us).
void expectNamedNetworkFailure(const RankContext& ctx, ncclResult_t rc, double seconds) {
  EXPECT_TRUE(rc == ncclRemoteError || rc == ncclSystemError) << ncclGetErrorString(rc);
  EXPECT_LT(seconds, 20.0) << "the failure took too long to notice";
  // The dead rank, or a survivor that gave up before us and closed its side.
  expectNetworkFailureNamingAPeer(ctx);
}

// A survivor: AllReduce until a call fails (its peer gone), which must be a
// network failure naming a peer, in bounded time; then abort.
void allReduceUntilItFailsNamingAPeer(const RankContext& ctx, std::vector<float>* big) {
  const auto t0 = std::chrono::steady_clock::now();
  ncclResult_t rc = ncclSuccess;
  for (int i = 0; i < 50 && rc == ncclSuccess; ++i)
    rc = ncclAllReduce(big->data(), big->data(), big->size(), ncclFloat32, ncclSum, ctx.comm, nullptr);
  expectNamedNetworkFailure(ctx, rc, secondsSince(t0));
  EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
}

// A rank killed across the network: its sockets close, the survivors' calls
// fail naming the link.
TEST(AcrossHostsFailures, KilledRankFailsTheOthersNamingIt) {
  runHosts(3, [](RankContext& ctx) {
    std::vector<float> big(1 << 20, 1.0f);
    ASSERT_EQ(ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat32, ncclSum, ctx.comm, nullptr), ncclSuccess);
    if (ctx.rank == 2) {
      // A returned call has its data in FIFO slots, not necessarily on the
      // wire yet (the proxy sends in the background, as NCCL's does):
      // finalize flushes it, so the others' first call surely completes.
      ASSERT_EQ(ncclCommFinalize(ctx.comm), ncclSuccess);
      _exit(0);  // dies holding its communicator, as a crash would
    }
    allReduceUntilItFailsNamingAPeer(ctx, &big);
    ctx.comm = nullptr;
  });
}

// A rank that aborts (closing its sockets) while the others are in a call:
// its failure notice, sent before its sockets close, usually ends their
// calls first, naming it and why; else the network failure names a peer.
TEST(AcrossHostsFailures, PeerAbortClosingItsSocketsFailsTheOthers) {
  runHosts(3, [](RankContext& ctx) {
    std::vector<int> v(1 << 18, 1);
    if (ctx.rank == 1) {
      EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
      ctx.comm = nullptr;
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const ncclResult_t rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, ctx.comm, nullptr);
    const std::string msg = ncclGetLastError(ctx.comm);
    if (msg.find("rank 1 failed") != std::string::npos) {
      EXPECT_EQ(rc, ncclRemoteError);
      EXPECT_LT(secondsSince(t0), 20.0);
      EXPECT_NE(msg.find("ncclCommAbort"), std::string::npos) << msg;
    } else {
      expectNamedNetworkFailure(ctx, rc, secondsSince(t0));
    }
    EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
    ctx.comm = nullptr;
  });
}

// The GPU test's case on the host backend: ranks as threads of one process
// on virtual nodes (every link through the network), and a rank that
// finalizes, then aborts. A finalized rank sends no failure notice (its
// peers may be shutting down too), so only its sockets closing can tell the
// others; they must fail in bounded time naming a peer, not at WEFT_TIMEOUT.
TEST(AcrossHostsFailures, FinalizedThreadRankThatAbortsFailsTheOthers) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv timeout("WEFT_TIMEOUT", "60");
  runRanksRaw(RankMode::kThreads, 3, [](int rank, int n, const ncclUniqueId& id) {
    RankContext ctx{rank, n, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, n, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
    std::vector<float> big(1 << 20, 1.0f);
    ASSERT_EQ(ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat32, ncclSum, ctx.comm, nullptr), ncclSuccess);
    if (ctx.rank == 1) {
      EXPECT_EQ(ncclCommFinalize(ctx.comm), ncclSuccess) << ncclGetLastError(ctx.comm);
      EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
      return;
    }
    allReduceUntilItFailsNamingAPeer(ctx, &big);
  });
}

}  // namespace
}  // namespace weft::test
