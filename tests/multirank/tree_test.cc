// Trees over virtual nodes (WEFT_RANKS_PER_NODE): allreduce forced onto the
// double binary tree for 1 to 17 nodes of 1 to 4 ranks, sizes across step
// and chunk borders, checked against the reference; every other collective
// runs its ring across the same node shapes. A log check proves the tree ran.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

using Shape = std::tuple<int, int>;  // nodes, ranks per node
class VirtualNodes : public ::testing::TestWithParam<Shape> {};

TEST_P(VirtualNodes, TreeAllReduceAndRingCollectives) {
  const auto [nodes, perNode] = GetParam();
  const std::string per = std::to_string(perNode);
  ScopedEnv ranksPerNode("WEFT_RANKS_PER_NODE", per.c_str());
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");  // 8 KiB steps
  ScopedEnv algo("NCCL_ALGO", "allreduce:tree");
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");  // tree 0 and tree 1
  ScopedEnv minChannels("NCCL_MIN_NCHANNELS", "2");
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{7}, size_t{2047}, size_t{2049}, size_t{8192 * 3 + 5}, size_t{300001}})
    cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
  cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kProd, 5000, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclUint8, TestOp::kMax, 4099, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclFloat16, TestOp::kAvg, 3001, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclInt64, TestOp::kPreMulPtr, 999, 0, false});
  for (CollOp coll : {CollOp::kAllGather, CollOp::kReduceScatter, CollOp::kBroadcast, CollOp::kReduce})
    cases.push_back({coll, ncclInt32, TestOp::kSum, 1234, nodes * perNode - 1, false});
  runCases(RankMode::kThreads, nodes * perNode, cases);
}

std::vector<Shape> shapes() {
  std::vector<Shape> out;
  for (int nodes : {1, 2, 3, 4, 5, 7, 8, 16, 17})
    for (int perNode : {1, 2, 3, 4})
      if (nodes * perNode <= 34) out.emplace_back(nodes, perNode);
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, VirtualNodes, ::testing::ValuesIn(shapes()),
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           return std::to_string(std::get<0>(p.param)) + "nodes_x" +
                                  std::to_string(std::get<1>(p.param));
                         });

// Processes, too: each process is a node of two ranks.
TEST(VirtualNodesProcesses, TreeAllReduceAcrossProcesses) {
  ScopedEnv ranksPerNode("WEFT_RANKS_PER_NODE", "2");
  ScopedEnv algo("NCCL_ALGO", "Tree");
  runRanks(RankMode::kProcesses, 6, [](RankContext& ctx) {
    for (size_t count : {size_t{3}, size_t{100000}, size_t{1} << 20})
      runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, count, 0, false});
  });
}

// The planner's choice is visible in the log, with its reason.
TEST(TreeChoice, LoggedWithItsReason) {
  ScopedEnv ranksPerNode("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv algo("NCCL_ALGO", "allreduce:tree");
  const std::string log = runLogged(4, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 1000, 0, false});
  });
  EXPECT_NE(log.find("AllReduce 4000 bytes: Tree"), std::string::npos) << log;
  EXPECT_NE(log.find("NCCL_ALGO excludes Ring"), std::string::npos) << log;
}

}  // namespace
}  // namespace weft::test
