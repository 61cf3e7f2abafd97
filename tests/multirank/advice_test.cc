// Error messages that tell the user what to do: doing it must work. Each
// test provokes the error, checks the advice is in the message, follows it,
// and checks the result. (The shared-memory advice is covered by
// shm_fallback_test.cc, NCCL_DEBUG=WARN by log_test.cc.)
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "multirank/coll_check.h"
#include "multirank/harness.h"
#include "nccl.h"

namespace weft::test {
namespace {

bool contains(const std::string& text, const char* needle) { return text.find(needle) != std::string::npos; }

void expectAllReduceWorks(ncclComm_t comm, int nranks) {
  std::vector<int> data(64, 1);
  ASSERT_EQ(ncclAllReduce(data.data(), data.data(), data.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess)
      << ncclGetLastError(comm);
  for (int v : data) ASSERT_EQ(v, nranks);
}

// "comm is initialised by the enclosing group: call ncclGroupEnd first".
TEST(Advice, CallGroupEndFirst) {
  runRanksRaw(RankMode::kThreads, 2, [](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    int data = 1;
    EXPECT_EQ(ncclAllReduce(&data, &data, 1, ncclInt32, ncclSum, comm, nullptr), ncclInvalidUsage);
    const std::string why = ncclGetLastError(comm);
    EXPECT_TRUE(contains(why, "call ncclGroupEnd first")) << why;
    // The advice. As in NCCL, the group end reports the error of a call made
    // in the group; the communicator it initialised is ready afterwards.
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    ncclResult_t async = ncclInProgress;
    EXPECT_EQ(ncclCommGetAsyncError(comm, &async), ncclSuccess);
    EXPECT_EQ(async, ncclSuccess);
    expectAllReduceWorks(comm, nranks);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

// A network plugin that cannot be used, named by NCCL_NET: "unset NCCL_NET
// to fall back to the built-in Socket network". Two virtual nodes, so the
// ranks need the network; processes, so each loads plugins afresh.
void initOnTwoNodes(const char* plugin, const char* netName, bool expectWorks) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv net("NCCL_NET_PLUGIN", plugin);
  ScopedEnv name("NCCL_NET", netName);
  ScopedEnv patience("WEFT_BOOTSTRAP_TIMEOUT", expectWorks ? nullptr : "20");  // a failed peer is not waited for long
  runRanksRaw(RankMode::kProcesses, 2, [expectWorks](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRank(&comm, nranks, id, rank);
    if (!expectWorks) {
      EXPECT_EQ(rc, ncclSystemError);
      const std::string why = ncclGetLastError(comm);
      EXPECT_TRUE(contains(why, "libm.so.6 exports no ncclNetPlugin_v6..v12 table")) << why;
      EXPECT_TRUE(contains(why, "unset NCCL_NET to fall back to the built-in Socket network")) << why;
      if (comm != nullptr) ncclCommAbort(comm);
      return;
    }
    ASSERT_EQ(rc, ncclSuccess) << ncclGetLastError(nullptr);
    expectAllReduceWorks(comm, nranks);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

TEST(Advice, UnusableNetPluginNamedByNcclNetThenUnset) {
  initOnTwoNodes("libm.so.6", "MyPluginNet", false);  // loads, but holds no plugin table
  initOnTwoNodes("libm.so.6", nullptr, true);         // the advice: a warning, and sockets
  initOnTwoNodes("none", nullptr, true);
  initOnTwoNodes(nullptr, nullptr, true);
}

// A tuning file that does not parse fails init on every rank with
// ncclInvalidArgument naming the file, the line and what was expected;
// fixing the line makes the communicator work.
TEST(Advice, TuningFileLineNamed) {
  char path[] = "/tmp/weft-tuning-advice-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto writeFile = [&](const char* text) {
    FILE* f = std::fopen(path, "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text, f);
    std::fclose(f);
  };
  ScopedEnv file("WEFT_TUNING_FILE", path);
  writeFile("version 1\n# comment\ncopy.gbs fast\n");
  runRanksRaw(RankMode::kThreads, 2, [&](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    EXPECT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclInvalidArgument);
    const std::string why = ncclGetLastError(comm);
    EXPECT_TRUE(contains(why, (std::string("WEFT_TUNING_FILE=") + path +
                               ": line 3: copy.gbs \"fast\": expected a "
                               "positive number")
                                  .c_str()))
        << why;
    if (comm != nullptr) ncclCommAbort(comm);
  });
  writeFile("version 1\n# comment\ncopy.gbs 6.5\n");
  runRanks(RankMode::kThreads, 2, [](RankContext& ctx) { expectAllReduceWorks(ctx.comm, ctx.nranks); });
  unlink(path);
}

}  // namespace
}  // namespace weft::test
