// Butterfly and halving-doubling through the API, forced with NCCL_ALGO:
// every type and reduction, 2 to 9 and 16 ranks (non-powers of two fold in
// and out), in place and out of place, sizes across FIFO steps, chunks and
// blocks, against the scalar reference; every rank ends with the same bits;
// interleaved with ring collectives on shared connections; the names and
// every candidate's estimate in the TUNING log.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

using Setting = std::tuple<RankMode, int>;
class Exchange : public ::testing::TestWithParam<Setting> {};

// Sizes: one element, a few, just past one 8 KiB step (2049 x 4 bytes),
// three chunks of 4 steps and a bit, and many blocks of every participant.
std::vector<size_t> counts() { return {1, 7, 2049, 8192 * 3 + 5, 60001}; }

// Every type and reduction (the kinds of functor: plain, pre-op, post-op).
std::vector<CollCase> reducingCases(CollOp coll) {
  std::vector<CollCase> cases;
  for (size_t count : counts()) cases.push_back({coll, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
  cases.push_back({coll, ncclInt32, TestOp::kProd, 5000, 0, false});
  cases.push_back({coll, ncclUint8, TestOp::kMax, 4099, 0, true});
  cases.push_back({coll, ncclInt8, TestOp::kMin, 300, 0, false});
  cases.push_back({coll, ncclUint32, TestOp::kSum, 1000, 0, true});
  cases.push_back({coll, ncclInt64, TestOp::kMin, 777, 0, false});
  cases.push_back({coll, ncclUint64, TestOp::kMax, 778, 0, true});
  cases.push_back({coll, ncclFloat16, TestOp::kAvg, 3001, 0, false});
  cases.push_back({coll, ncclInt32, TestOp::kAvg, 3001, 0, true});
  cases.push_back({coll, ncclBfloat16, TestOp::kPreMulHost, 999, 0, true});
  cases.push_back({coll, ncclFloat64, TestOp::kPreMulPtr, 999, 0, false});
  cases.push_back({coll, ncclFloat8e4m3, TestOp::kMax, 513, 0, false});
  cases.push_back({coll, ncclFloat8e5m2, TestOp::kSum, 64, 0, true});
  return cases;
}

TEST_P(Exchange, ButterflyAllReduce) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "allreduce:Butterfly");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");  // 8 KiB steps: many steps and chunks per call
  runCases(mode, nranks, reducingCases(CollOp::kAllReduce));
}

TEST_P(Exchange, HalvingDoublingAllReduceAndAllGather) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "allreduce:Rabenseifner;allgather:HalvingDoubling");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  std::vector<CollCase> cases = reducingCases(CollOp::kAllReduce);
  for (size_t count : counts())
    cases.push_back({CollOp::kAllGather, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
  cases.push_back({CollOp::kAllGather, ncclInt8, TestOp::kSum, 333, 0, true});
  cases.push_back({CollOp::kAllGather, ncclFloat64, TestOp::kSum, 4097, 0, false});
  runCases(mode, nranks, cases);
}

// ReduceScatter by recursive halving: partials of other ranks' segments in
// the channel's scratch, folded ranks' segments handed back at the end.
TEST_P(Exchange, HalvingDoublingReduceScatter) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "reducescatter:HalvingDoubling");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  runCases(mode, nranks, reducingCases(CollOp::kReduceScatter));
}

// Across virtual nodes every exchange goes through the network and the
// proxy, which must be told each link's steps (device/step_tally.h).
TEST(ExchangeAcrossNodes, HalvingDoublingReduceScatterThroughTheProxy) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "2");
  ScopedEnv algo("NCCL_ALGO", "reducescatter:HalvingDoubling;allreduce:HalvingDoubling");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  for (int nranks : {3, 6}) {
    std::vector<CollCase> cases;
    for (size_t count : counts())
      cases.push_back({CollOp::kReduceScatter, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
    cases.push_back({CollOp::kReduceScatter, ncclInt32, TestOp::kAvg, 3001, 0, true});
    cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 8192 * 3 + 5, 0, false});
    runCases(RankMode::kThreads, nranks, cases);
  }
}

// Float sums whose value depends on the order of the additions: every rank
// must still end with the same bits.
TEST_P(Exchange, EveryRankGetsTheSameBits) {
  const auto [mode, nranks] = GetParam();
  // The AllGather that compares the results goes around the ring. The
  // environment is set once, before the ranks start: ranks may be threads
  // of this process, and one setting a variable while another reads the
  // environment is a data race (ThreadSanitizer), and could give the ranks
  // different algorithms for the same call.
  for (const char* algoName : {"allreduce:RecDoubling;allgather:Ring", "allreduce:HalvingDoubling;allgather:Ring"}) {
    ScopedEnv algo("NCCL_ALGO", algoName);
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
            << algoName << ": rank " << r << " differs from rank 0";
    });
  }
}

// The exchanges share connections with the ring (a partner may be a ring
// neighbour): alternating them must keep every FIFO in step.
TEST_P(Exchange, MixedWithRingCollectivesOnTheSameChannels) {
  const auto [mode, nranks] = GetParam();
  ScopedEnv algo("NCCL_ALGO", "allreduce:Butterfly;allgather:HalvingDoubling;reducescatter:Ring");
  runRanks(mode, nranks, [&](RankContext& ctx) {
    for (int round = 0; round < 2; ++round) {
      if (!runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 3, 0, false})) return;
      if (!runAndCheck(ctx, {CollOp::kAllGather, ncclInt32, TestOp::kSum, 1000, 0, false})) return;
      if (!runAndCheck(ctx, {CollOp::kReduceScatter, ncclFloat32, TestOp::kSum, 4096, 0, round == 0})) return;
      if (!runAndCheck(ctx, {CollOp::kBroadcast, ncclInt8, TestOp::kSum, 513, 1, true})) return;
    }
  });
}

std::string settingName(const ::testing::TestParamInfo<Setting>& p) {
  return std::string(modeName(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) + "ranks";
}

INSTANTIATE_TEST_SUITE_P(Threads, Exchange,
                         ::testing::Combine(::testing::Values(RankMode::kThreads),
                                            ::testing::Values(2, 3, 4, 5, 6, 7, 8, 9, 16)),
                         settingName);
INSTANTIATE_TEST_SUITE_P(Processes, Exchange,
                         ::testing::Combine(::testing::Values(RankMode::kProcesses), ::testing::Values(3, 8)),
                         settingName);

// NCCL_DEBUG_SUBSYS=TUNING names the choice and every candidate's estimate;
// the forced algorithms are really chosen (not a fallback to the ring) on
// powers of two and not.
TEST(ExchangeChoice, TuningLogNamesEveryCandidate) {
  ScopedEnv filter("NCCL_ALGO", "allreduce:Butterfly;allgather:Rabenseifner");
  const std::string log = runLogged(8, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 16, 0, false});
  });
  EXPECT_NE(log.find("AllReduce 64 bytes: Butterfly (Ring "), std::string::npos) << log;
  EXPECT_NE(log.find("HalvingDoubling "), std::string::npos) << log;
  EXPECT_NE(log.find("OneShot -"), std::string::npos) << log;
  for (int nranks : {2, 3, 5}) {
    ScopedEnv hd("NCCL_ALGO", "allreduce:HalvingDoubling;allgather:HalvingDoubling;reducescatter:Rabenseifner");
    const std::string forced = runLogged(nranks, "TUNING", [](RankContext& ctx) {
      runAndCheck(ctx, {CollOp::kAllReduce, ncclInt32, TestOp::kSum, 4096, 0, false});
      runAndCheck(ctx, {CollOp::kAllGather, ncclInt32, TestOp::kSum, 100, 0, false});
      runAndCheck(ctx, {CollOp::kReduceScatter, ncclInt32, TestOp::kSum, 100, 0, false});
    });
    EXPECT_NE(forced.find("AllReduce 16384 bytes: HalvingDoubling"), std::string::npos) << forced;
    EXPECT_NE(forced.find("AllGather " + std::to_string(400 * nranks) + " bytes: HalvingDoubling"), std::string::npos)
        << forced;
    EXPECT_NE(forced.find("ReduceScatter " + std::to_string(400 * nranks) + " bytes: HalvingDoubling"),
              std::string::npos)
        << forced;
  }
}

// By default 8 ranks take the butterfly for a tiny AllReduce (3 rounds
// against the ring's 14 hand-offs) and the ring for a large one.
TEST(ExchangeChoice, CostModelPicksButterflySmallAndRingLarge) {
  ScopedEnv filter("NCCL_ALGO", nullptr);
  const std::string log = runLogged(8, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 16, 0, false});
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, size_t{1} << 18, 0, false});
  });
  EXPECT_NE(log.find("AllReduce 64 bytes: Butterfly"), std::string::npos) << log;
  EXPECT_NE(log.find("AllReduce 1048576 bytes: Ring"), std::string::npos) << log;
}

}  // namespace
}  // namespace weft::test
