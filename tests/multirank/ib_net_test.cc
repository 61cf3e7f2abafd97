// Collectives across virtual nodes over the built-in IB network, on the
// in-process verbs emulation (WEFT_IB_EMULATE: the emulation joins threads
// of one process only, so ranks are threads here). NCCL_NET=IB makes an
// unusable IB network an error, so a passing run carried every byte between
// nodes over RC queue pairs. Each case runs in a forked child: the network
// is chosen once per process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

// Runs body in a child process that must exit cleanly within `seconds`.
void inFreshProcess(unsigned seconds, const std::function<void()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(seconds);  // a hang fails the test (SIGALRM) instead of stalling ctest
    body();
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFEXITED(status) ? "child failed, exit status " + std::to_string(WEXITSTATUS(status))
                            : "child killed by signal " + std::to_string(WTERMSIG(status)) + " (14: it hung)");
}

std::vector<CollCase> collectives(int nranks) {
  return {{CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 300001, 0, false},
          {CollOp::kAllReduce, ncclInt64, TestOp::kMax, 4097, 0, true},
          {CollOp::kBroadcast, ncclInt8, TestOp::kSum, 70001, nranks - 1, false},
          {CollOp::kReduce, ncclInt32, TestOp::kProd, 5000, 1, false},
          {CollOp::kAllGather, ncclFloat64, TestOp::kSum, 9999, 0, false},
          {CollOp::kReduceScatter, ncclInt32, TestOp::kSum, 20000, 0, true},
          {CollOp::kAlltoAll, ncclUint8, TestOp::kSum, 33333, 0, false},
          {CollOp::kAllReduce, ncclUint8, TestOp::kSum, 1, 0, false}};
}

struct Setting {
  int nranks;
  int perNode;
  int qps;
  const char* algo;
};

class OverIb : public ::testing::TestWithParam<Setting> {};

TEST_P(OverIb, CollectivesAreExact) {
  const Setting s = GetParam();
  inFreshProcess(240, [s] {
    ScopedEnv emulate("WEFT_IB_EMULATE", "2");
    ScopedEnv net("NCCL_NET", "IB");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", std::to_string(s.perNode).c_str());
    ScopedEnv qps("NCCL_IB_QPS_PER_CONNECTION", std::to_string(s.qps).c_str());
    ScopedEnv algo("NCCL_ALGO", s.algo);
    ScopedEnv buff("NCCL_BUFFSIZE", "131072");  // 16 KiB steps: many messages per call
    ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
    runCases(RankMode::kThreads, s.nranks, collectives(s.nranks));
  });
}

INSTANTIATE_TEST_SUITE_P(IbEmulation, OverIb,
                         ::testing::Values(Setting{2, 1, 1, "Ring"}, Setting{4, 1, 1, "Ring,Tree"},
                                           Setting{4, 2, 2, "Ring"}, Setting{3, 1, 4, "Ring,Tree"},
                                           Setting{6, 2, 1, "Ring,Tree"}),
                         [](const ::testing::TestParamInfo<Setting>& p) {
                           return std::to_string(p.param.nranks) + "ranks_" + std::to_string(p.param.perNode) +
                                  "pernode_" + std::to_string(p.param.qps) + "qps_" +
                                  (std::string(p.param.algo).find("Tree") != std::string::npos ? "tree" : "ring");
                         });

// Without NCCL_NET the IB network is chosen before sockets when it finds a
// port, and says so; NCCL_IB_DISABLE=1 leaves the traffic to sockets.
TEST(OverIbChoice, ChosenBeforeSocketsUnlessDisabled) {
  for (const char* disable : {"0", "1"}) {
    inFreshProcess(120, [disable] {
      ScopedEnv emulate("WEFT_IB_EMULATE", "1");
      ScopedEnv off("NCCL_IB_DISABLE", disable);
      ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
      const std::string log = runLogged(2, "NET,INIT", [](RankContext& ctx) {
        runAndCheck(ctx, {CollOp::kAllReduce, ncclInt32, TestOp::kSum, 1000, 0, false});
      });
      const bool ib = log.find("Using network IB") != std::string::npos;
      const bool socket = log.find("Using network Socket") != std::string::npos;
      EXPECT_EQ(ib, disable[0] == '0') << log;
      EXPECT_EQ(socket, disable[0] == '1') << log;
    });
  }
}

// NCCL_NET=IB with the IB network turned off is the user's contradiction.
TEST(OverIbChoice, NcclNetIbWithIbDisabledIsInvalidUsage) {
  inFreshProcess(120, [] {
    ScopedEnv emulate("WEFT_IB_EMULATE", "1");
    ScopedEnv net("NCCL_NET", "IB");
    ScopedEnv off("NCCL_IB_DISABLE", "1");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
    ScopedEnv patience("WEFT_BOOTSTRAP_TIMEOUT", "20");
    runRanksRaw(RankMode::kThreads, 2, [](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      EXPECT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclInvalidUsage);
      const std::string why = ncclGetLastError(comm);
      EXPECT_NE(why.find("NCCL_IB_DISABLE"), std::string::npos) << why;
      if (comm != nullptr) ncclCommAbort(comm);
    });
  });
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A rank that aborts (destroying its QPs and closing its set-up sockets)
// while the others are in a call: they fail in bounded time, never hang.
// Either the aborting rank's failure notice ends their call first, or the
// IB network sees the closed connection and the message says so.
TEST(OverIbFailures, PeerAbortFailsTheOthersInBoundedTime) {
  inFreshProcess(120, [] {
    ScopedEnv emulate("WEFT_IB_EMULATE", "2");
    ScopedEnv net("NCCL_NET", "IB");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
    ScopedEnv timeout("WEFT_TIMEOUT", "60");
    runRanksRaw(RankMode::kThreads, 3, [](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
      std::vector<int> v(1 << 18, 1);
      ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
      if (rank == 1) {
        // A returned call's last steps may still wait in the proxy: finalize
        // sends them, so the others' first call surely completes.
        EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        return;
      }
      const auto t0 = std::chrono::steady_clock::now();
      ncclResult_t rc = ncclSuccess;
      for (int i = 0; i < 50 && rc == ncclSuccess; ++i)
        rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr);
      EXPECT_TRUE(rc == ncclRemoteError || rc == ncclSystemError) << ncclGetErrorString(rc);
      EXPECT_LT(secondsSince(t0), 20.0) << "the failure took too long to notice";
      const std::string msg = ncclGetLastError(comm);
      const bool notice = msg.find("rank 1 failed") != std::string::npos;
      const bool network = msg.find("over IB") != std::string::npos || msg.find("IB test") != std::string::npos ||
                           msg.find("IB isend") != std::string::npos || msg.find("IB irecv") != std::string::npos;
      EXPECT_TRUE(notice || network) << msg;
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    });
  });
}

}  // namespace
}  // namespace weft::test
