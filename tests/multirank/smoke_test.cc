// The shortest path through the library: init, one allreduce, destroy.
#include <gtest/gtest.h>

#include <vector>

#include "multirank/harness.h"

namespace weft::test {
namespace {

class Smoke : public ::testing::TestWithParam<RankMode> {};

TEST_P(Smoke, AllReduceSumOfRanks) {
  runRanks(GetParam(), 3, [](RankContext& ctx) {
    std::vector<int> send(1000, ctx.rank + 1), recv(1000, 0);
    ASSERT_EQ(ncclAllReduce(send.data(), recv.data(), send.size(), ncclInt32, ncclSum, ctx.comm, nullptr), ncclSuccess)
        << ncclGetLastError(ctx.comm);
    for (int v : recv) ASSERT_EQ(v, 6);
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, Smoke, ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const ::testing::TestParamInfo<RankMode>& p) { return std::string(modeName(p.param)); });

}  // namespace
}  // namespace weft::test
