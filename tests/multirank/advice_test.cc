// Error messages that tell the user what to do: doing it must work. Each
// test provokes the error, checks the advice is in the message, follows it,
// and checks the result. (The shared-memory advice is covered by
// shm_fallback_test.cc, NCCL_DEBUG=WARN by log_test.cc.)
#include <gtest/gtest.h>

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

// A network plugin without a version 8 table: "Unset NCCL_NET_PLUGIN (or set
// it to none) to use the built-in socket network". Two virtual nodes, so the
// ranks need the network; processes, so each loads plugins afresh.
void initOnTwoNodes(const char* plugin, bool expectWorks) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv net("NCCL_NET_PLUGIN", plugin);
  ScopedEnv patience("WEFT_BOOTSTRAP_TIMEOUT", expectWorks ? nullptr : "20");  // a failed peer is not waited for long
  runRanksRaw(RankMode::kProcesses, 2, [expectWorks](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRank(&comm, nranks, id, rank);
    if (!expectWorks) {
      EXPECT_NE(rc, ncclSuccess);
      const std::string why = ncclGetLastError(comm);
      EXPECT_TRUE(contains(why, "Unset NCCL_NET_PLUGIN (or set it to none)")) << why;
      if (comm != nullptr) ncclCommAbort(comm);
      return;
    }
    ASSERT_EQ(rc, ncclSuccess) << ncclGetLastError(nullptr);
    expectAllReduceWorks(comm, nranks);
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
}

TEST(Advice, NetPluginWithoutV8TableThenNone) {
  initOnTwoNodes("libm.so.6", false);  // loads, but holds no plugin table
  initOnTwoNodes("none", true);
  initOnTwoNodes(nullptr, true);
}

}  // namespace
}  // namespace weft::test
