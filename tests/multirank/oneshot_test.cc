// One-shot collectives through the API: AllReduce forced (NCCL_ALGO=allreduce:OneShot)
// on 2 to 4 ranks as threads and as processes, every type of reduction,
// in-place and out-of-place, sizes across FIFO steps and chunks; results
// bit-identical on every rank even where the reduction order matters;
// interleaved with ring collectives on the same channels (the FIFOs are
// shared); chosen by default for small messages, with its reason logged;
// AllGather, ReduceScatter and Broadcast one-shot, forced and by default.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

using Setting = std::tuple<RankMode, int>;  // how the ranks run, how many
class OneShot : public ::testing::TestWithParam<Setting> {};

TEST_P(OneShot, EveryReductionAgainstTheReference) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "allreduce:OneShot");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");  // 8 KiB steps: many steps and chunks per call
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{7}, size_t{2047}, size_t{2049}, size_t{8192 * 3 + 5}, size_t{60001}})
    cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
  cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kProd, 5000, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclUint8, TestOp::kMax, 4099, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclInt64, TestOp::kMin, 777, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclFloat16, TestOp::kAvg, 3001, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kAvg, 3001, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclBfloat16, TestOp::kPreMulHost, 999, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclFloat64, TestOp::kPreMulPtr, 999, 0, false});
  runCases(mode, nranks, cases);
}

// One-shot AllGather and ReduceScatter (forced): every type of reduction for
// ReduceScatter, in place and out of place, sizes across FIFO steps (2049
// int32 is two 8 KiB steps per rank) and past the one-shot bound (ring
// again). At 2 ranks the planner keeps the ring (the same thing there),
// which must pass too.
TEST_P(OneShot, AllGatherAndReduceScatterAgainstTheReference) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "allgather:OneShot;reducescatter:OneShot");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");  // 8 KiB steps: many steps and chunks per call
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{7}, size_t{2049}, size_t{8192 * 3 + 5}}) {
    cases.push_back({CollOp::kAllGather, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
    cases.push_back({CollOp::kReduceScatter, ncclInt32, TestOp::kSum, count, 0, count % 2 == 0});
  }
  cases.push_back({CollOp::kAllGather, ncclInt64, TestOp::kSum, 999, 0, false});
  cases.push_back({CollOp::kReduceScatter, ncclFloat16, TestOp::kAvg, 3001, 0, true});
  cases.push_back({CollOp::kReduceScatter, ncclUint8, TestOp::kMax, 4099, 0, false});
  cases.push_back({CollOp::kReduceScatter, ncclInt64, TestOp::kMin, 777, 0, true});
  cases.push_back({CollOp::kReduceScatter, ncclInt32, TestOp::kProd, 500, 0, false});
  cases.push_back({CollOp::kReduceScatter, ncclBfloat16, TestOp::kPreMulHost, 999, 0, false});
  cases.push_back({CollOp::kReduceScatter, ncclFloat64, TestOp::kPreMulPtr, 999, 0, true});
  runCases(mode, nranks, cases);
}

// One-shot Broadcast stops at 2 KiB: 1 KiB FIFO steps so that it still
// moves several steps and chunks per call.
TEST_P(OneShot, BroadcastFromEveryRoot) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "broadcast:OneShot");
  ScopedEnv buff("NCCL_BUFFSIZE", "8192");
  ScopedEnv chunk("WEFT_CHUNK_STEPS", "1");
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{300}, size_t{2047}, size_t{5000}})
    for (int root = 0; root < nranks; ++root)
      cases.push_back({CollOp::kBroadcast, ncclUint8, TestOp::kSum, count, root, (count + root) % 2 == 0});
  cases.push_back({CollOp::kBroadcast, ncclFloat32, TestOp::kSum, 500, nranks - 1, false});
  runCases(mode, nranks, cases);
}

// Float sums whose value depends on the order of the additions: every rank
// must still end with the same bits (the inputs are combined in rank order
// everywhere), checked by gathering all results.
TEST_P(OneShot, EveryRankGetsTheSameBits) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "allreduce:OneShot");
  runRanks(mode, nranks, [&](RankContext& ctx) {
    const size_t n = 10007;
    std::vector<float> data(n);
    for (size_t i = 0; i < n; ++i)
      data[i] = (ctx.rank % 2 ? 1e-4f : 1e4f) * static_cast<float>((i * 2654435761u + ctx.rank * 97u) % 1000) / 7.0f;
    ASSERT_EQ(ncclAllReduce(data.data(), data.data(), n, ncclFloat32, ncclSum, ctx.comm, nullptr), ncclSuccess);
    std::vector<float> all(n * static_cast<size_t>(ctx.nranks));
    ASSERT_EQ(ncclAllGather(data.data(), all.data(), n, ncclFloat32, ctx.comm, nullptr), ncclSuccess);
    for (int r = 1; r < ctx.nranks; ++r)
      ASSERT_EQ(std::memcmp(all.data(), all.data() + n * static_cast<size_t>(r), n * sizeof(float)), 0)
          << "rank " << r << " differs from rank 0";
  });
}

// Default choice: small AllReduces go one-shot, large ones and every other
// collective stay on the ring, all on the same connections in any order.
TEST_P(OneShot, MixedWithRingCollectivesOnTheSameChannels) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", nullptr);
  runRanks(mode, nranks, [&](RankContext& ctx) {
    for (int round = 0; round < 3; ++round) {
      if (!runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 3, 0, false})) return;
      if (!runAndCheck(ctx, {CollOp::kAllGather, ncclInt32, TestOp::kSum, 1000, 0, false})) return;
      if (!runAndCheck(ctx, {CollOp::kAllReduce, ncclInt32, TestOp::kSum, size_t{1} << 20, 0, round % 2 == 0})) return;
      if (!runAndCheck(ctx, {CollOp::kAllReduce, ncclInt8, TestOp::kMax, 513, 0, true})) return;
      if (!runAndCheck(ctx, {CollOp::kReduceScatter, ncclFloat32, TestOp::kSum, 4096, 0, false})) return;
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, OneShot,
                         ::testing::Combine(::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                                            ::testing::Values(2, 3, 4)),
                         [](const ::testing::TestParamInfo<Setting>& p) {
                           return std::string(modeName(std::get<0>(p.param))) + "_" +
                                  std::to_string(std::get<1>(p.param)) + "ranks";
                         });

TEST(OneShotChoice, SmallAllReduceOnFourRanksIsOneShotByDefault) {
  ScopedEnv filter("NCCL_ALGO", nullptr);
  const std::string log = runLogged(4, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 16, 0, false});
  });
  EXPECT_NE(log.find("AllReduce 64 bytes: OneShot"), std::string::npos) << log;
  EXPECT_NE(log.find("the cheapest estimate"), std::string::npos) << log;
}

TEST(OneShotChoice, SmallAllGatherOnFourRanksIsOneShotAndTwoRanksStayOnTheRing) {
  ScopedEnv filter("NCCL_ALGO", nullptr);
  const std::string four = runLogged(4, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllGather, ncclFloat32, TestOp::kSum, 16, 0, false});
  });
  EXPECT_NE(four.find("AllGather 256 bytes: OneShot"), std::string::npos) << four;
  const std::string two = runLogged(2, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllGather, ncclFloat32, TestOp::kSum, 16, 0, false});
  });
  EXPECT_NE(two.find("AllGather 128 bytes: Ring"), std::string::npos) << two;
}

TEST(OneShotChoice, ForcedOnFiveRanksFallsBackToRingAndSaysWhy) {
  ScopedEnv filter("NCCL_ALGO", "allreduce:OneShot");
  const std::string log = runLogged(5, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 16, 0, false});
  });
  EXPECT_NE(log.find("AllReduce 64 bytes: Ring"), std::string::npos) << log;
  EXPECT_NE(log.find("NCCL_ALGO allows nothing possible here"), std::string::npos) << log;
}

}  // namespace
}  // namespace weft::test
