// Mismatched calls: ranks that disagree on a call's count, datatype, op,
// root, collective, order or send/recv size must fail, every rank of them,
// within seconds, with a message that names both sides' calls; matched calls
// must never be flagged (the rest of the suite runs with the check on, which
// is the default).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
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
    // One matched call first: the check must not fire on it. A slow rank may
    // still be in it when faster ranks find the mismatch in the next call:
    // their notice then fails its pending call (remote error, carrying the
    // mismatch), as every pending call fails once the communicator is known
    // broken. It never finds a mismatch there itself (invalid usage).
    std::vector<float> ok(1000, 1.0f);
    const Clock::time_point start = Clock::now();
    const ncclResult_t first = ncclAllReduce(ok.data(), ok.data(), ok.size(), ncclFloat32, ncclSum, comm, nullptr);
    ASSERT_NE(first, ncclInvalidUsage) << "the matched call was taken for a mismatch: " << ncclGetLastError(comm);
    if (first == ncclSuccess) ASSERT_EQ(ok[999], static_cast<float>(n));
    ncclResult_t rc = first == ncclSuccess ? call(rank, comm) : first;
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
    if (rc == ncclInvalidUsage) {
      for (const std::string& text : expectOnDetector)
        EXPECT_TRUE(contains(why, text)) << "rank " << rank << ": " << why;
    }
    EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
  });
}

// One kind of mismatch: how many ranks, what each calls, and what the
// detecting rank's message must say.
struct MismatchCase {
  const char* name;
  int nranks;
  RankCall call;
  std::vector<std::string> expectOnDetector;
};

const std::vector<MismatchCase>& mismatchCases() {
  static const std::vector<MismatchCase> cases = {
      {"Count",
       2,
       [](int rank, ncclComm_t comm) {
         std::vector<float> data(rank == 0 ? 1024 : 2048, 1.0f);
         return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
       },
       {"AllReduce(count 1024, float, sum", "AllReduce(count 2048, float, sum"}},
      {"Datatype",
       3,
       [](int rank, ncclComm_t comm) {
         std::vector<int32_t> data(256, 1);
         return ncclAllReduce(data.data(), data.data(), data.size(), rank == 1 ? ncclInt32 : ncclFloat32, ncclSum, comm,
                              nullptr);
       },
       {"AllReduce(count 256, int32, sum", "AllReduce(count 256, float, sum"}},
      {"Op",
       2,
       [](int rank, ncclComm_t comm) {
         std::vector<int32_t> data(64, 1);
         return ncclAllReduce(data.data(), data.data(), data.size(), ncclInt32, rank == 0 ? ncclSum : ncclMax, comm,
                              nullptr);
       },
       {"int32, sum", "int32, max"}},
      // Ranks 0 and 1 say root 0, rank 2 says root 1: whichever rank
      // receives from a rank of the other opinion finds it.
      {"Root",
       3,
       [](int rank, ncclComm_t comm) {
         std::vector<char> data(4096, 1);
         return ncclBroadcast(data.data(), data.data(), data.size(), ncclInt8, rank == 2 ? 1 : 0, comm, nullptr);
       },
       {"root 0", "root 1"}},
      {"Collective",
       2,
       [](int rank, ncclComm_t comm) {
         std::vector<float> send(512, 1.0f), recv(1024, 0.0f);
         if (rank == 0) return ncclAllGather(send.data(), recv.data(), 512, ncclFloat32, comm, nullptr);
         return ncclReduceScatter(recv.data(), send.data(), 512, ncclFloat32, ncclSum, comm, nullptr);
       },
       {"AllGather(2048 bytes per rank", "ReduceScatter(count 512, float, sum"}},
      {"SendRecvSize",
       2,
       [](int rank, ncclComm_t comm) {
         std::vector<char> buffer(8192, 1);
         if (rank == 0) return ncclSend(buffer.data(), 4096, ncclInt8, 1, comm, nullptr);
         return ncclRecv(buffer.data(), 8192, ncclInt8, 0, comm, nullptr);
       },
       {"Send/Recv(4096 bytes)", "Send/Recv(8192 bytes)"}},
  };
  return cases;
}

void expectCase(RankMode mode, const MismatchCase& c) { expectMismatch(mode, c.nranks, c.call, c.expectOnDetector); }

using ModeAndCase = std::tuple<RankMode, size_t>;

std::string caseName(const ::testing::TestParamInfo<ModeAndCase>& p) {
  return std::string(mismatchCases()[std::get<1>(p.param)].name) + "_" + modeName(std::get<0>(p.param));
}

// Ranks of one node: shared memory (processes) or in-process links (threads).
class Mismatch : public ::testing::TestWithParam<ModeAndCase> {};

TEST_P(Mismatch, FailsEveryRankNamingBothCalls) {
  expectCase(std::get<0>(GetParam()), mismatchCases()[std::get<1>(GetParam())]);
}

// Every rank its own virtual node: every step crosses the socket network, and
// the proxy carries its call signature (transport/net/net_wire.h).
class MismatchAcrossNodes : public ::testing::TestWithParam<ModeAndCase> {};

TEST_P(MismatchAcrossNodes, FailsEveryRankNamingBothCalls) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv net("NCCL_NET", "Socket");
  expectCase(std::get<0>(GetParam()), mismatchCases()[std::get<1>(GetParam())]);
}

const auto kEveryCase = ::testing::Combine(::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                                           ::testing::Range<size_t>(0, mismatchCases().size()));
INSTANTIATE_TEST_SUITE_P(Modes, Mismatch, kEveryCase, caseName);
INSTANTIATE_TEST_SUITE_P(Modes, MismatchAcrossNodes, kEveryCase, caseName);

class MismatchProto : public ::testing::TestWithParam<RankMode> {};

// Small calls run under LL on the host (no tail: the signature travels in an
// LL pack of its own) unless NCCL_PROTO says Simple; both must catch them.
TEST_P(MismatchProto, SmallCountUnderLL) {
  ScopedEnv proto("NCCL_PROTO", "LL");
  expectMismatch(GetParam(), 3,
                 [](int rank, ncclComm_t comm) {
                   std::vector<float> data(rank == 2 ? 32 : 16, 1.0f);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
                 },
                 {"AllReduce(count 16, float, sum", "AllReduce(count 32, float, sum"});
}

TEST_P(MismatchProto, SmallOpUnderSimple) {
  ScopedEnv proto("NCCL_PROTO", "Simple");
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<int32_t> data(2, 1);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclInt32, rank == 0 ? ncclSum : ncclMin,
                                        comm, nullptr);
                 },
                 {"int32, sum", "int32, min"});
}

TEST_P(MismatchProto, DatatypeUnderLL) {
  ScopedEnv proto("NCCL_PROTO", "LL");
  expectMismatch(GetParam(), 2,
                 [](int rank, ncclComm_t comm) {
                   std::vector<int64_t> data(4, 1);
                   return ncclAllReduce(data.data(), data.data(), data.size(), rank == 0 ? ncclInt64 : ncclFloat64,
                                        ncclMax, comm, nullptr);
                 },
                 {"int64, max", "double, max"});
}

// LL128's steps sign like LL's, in a region of their own.
TEST_P(MismatchProto, CountUnderLL128) {
  ScopedEnv proto("NCCL_PROTO", "LL128");
  expectMismatch(GetParam(), 3,
                 [](int rank, ncclComm_t comm) {
                   std::vector<float> data(rank == 1 ? 3000 : 2000, 1.0f);
                   return ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr);
                 },
                 {"AllReduce(count 2000, float, sum", "AllReduce(count 3000, float, sum"});
}

INSTANTIATE_TEST_SUITE_P(Modes, MismatchProto, ::testing::Values(RankMode::kThreads, RankMode::kProcesses));

// Four ranks on two virtual nodes: rank 1's call differs from everyone
// else's; whoever receives from it, on its node or across the network, finds
// it, and every rank fails in bounded time.
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
void matchedCalls(RankContext& ctx) {
  std::vector<double> data(3000, 1.0);
  for (int i = 0; i < 50; ++i)
    ASSERT_EQ(ncclAllReduce(data.data(), data.data(), 16, ncclFloat64, ncclSum, ctx.comm, nullptr), ncclSuccess)
        << ncclGetLastError(ctx.comm);
  std::vector<double> send(64, 1.0), recv(64, 0.0);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(data.data(), data.data(), 1000, ncclFloat64, ncclSum, ctx.comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclBroadcast(data.data(), data.data(), 7, ncclFloat64, i % ctx.nranks, ctx.comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclSend(send.data(), 64, ncclFloat64, (ctx.rank + 1) % ctx.nranks, ctx.comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(recv.data(), 64, ncclFloat64, (ctx.rank + ctx.nranks - 1) % ctx.nranks, ctx.comm, nullptr),
              ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(ctx.comm);
  }
  EXPECT_EQ(recv[63], 1.0);
}

TEST(MismatchNone, RepeatsAndGroups) { runRanks(RankMode::kProcesses, 3, matchedCalls); }

// Across the network with small slots, so that most steps fill their slot
// and the signature travels in the slot's gap: results stay exact (the
// signature never lands in the data) and nothing is flagged.
std::vector<CollCase> checkedCases(int nranks) {
  return {{CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 300001, 0, false},
          {CollOp::kAllReduce, ncclInt64, TestOp::kMax, 4097, 0, true},
          {CollOp::kBroadcast, ncclInt8, TestOp::kSum, 70001, nranks - 1, false},
          {CollOp::kReduce, ncclInt32, TestOp::kSum, 40000, 1, false},
          {CollOp::kAllGather, ncclFloat64, TestOp::kSum, 9999, 0, false},
          {CollOp::kReduceScatter, ncclInt32, TestOp::kSum, 20000, 0, true},
          {CollOp::kAlltoAll, ncclUint8, TestOp::kSum, 33333, 0, false}};
}

void matchedAndChecked(RankContext& ctx) {
  ASSERT_NO_FATAL_FAILURE(matchedCalls(ctx));
  for (int round = 0; round < 2; ++round)
    for (const CollCase& c : checkedCases(ctx.nranks))
      if (!runAndCheck(ctx, c)) return;
}

class MismatchNoneAcrossNodes : public ::testing::TestWithParam<RankMode> {};

TEST_P(MismatchNoneAcrossNodes, MatchedCallsAreNeverFlagged) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv net("NCCL_NET", "Socket");
  ScopedEnv buff("NCCL_BUFFSIZE", "131072");  // 16 KiB steps
  for (const char* algo : {"Ring", "Tree"}) {
    ScopedEnv algorithm("NCCL_ALGO", algo);
    runRanks(GetParam(), 3, matchedAndChecked);
  }
}

// With the check off the trailer still travels, carrying zeros: the data
// path is unchanged and the results exact.
TEST(MismatchNoneAcrossNodesUnchecked, CallsWithTheCheckOffStillWork) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv net("NCCL_NET", "Socket");
  ScopedEnv buff("NCCL_BUFFSIZE", "131072");
  ScopedEnv off("WEFT_CHECK_CALLS", "0");
  runRanks(RankMode::kThreads, 3, matchedAndChecked);
}

INSTANTIATE_TEST_SUITE_P(Modes, MismatchNoneAcrossNodes, ::testing::Values(RankMode::kThreads, RankMode::kProcesses));

// Through an external plugin of the oldest interface Weft loads (v6, whose
// sizes are ints), behind the adapter: the trailer is part of the message
// the plugin moves. The plugin is an in-process network, so the ranks are
// threads. A process chooses its network once, and earlier tests of this
// binary may have chosen sockets: the test runs again in a new program
// (this binary, filtered to the test, marked by kFreshChild).
constexpr const char* kFreshChild = "WEFT_MISMATCH_TEST_FRESH_CHILD";

void inFreshProgram(unsigned seconds, const char* testName) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    setenv(kFreshChild, "1", 1);
    alarm(seconds);  // kept across exec: a hang ends the child (SIGALRM) and fails the test
    const std::string filter = std::string("--gtest_filter=") + testName;
    execl("/proc/self/exe", "test_mismatch", filter.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFEXITED(status) ? "child failed, exit status " + std::to_string(WEXITSTATUS(status))
                            : "child killed by signal " + std::to_string(WTERMSIG(status)) + " (14: it hung)");
}

// Bytes the loaded test plugin received (0 if it is not loaded).
int64_t pluginBytesReceived(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  int64_t connects = 0, accepts = 0, bytes = 0;
  int version = 0;
  using StatsFn = void (*)(int64_t*, int64_t*, int64_t*, int*);
  if (auto fn = reinterpret_cast<StatsFn>(dlsym(handle, "weftLoopStats"))) fn(&connects, &accepts, &bytes, &version);
  dlclose(handle);
  return bytes;
}

TEST(MismatchOverPlugin, V6CarriesTheSignature) {
  if (std::getenv(kFreshChild) == nullptr) {
    inFreshProgram(240, "MismatchOverPlugin.V6CarriesTheSignature");
    return;
  }
  const std::string plugin = std::string(WEFT_NET_PLUGINS_DIR) + "/libnccl-net-weftloop-v6.so";
  ScopedEnv path("NCCL_NET_PLUGIN", plugin.c_str());
  ScopedEnv net("NCCL_NET", "WeftLoop");
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv buff("NCCL_BUFFSIZE", "131072");
  runRanks(RankMode::kThreads, 3, matchedAndChecked);
  EXPECT_GT(pluginBytesReceived(plugin), 300001 * 4) << "the calls did not cross the plugin";
  for (const MismatchCase& c : mismatchCases()) {
    SCOPED_TRACE(c.name);
    expectCase(RankMode::kThreads, c);
  }
}

}  // namespace
}  // namespace weft::test
