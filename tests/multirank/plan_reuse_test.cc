// A call shaped like the previous one (same collective, count, type, op and
// root) reuses the communicator's plan with the new buffers patched in
// (core/launch.cc). These tests repeat calls the way a training loop does and
// change one thing at a time, so that a reused plan that kept an old buffer,
// an old scalar or an old root gives a wrong result.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

using Setting = std::tuple<RankMode, int>;  // how the ranks run, how many
class PlanReuse : public ::testing::TestWithParam<Setting> {};

float input(int iter, int rank, size_t i) {
  return static_cast<float>((iter + 1) * (rank + 1) + static_cast<int>(i % 7));
}

// The sum over ranks of input(iter, r, i), times `scale`.
float expectedSum(int iter, int nranks, size_t i, float scale) {
  float sum = 0;
  for (int r = 0; r < nranks; ++r) sum += input(iter, r, i);
  return sum * scale;
}

// Same AllReduce on alternating buffer pairs, in place every third call:
// each call must read its own sendbuff and write its own recvbuff.
TEST_P(PlanReuse, SameCallOnOtherBuffers) {
  const auto [mode, nranks] = GetParam();
  runRanks(mode, nranks, [&](RankContext& ctx) {
    for (size_t n : {size_t{5}, size_t{3000}, size_t{70000}}) {
      std::vector<float> send[2] = {std::vector<float>(n), std::vector<float>(n)};
      std::vector<float> recv[2] = {std::vector<float>(n), std::vector<float>(n)};
      for (int iter = 0; iter < 6; ++iter) {
        const int b = iter % 2;
        const bool inPlace = iter % 3 == 2;
        for (size_t i = 0; i < n; ++i) send[b][i] = input(iter, ctx.rank, i);
        std::fill(recv[b].begin(), recv[b].end(), -1.0f);
        float* out = inPlace ? send[b].data() : recv[b].data();
        ASSERT_EQ(ncclAllReduce(send[b].data(), out, n, ncclFloat32, ncclSum, ctx.comm, nullptr), ncclSuccess);
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(out[i], expectedSum(iter, ctx.nranks, i, 1.0f))
              << "count " << n << " iteration " << iter << " element " << i;
        }
        if (!inPlace) {
          ASSERT_EQ(send[b][0], input(iter, ctx.rank, 0)) << "sendbuff was written";
        }
      }
    }
  });
}

// PreMulSum with a new host scalar each call, same count and type: the
// scalar is part of the call's shape, so no call may use the last one's.
TEST_P(PlanReuse, NewScalarEachCall) {
  const auto [mode, nranks] = GetParam();
  runRanks(mode, nranks, [&](RankContext& ctx) {
    const size_t n = 1000;
    std::vector<float> send(n);
    std::vector<float> recv(n);
    for (int iter = 0; iter < 4; ++iter) {
      float scalar = static_cast<float>(iter + 2);
      ncclRedOp_t op;
      ASSERT_EQ(ncclRedOpCreatePreMulSum(&op, &scalar, ncclFloat32, ncclScalarHostImmediate, ctx.comm), ncclSuccess);
      for (size_t i = 0; i < n; ++i) send[i] = input(0, ctx.rank, i);
      ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), n, ncclFloat32, op, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRedOpDestroy(op, ctx.comm), ncclSuccess);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(recv[i], expectedSum(0, ctx.nranks, i, scalar)) << "scalar " << scalar << " element " << i;
    }
  });
}

// Broadcast with the root moving round the ranks and the count changing
// back and forth: a new root or count is a new plan.
TEST_P(PlanReuse, RootAndCountChanges) {
  const auto [mode, nranks] = GetParam();
  runRanks(mode, nranks, [&](RankContext& ctx) {
    std::vector<int> buf(5000);
    for (int iter = 0; iter < 3 * ctx.nranks; ++iter) {
      const int root = iter % ctx.nranks;
      const size_t n = iter % 3 == 0 ? 5000 : 64;
      for (size_t i = 0; i < n; ++i) buf[i] = ctx.rank == root ? iter * 1000 + root * 7 + static_cast<int>(i) : -1;
      ASSERT_EQ(ncclBroadcast(buf.data(), buf.data(), n, ncclInt32, root, ctx.comm, nullptr), ncclSuccess);
      for (size_t i = 0; i < n; ++i)
        ASSERT_EQ(buf[i], iter * 1000 + root * 7 + static_cast<int>(i)) << "root " << root << " count " << n;
    }
  });
}

// A repeat outside a group runs the kept plan directly (launchColl), so
// every other kind of launch in between must leave it right or drop it: a
// different collective, a larger one on several channels, sends and
// receives in a group, the same broadcast inside a group.
TEST_P(PlanReuse, RepeatsAroundOtherLaunches) {
  const auto [mode, nranks] = GetParam();
  runRanks(mode, nranks, [&](RankContext& ctx) {
    const int next = (ctx.rank + 1) % ctx.nranks;
    const int prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
    std::vector<int> small(16);
    std::vector<float> big(1 << 18);
    std::vector<int> sendp(100);
    std::vector<int> recvp(100);
    auto broadcastSmall = [&](int iter, bool grouped) {
      for (size_t i = 0; i < small.size(); ++i) small[i] = ctx.rank == 0 ? iter * 100 + static_cast<int>(i) : -1;
      if (grouped) {
        ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      }
      ASSERT_EQ(ncclBroadcast(small.data(), small.data(), small.size(), ncclInt32, 0, ctx.comm, nullptr), ncclSuccess);
      if (grouped) {
        ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      }
      for (size_t i = 0; i < small.size(); ++i)
        ASSERT_EQ(small[i], iter * 100 + static_cast<int>(i)) << "iteration " << iter << " element " << i;
    };
    for (int iter = 0; iter < 4; ++iter) {
      broadcastSmall(10 * iter, false);
      broadcastSmall(10 * iter + 1, false);
      switch (iter) {
        case 0: {
          for (size_t i = 0; i < big.size(); ++i) big[i] = input(iter, ctx.rank, i);
          ASSERT_EQ(ncclAllReduce(big.data(), big.data(), big.size(), ncclFloat32, ncclSum, ctx.comm, nullptr),
                    ncclSuccess);
          for (size_t i = 0; i < big.size(); i += 997) ASSERT_EQ(big[i], expectedSum(iter, ctx.nranks, i, 1.0f));
          break;
        }
        case 1: {
          for (size_t i = 0; i < sendp.size(); ++i) sendp[i] = ctx.rank * 1000 + static_cast<int>(i);
          ASSERT_EQ(ncclGroupStart(), ncclSuccess);
          ASSERT_EQ(ncclSend(sendp.data(), sendp.size(), ncclInt32, next, ctx.comm, nullptr), ncclSuccess);
          ASSERT_EQ(ncclRecv(recvp.data(), recvp.size(), ncclInt32, prev, ctx.comm, nullptr), ncclSuccess);
          ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
          for (size_t i = 0; i < recvp.size(); ++i) ASSERT_EQ(recvp[i], prev * 1000 + static_cast<int>(i));
          break;
        }
        case 2: broadcastSmall(10 * iter + 2, true); break;
        default: {
          // Same count and type, another collective: a new shape.
          for (size_t i = 0; i < small.size(); ++i) small[i] = ctx.rank + static_cast<int>(i);
          ASSERT_EQ(ncclAllReduce(small.data(), small.data(), small.size(), ncclInt32, ncclSum, ctx.comm, nullptr),
                    ncclSuccess);
          const int rankSum = ctx.nranks * (ctx.nranks - 1) / 2;
          for (size_t i = 0; i < small.size(); ++i) ASSERT_EQ(small[i], rankSum + ctx.nranks * static_cast<int>(i));
        }
      }
      broadcastSmall(10 * iter + 3, false);
    }
  });
}

// Two threads of each rank take turns on the rank's one communicator: a
// repeat by the thread that last launched runs without the lock (its bias,
// core/exec_lock.h); the other thread's call revokes the bias, runs under
// the lock and takes the bias. Every call is checked, so a repeat that ran
// while the other thread held the communicator shows as a wrong result.
TEST_P(PlanReuse, TwoThreadsOfARankTakeTurns) {
  const auto [mode, nranks] = GetParam();
  runRanks(mode, nranks, [&](RankContext& ctx) {
    constexpr int kCalls = 400;
    std::mutex m;
    std::condition_variable cv;
    int turn = 0;  // the call to make next; thread t makes calls with (call / 3) % 2 == t
    auto worker = [&](int t) {
      std::vector<int> buf(32);
      for (;;) {
        std::unique_lock<std::mutex> lk(m);
        cv.wait(lk, [&] { return turn >= kCalls || (turn / 3) % 2 == t; });
        if (turn >= kCalls) return;
        const int call = turn;
        for (size_t i = 0; i < buf.size(); ++i) buf[i] = ctx.rank == 0 ? call * 1000 + static_cast<int>(i) : -1;
        ASSERT_EQ(ncclBroadcast(buf.data(), buf.data(), buf.size(), ncclInt32, 0, ctx.comm, nullptr), ncclSuccess);
        for (size_t i = 0; i < buf.size(); ++i)
          ASSERT_EQ(buf[i], call * 1000 + static_cast<int>(i)) << "call " << call << " by thread " << t;
        ++turn;
        cv.notify_all();
      }
    };
    std::thread a(worker, 0);
    std::thread b(worker, 1);
    a.join();
    b.join();
    EXPECT_EQ(turn, kCalls);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, PlanReuse,
                         ::testing::Combine(::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                                            ::testing::Values(2, 3)),
                         [](const ::testing::TestParamInfo<Setting>& p) {
                           return std::string(modeName(std::get<0>(p.param))) + "_" +
                                  std::to_string(std::get<1>(p.param)) + "ranks";
                         });

// Inside a group even a call shaped like the kept plan is queued, not run
// on the spot: rank 1's grouped Broadcast returns before rank 0, the root,
// has made its own, and only then does rank 1 let rank 0 go. Run on the
// spot, rank 1's call would wait for data that comes only after that
// signal, and fail at WEFT_TIMEOUT.
TEST(PlanReuseGroup, RepeatInsideAGroupIsQueuedUntilGroupEnd) {
  ScopedEnv timeout("WEFT_TIMEOUT", "5");
  std::atomic<int> go{0};
  runRanksRaw(RankMode::kThreads, 2, [&](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    std::vector<int> v(16);
    auto broadcast = [&](int iter) {
      for (size_t i = 0; i < v.size(); ++i) v[i] = rank == 0 ? iter * 100 + static_cast<int>(i) : -1;
      return ncclBroadcast(v.data(), v.data(), v.size(), ncclInt32, 0, comm, nullptr);
    };
    auto check = [&](int iter) {
      for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], iter * 100 + static_cast<int>(i)) << "call " << iter;
    };
    for (int iter = 0; iter < 5; ++iter) {  // the plan is kept and repeated
      ASSERT_EQ(broadcast(iter), ncclSuccess);
      check(iter);
    }
    if (rank == 1) {
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      const ncclResult_t queued = broadcast(5);
      go = 1;
      ASSERT_EQ(queued, ncclSuccess) << ncclGetLastError(comm);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comm);
    } else {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
      while (go.load() == 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      ASSERT_EQ(go.load(), 1) << "rank 1's grouped call did not return: it ran instead of being queued";
      ASSERT_EQ(broadcast(5), ncclSuccess) << ncclGetLastError(comm);
    }
    check(5);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// Groups are per thread: while another thread of the process is inside a
// group, this thread's calls still run before they return (a one-rank
// communicator's AllReduce has its result at once), the repeated one too.
TEST(PlanReuseGroup, AnotherThreadsGroupLeavesThisThreadsCallsImmediate) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, 1, id, 0), ncclSuccess) << ncclGetLastError(nullptr);
  std::mutex m;
  std::condition_variable cv;
  int stage = 0;  // 1: the other thread is inside its group; 2: this thread is done
  std::thread grouped([&] {
    EXPECT_EQ(ncclGroupStart(), ncclSuccess);
    std::unique_lock<std::mutex> lk(m);
    stage = 1;
    cv.notify_all();
    cv.wait(lk, [&] { return stage == 2; });
    lk.unlock();
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  });
  {
    std::unique_lock<std::mutex> lk(m);
    cv.wait(lk, [&] { return stage == 1; });
  }
  std::vector<int> in(32);
  std::vector<int> out(32);
  for (int call = 0; call < 3; ++call) {
    for (size_t i = 0; i < in.size(); ++i) in[i] = call * 1000 + static_cast<int>(i);
    std::fill(out.begin(), out.end(), -1);
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(out, in) << "call " << call << " was queued as if this thread were in a group";
  }
  {
    std::lock_guard<std::mutex> lk(m);
    stage = 2;
  }
  cv.notify_all();
  grouped.join();
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

// Two ranks as threads. Rank 1 joins five AllReduces of 64 ints, then
// stays silent until rank 0's body has returned, then aborts. Rank 0's body
// gets its comm and that AllReduce as a function; it makes the first five
// calls itself (on whichever thread it wants to hold the lock's bias).
void withPeerSilentAfterFive(const std::function<void(ncclComm_t, const std::function<ncclResult_t()>&)>& body) {
  std::atomic<int> done{0};
  runRanksRaw(RankMode::kThreads, 2, [&](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    std::vector<int> v(64, 1);
    auto allreduce = [&] { return ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr); };
    if (rank == 1) {
      for (int i = 0; i < 5; ++i) ASSERT_EQ(allreduce(), ncclSuccess);
      while (!done.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
      return;
    }
    body(comm, allreduce);
    done = 1;
  });
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A peer that stops calling while the others repeat a call: the repeat's
// wait fails like any other, naming the peer, and the communicator stays
// failed (no later repeat runs on it).
TEST(PlanReuseFailure, RepeatWaitingOnASilentPeerFailsNamingIt) {
  ScopedEnv timeout("WEFT_TIMEOUT", "1");
  withPeerSilentAfterFive([](ncclComm_t comm, const std::function<ncclResult_t()>& allreduce) {
    for (int i = 0; i < 5; ++i) ASSERT_EQ(allreduce(), ncclSuccess);
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(allreduce(), ncclRemoteError);
    EXPECT_LT(secondsSince(t0), 10.0);
    const std::string msg = ncclGetLastError(comm);
    EXPECT_NE(msg.find("rank 1"), std::string::npos) << msg;
    ncclResult_t async = ncclSuccess;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_NE(async, ncclSuccess);
    // The same call again: refused at once with the recorded failure.
    const auto t1 = std::chrono::steady_clock::now();
    EXPECT_NE(allreduce(), ncclSuccess);
    EXPECT_LT(secondsSince(t1), 0.5);
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  });
}

// ncclCommAbort from another thread while a repeat is blocked on a silent
// peer. The repeat's thread made the earlier calls too, so it holds the
// lock's bias and runs the repeat without the lock: abort must still see
// it, raise the flag, wait for it to return its error, and return promptly.
TEST(PlanReuseFailure, AbortFromAnotherThreadEndsABlockedRepeat) {
  withPeerSilentAfterFive([](ncclComm_t comm, const std::function<ncclResult_t()>& allreduce) {
    std::atomic<int> warmed{0};
    std::atomic<ncclResult_t> rc{ncclSuccess};
    std::thread caller([&] {
      for (int i = 0; i < 5; ++i) ASSERT_EQ(allreduce(), ncclSuccess);
      warmed = 1;
      rc = allreduce();
    });
    while (!warmed.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    caller.join();
    EXPECT_LT(secondsSince(t0), 5.0);
    EXPECT_NE(rc.load(), ncclSuccess);
  });
}

}  // namespace
}  // namespace weft::test
