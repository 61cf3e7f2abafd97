// Hierarchical ring AllReduce through the API on virtual nodes
// (WEFT_RANKS_PER_NODE: ranks of different nodes talk only through the
// network transport and the proxy): every type and reduction, nodes of 2 to
// 4 ranks, 2 to 4 nodes, in place and out of place, sizes across FIFO steps,
// chunks and uneven segments, against the scalar reference; the forced name
// really chosen, and the cost model's pick across nodes.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

using Setting = std::tuple<RankMode, int, int>;  // mode, ranks, ranks per node
class HierRing : public ::testing::TestWithParam<Setting> {};

TEST_P(HierRing, EveryReductionAgainstTheReference) {
  const auto [mode, nranks, perNode] = GetParam();
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", std::to_string(perNode).c_str());
  ScopedEnv algo("NCCL_ALGO", "allreduce:HierRing");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");  // 8 KiB steps: many steps and chunks per call
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{7}, size_t{2049}, size_t{8192 * 3 + 5}, size_t{60001}})
    cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
  cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kProd, 5000, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclUint8, TestOp::kMax, 4099, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclInt64, TestOp::kMin, 777, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclUint64, TestOp::kSum, 778, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclFloat16, TestOp::kAvg, 3001, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kAvg, 3001, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclBfloat16, TestOp::kPreMulHost, 999, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclFloat64, TestOp::kPreMulPtr, 999, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclFloat8e4m3, TestOp::kMax, 513, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclInt8, TestOp::kSum, 64, 0, true});
  // Other collectives on the same channels, then the hierarchy again.
  cases.push_back({CollOp::kReduceScatter, ncclFloat32, TestOp::kSum, 1000, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 4096, 0, false});
  runCases(mode, nranks, cases);
}

std::string settingName(const ::testing::TestParamInfo<Setting>& p) {
  return std::string(modeName(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) + "ranks_" +
         std::to_string(std::get<2>(p.param)) + "pernode";
}

INSTANTIATE_TEST_SUITE_P(Threads, HierRing,
                         ::testing::Values(Setting{RankMode::kThreads, 4, 2}, Setting{RankMode::kThreads, 6, 3},
                                           Setting{RankMode::kThreads, 6, 2}, Setting{RankMode::kThreads, 8, 4},
                                           Setting{RankMode::kThreads, 9, 3}, Setting{RankMode::kThreads, 16, 4}),
                         settingName);
INSTANTIATE_TEST_SUITE_P(Processes, HierRing, ::testing::Values(Setting{RankMode::kProcesses, 8, 2}), settingName);

TEST(HierRingChoice, ForcedNameIsChosenAndTheModelPicksItAcrossNodes) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "2");
  {
    ScopedEnv filter("NCCL_ALGO", "allreduce:HierarchicalRing");
    const std::string log = runLogged(4, "TUNING", [](RankContext& ctx) {
      runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 1024, 0, false});
    });
    EXPECT_NE(log.find("AllReduce 4096 bytes: HierarchicalRing"), std::string::npos) << log;
  }
  // Against the ring, by the model: at 4 MiB its column rings put 1.5 S
  // through each node's network against the ring's 1.75 S. (The model
  // shares a node's network among its flows, which puts halving-doubling
  // within 1 % of it and both within 5 % of the ring at 1 MiB, where the
  // ring is kept; so the choice is between Ring and HierRing here.)
  ScopedEnv filter("NCCL_ALGO", "allreduce:Ring,HierRing");
  const std::string log = runLogged(8, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 1 << 20, 0, false});
  });
  EXPECT_NE(log.find("AllReduce 4194304 bytes: HierarchicalRing"), std::string::npos) << log;
}

// One node, or nodes of one rank: nothing to be hierarchical about.
TEST(HierRingChoice, NotOfferedWithoutAHierarchy) {
  ScopedEnv filter("NCCL_ALGO", "allreduce:HierRing");
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  const std::string log = runLogged(3, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 16, 0, false});
  });
  EXPECT_NE(log.find("AllReduce 64 bytes: Ring"), std::string::npos) << log;
  EXPECT_NE(log.find("HierarchicalRing -"), std::string::npos) << log;
}

}  // namespace
}  // namespace weft::test
