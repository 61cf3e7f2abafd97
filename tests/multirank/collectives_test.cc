// Every collective against a scalar reference (coll_check.h): every type and
// op at one awkward size; then sizes around step, chunk and channel borders
// for 1 to 8 ranks with one and several channels; then 16 ranks. Ranks run
// as threads and as forked processes.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

const CollOp kAllColls[] = {CollOp::kAllReduce,     CollOp::kBroadcast, CollOp::kReduce, CollOp::kAllGather,
                            CollOp::kReduceScatter, CollOp::kAlltoAll,  CollOp::kGather, CollOp::kScatter};
const TestOp kAllOps[] = {TestOp::kSum, TestOp::kProd,       TestOp::kMax,      TestOp::kMin,
                          TestOp::kAvg, TestOp::kPreMulHost, TestOp::kPreMulPtr};

// ---- Every type x op x collective x placement, 3 ranks, an odd count.

using TypeParam = std::tuple<RankMode, ncclDataType_t>;
class TypesAndOps : public ::testing::TestWithParam<TypeParam> {};

TEST_P(TypesAndOps, EveryCollectiveOpAndPlacement) {
  const auto [mode, type] = GetParam();
  std::vector<CollCase> cases;
  for (CollOp coll : kAllColls)
    for (TestOp op : kAllOps) {
      if (!isReducing(coll) && op != TestOp::kSum) continue;
      for (int inPlace = 0; inPlace < (hasInPlace(coll) ? 2 : 1); ++inPlace)
        for (int root : {0, 2}) cases.push_back({coll, type, op, 1001, root, inPlace == 1});
    }
  runCases(mode, 3, cases);
}

// One rank: every collective whose result is its input is a copy (planner
// self copies), a pre-multiplication a kernel; the same shape called again
// in the other placement must not reuse the first call's plan.
TEST(OneRank, EveryCollectiveOpAndPlacementTwice) {
  std::vector<CollCase> cases;
  for (int round = 0; round < 2; ++round)
    for (CollOp coll : kAllColls)
      for (TestOp op : kAllOps) {
        if (!isReducing(coll) && op != TestOp::kSum) continue;
        for (int inPlace = 0; inPlace < (hasInPlace(coll) ? 2 : 1); ++inPlace)
          cases.push_back({coll, ncclFloat32, op, 1001, 0, inPlace == 1});
      }
  runCases(RankMode::kThreads, 1, cases);
}

const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

std::string typeParamName(const ::testing::TestParamInfo<TypeParam>& p) {
  return std::string(modeName(std::get<0>(p.param))) + "_" + typeName(std::get<1>(p.param));
}

INSTANTIATE_TEST_SUITE_P(Threads, TypesAndOps,
                         ::testing::Combine(::testing::Values(RankMode::kThreads), ::testing::ValuesIn(kAllTypes)),
                         typeParamName);
INSTANTIATE_TEST_SUITE_P(Processes, TypesAndOps,
                         ::testing::Combine(::testing::Values(RankMode::kProcesses),
                                            ::testing::Values(ncclInt8, ncclUint64, ncclFloat32, ncclBfloat16,
                                                              ncclFloat8e5m2)),
                         typeParamName);

// ---- Sizes around borders, 1..8 ranks, one and four channels.
// NCCL_BUFFSIZE=65536 makes a step 8 KiB, so the borders are cheap to reach.

constexpr size_t kStepBytes = 65536 / 8;

std::vector<size_t> borderCounts(size_t elemSize, int nranks, int channels) {
  const size_t step = kStepBytes / elemSize;
  const size_t n = static_cast<size_t>(nranks);
  const size_t chunk = 4 * step;  // WEFT_CHUNK_STEPS default
  return {0,
          1,
          7,
          step - 1,
          step,
          step + 1,
          step * n - 1,
          step * n + 1,
          chunk * n * static_cast<size_t>(channels) + 3,
          (size_t{3} << 20) / elemSize + 5};
}

using SizeParam = std::tuple<RankMode, int, int>;  // mode, ranks, channels
class Borders : public ::testing::TestWithParam<SizeParam> {};

TEST_P(Borders, EveryCollectiveAcrossStepChunkAndChannelBorders) {
  const auto [mode, nranks, channels] = GetParam();
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  const std::string ch = std::to_string(channels);
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", ch.c_str());
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", ch.c_str());
  std::vector<CollCase> cases;
  for (CollOp coll : kAllColls) {
    // Reducing collectives in float (exact sums), data-only ones in int8 so
    // that odd byte counts and unaligned tails are covered.
    const ncclDataType_t type = isReducing(coll) ? ncclFloat32 : ncclInt8;
    for (size_t count : borderCounts(type == ncclInt8 ? 1 : 4, nranks, channels)) {
      // AlltoAll, Gather and Scatter move count per peer: keep them smaller.
      const size_t c = coll >= CollOp::kAlltoAll ? count / static_cast<size_t>(nranks) + (count & 1) : count;
      for (int inPlace = 0; inPlace < (hasInPlace(coll) ? 2 : 1); ++inPlace)
        cases.push_back({coll, type, TestOp::kSum, c, nranks - 1, inPlace == 1});
    }
  }
  runCases(mode, nranks, cases);
}

std::string sizeParamName(const ::testing::TestParamInfo<SizeParam>& p) {
  return std::string(modeName(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) + "ranks_" +
         std::to_string(std::get<2>(p.param)) + "ch";
}

INSTANTIATE_TEST_SUITE_P(Threads, Borders,
                         ::testing::Combine(::testing::Values(RankMode::kThreads), ::testing::Range(1, 9),
                                            ::testing::Values(1, 4)),
                         sizeParamName);
INSTANTIATE_TEST_SUITE_P(Processes, Borders,
                         ::testing::Combine(::testing::Values(RankMode::kProcesses), ::testing::Values(2, 3, 5, 8),
                                            ::testing::Values(1, 4)),
                         sizeParamName);

// ---- The default buffer size (1 MiB, 128 KiB steps) around its step.

class DefaultBuffers : public ::testing::TestWithParam<RankMode> {};

TEST_P(DefaultBuffers, AllReduceAndAllGatherAroundOneStep) {
  std::vector<CollCase> cases;
  for (size_t count : {size_t{32767}, size_t{32768}, size_t{32769}, size_t{1} << 20})
    for (CollOp coll : {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kReduceScatter})
      cases.push_back({coll, ncclFloat32, TestOp::kSum, count, 0, false});
  runCases(GetParam(), 3, cases);
}

INSTANTIATE_TEST_SUITE_P(Modes, DefaultBuffers, ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const ::testing::TestParamInfo<RankMode>& p) { return std::string(modeName(p.param)); });

// ---- Sixteen ranks on two cores.

class Sixteen : public ::testing::TestWithParam<RankMode> {};

TEST_P(Sixteen, RingCollectivesAndAlltoAll) {
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{4099}, size_t{300000}})
    for (CollOp coll : kAllColls) {
      const size_t c = coll >= CollOp::kAlltoAll ? count / 16 + 1 : count;
      cases.push_back({coll, ncclInt32, TestOp::kSum, c, 5, false});
    }
  cases.push_back({CollOp::kAllReduce, ncclFloat16, TestOp::kAvg, 999, 0, true});
  runCases(GetParam(), 16, cases);
}

INSTANTIATE_TEST_SUITE_P(Modes, Sixteen, ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const ::testing::TestParamInfo<RankMode>& p) { return std::string(modeName(p.param)); });

}  // namespace
}  // namespace weft::test
