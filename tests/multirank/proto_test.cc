// Every collective under each protocol (NCCL_PROTO=LL, LL128 and Simple)
// against the scalar reference of coll_check.h, so the protocols give the
// same results: every type and op at one size; sizes around LL's pack, step
// and chunk borders and LL128's line, step and chunk borders for 2 to 8
// ranks; one-shot and tree under LL, tree under LL128; ranks as threads
// (p2p FIFOs) and as processes (shm FIFOs).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"
#include "multirank/harness.h"
#include "weft.h"

namespace weft::test {
namespace {

const CollOp kAllColls[] = {CollOp::kAllReduce,     CollOp::kBroadcast, CollOp::kReduce, CollOp::kAllGather,
                            CollOp::kReduceScatter, CollOp::kAlltoAll,  CollOp::kGather, CollOp::kScatter};
const TestOp kAllOps[] = {TestOp::kSum, TestOp::kProd,       TestOp::kMax,      TestOp::kMin,
                          TestOp::kAvg, TestOp::kPreMulHost, TestOp::kPreMulPtr};
const ncclDataType_t kAllTypes[] = {ncclInt8,    ncclUint8,    ncclInt32,      ncclUint32,
                                    ncclInt64,   ncclUint64,   ncclFloat16,    ncclFloat32,
                                    ncclFloat64, ncclBfloat16, ncclFloat8e4m3, ncclFloat8e5m2};

// ---- Every type x op x collective x placement, 3 ranks, under one protocol.

using TypeParam = std::tuple<RankMode, const char*, ncclDataType_t>;
class ProtoTypesAndOps : public ::testing::TestWithParam<TypeParam> {};

TEST_P(ProtoTypesAndOps, EveryCollectiveOpAndPlacement) {
  const auto [mode, proto, type] = GetParam();
  ScopedEnv env("NCCL_PROTO", proto);
  std::vector<CollCase> cases;
  for (CollOp coll : kAllColls)
    for (TestOp op : kAllOps) {
      if (!isReducing(coll) && op != TestOp::kSum) continue;
      for (int inPlace = 0; inPlace < (hasInPlace(coll) ? 2 : 1); ++inPlace)
        cases.push_back({coll, type, op, 1001, 2, inPlace == 1});
    }
  runCases(mode, 3, cases);
}

std::string typeParamName(const ::testing::TestParamInfo<TypeParam>& p) {
  return std::string(modeName(std::get<0>(p.param))) + "_" + std::get<1>(p.param) + "_" +
         typeName(std::get<2>(p.param));
}

INSTANTIATE_TEST_SUITE_P(Threads, ProtoTypesAndOps,
                         ::testing::Combine(::testing::Values(RankMode::kThreads),
                                            ::testing::Values("LL", "LL128", "Simple"), ::testing::ValuesIn(kAllTypes)),
                         typeParamName);
INSTANTIATE_TEST_SUITE_P(Processes, ProtoTypesAndOps,
                         ::testing::Combine(::testing::Values(RankMode::kProcesses), ::testing::Values("LL", "LL128"),
                                            ::testing::Values(ncclInt8, ncclFloat64, ncclBfloat16)),
                         typeParamName);

// ---- LL across its borders. NCCL_BUFFSIZE=65536: 8 KiB slots, so LL steps
// of 8 KiB of lines carrying 4 KiB, and ring chunks of 4 LL steps.

constexpr size_t kLLStepPayload = 4096;

std::vector<size_t> llBorderCounts(size_t elemSize, int nranks, int channels) {
  const size_t step = kLLStepPayload / elemSize;
  const size_t pack = 8 / elemSize;
  const size_t n = static_cast<size_t>(nranks);
  const size_t chunk = 4 * step;
  return {1,
          pack - (pack > 1 ? 1 : 0),
          pack + 1,
          step - 1,
          step + 1,
          step * n + 1,
          chunk * n * static_cast<size_t>(channels) + 3,
          (size_t{160} << 10) / elemSize + 5};
}

using SizeParam = std::tuple<RankMode, int, int>;  // mode, ranks, channels
class LLBorders : public ::testing::TestWithParam<SizeParam> {};

// Every collective but send/recv (Simple whatever NCCL_PROTO says) under
// `proto` at each of `counts(elemSize, nranks, channels)`, in and out of
// place: float32 sums (Reduce in `reduceType`), bytes for the others.
template <typename Counts>
void runBorders(const SizeParam& param, const char* protocol, ncclDataType_t reduceType, Counts counts) {
  const auto [mode, nranks, channels] = param;
  ScopedEnv proto("NCCL_PROTO", protocol);
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  const std::string ch = std::to_string(channels);
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", ch.c_str());
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", ch.c_str());
  std::vector<CollCase> cases;
  for (CollOp coll : kAllColls) {
    if (coll >= CollOp::kAlltoAll) continue;
    const ncclDataType_t type = !isReducing(coll) ? ncclInt8 : coll == CollOp::kReduce ? reduceType : ncclFloat32;
    const size_t elem = type == ncclInt8 ? 1 : type == ncclFloat64 ? 8 : 4;
    for (size_t count : counts(elem, nranks, channels))
      for (int inPlace = 0; inPlace < (hasInPlace(coll) ? 2 : 1); ++inPlace)
        cases.push_back({coll, type, TestOp::kSum, count, nranks - 1, inPlace == 1});
  }
  runCases(mode, nranks, cases);
}

TEST_P(LLBorders, EveryCollectiveAcrossPackStepAndChunkBorders) {
  runBorders(GetParam(), "LL", ncclFloat32, llBorderCounts);
}

std::string sizeParamName(const ::testing::TestParamInfo<SizeParam>& p) {
  return std::string(modeName(std::get<0>(p.param))) + "_" + std::to_string(std::get<1>(p.param)) + "ranks_" +
         std::to_string(std::get<2>(p.param)) + "ch";
}

INSTANTIATE_TEST_SUITE_P(Threads, LLBorders,
                         ::testing::Combine(::testing::Values(RankMode::kThreads), ::testing::Range(2, 9),
                                            ::testing::Values(1)),
                         sizeParamName);
INSTANTIATE_TEST_SUITE_P(ThreadsChannels, LLBorders,
                         ::testing::Combine(::testing::Values(RankMode::kThreads), ::testing::Values(2, 5),
                                            ::testing::Values(4)),
                         sizeParamName);
INSTANTIATE_TEST_SUITE_P(Processes, LLBorders,
                         ::testing::Combine(::testing::Values(RankMode::kProcesses), ::testing::Values(2, 3, 8),
                                            ::testing::Values(1)),
                         sizeParamName);

// ---- LL128 across its borders. NCCL_BUFFSIZE=65536: 8 KiB slots, so LL128
// steps of 64 lines carrying 7680 bytes, lines of 120 payload bytes, and
// ring chunks of 4 steps rounded down to 64 bytes.

constexpr size_t kLL128StepPayload = 64 * 120;

std::vector<size_t> ll128BorderCounts(size_t elemSize, int nranks, int channels) {
  const size_t line = 120 / elemSize;
  const size_t step = kLL128StepPayload / elemSize;
  const size_t n = static_cast<size_t>(nranks);
  const size_t chunk = 4 * step;
  return {1,
          line - 1,
          line,
          line + 1,
          8 / elemSize + 1,
          step - 1,
          step + 1,
          step * n + 1,
          chunk * n * static_cast<size_t>(channels) + 3,
          (size_t{200} << 10) / elemSize + 5};
}

class LL128Borders : public ::testing::TestWithParam<SizeParam> {};

TEST_P(LL128Borders, EveryCollectiveAcrossLineStepAndChunkBorders) {
  runBorders(GetParam(), "LL128", ncclFloat64, ll128BorderCounts);
}

INSTANTIATE_TEST_SUITE_P(Threads, LL128Borders,
                         ::testing::Values(SizeParam{RankMode::kThreads, 2, 1}, SizeParam{RankMode::kThreads, 3, 1},
                                           SizeParam{RankMode::kThreads, 5, 4}, SizeParam{RankMode::kThreads, 8, 1}),
                         sizeParamName);
INSTANTIATE_TEST_SUITE_P(Processes, LL128Borders,
                         ::testing::Values(SizeParam{RankMode::kProcesses, 2, 1},
                                           SizeParam{RankMode::kProcesses, 4, 2}),
                         sizeParamName);

// ---- One-shot and tree AllReduce (and one-shot AllGather, ReduceScatter,
// Broadcast) under LL; tree AllReduce (and ring for the others) under LL128.

using AlgoParam = std::tuple<const char*, int, const char*>;  // NCCL_ALGO, ranks, NCCL_PROTO
class LLAlgorithms : public ::testing::TestWithParam<AlgoParam> {};

TEST_P(LLAlgorithms, MatchTheReference) {
  const auto [algo, nranks, protocol] = GetParam();
  ScopedEnv proto("NCCL_PROTO", protocol);
  ScopedEnv algoEnv("NCCL_ALGO", algo);
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{1023}, size_t{1025}, size_t{9000}})
    for (CollOp coll : {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kReduceScatter, CollOp::kBroadcast})
      for (int inPlace = 0; inPlace < 2; ++inPlace)
        cases.push_back(
            {coll, ncclFloat32, coll == CollOp::kAllReduce ? TestOp::kAvg : TestOp::kSum, count, 1, inPlace == 1});
  runCases(RankMode::kThreads, nranks, cases);
}

INSTANTIATE_TEST_SUITE_P(All, LLAlgorithms,
                         ::testing::Values(AlgoParam{"OneShot", 2, "LL"}, AlgoParam{"OneShot", 4, "LL"},
                                           AlgoParam{"Tree", 3, "LL"}, AlgoParam{"Tree", 6, "LL"},
                                           AlgoParam{"Tree", 3, "LL128"}, AlgoParam{"Tree", 6, "LL128"}),
                         [](const ::testing::TestParamInfo<AlgoParam>& p) {
                           return std::string(std::get<0>(p.param)) + "_" + std::to_string(std::get<1>(p.param)) + "_" +
                                  std::get<2>(p.param);
                         });

// ---- Direct mode: ranks as threads write into each other's user buffers
// (ring AllReduce, AllGather, Broadcast from 256 KiB), in and out of place,
// with one and two channels, several calls in a row on the same buffers
// (each call's handshake must find the peer's buffer of that call), and
// next to calls that do not run direct (ReduceScatter, small sizes), whose
// FIFO steps interleave with the direct ones on the same links.

using DirectParam = std::tuple<int, int>;  // ranks, channels
class Direct : public ::testing::TestWithParam<DirectParam> {};

TEST_P(Direct, LargeRingCallsMatchTheReference) {
  const auto [nranks, channels] = GetParam();
  const std::string ch = std::to_string(channels);
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", ch.c_str());
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", ch.c_str());
  ScopedEnv algo("NCCL_ALGO", "Ring");
  std::vector<CollCase> cases;
  for (size_t count : {size_t{70001}, size_t{300007}})
    for (int inPlace = 0; inPlace < 2; ++inPlace) {
      cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, count, 0, inPlace == 1});
      cases.push_back({CollOp::kAllGather, ncclInt8, TestOp::kSum, count, 0, inPlace == 1});
      cases.push_back({CollOp::kBroadcast, ncclInt8, TestOp::kSum, count * 3, nranks - 1, inPlace == 1});
      cases.push_back({CollOp::kReduceScatter, ncclFloat32, TestOp::kSum, count / 4, 0, inPlace == 1});
      cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kMax, 100, 0, inPlace == 1});
      cases.push_back({CollOp::kAllReduce, ncclFloat64, TestOp::kAvg, count / 2 + 1, 0, inPlace == 1});
    }
  runCases(RankMode::kThreads, nranks, cases);
}

INSTANTIATE_TEST_SUITE_P(Threads, Direct,
                         ::testing::Values(DirectParam{2, 1}, DirectParam{3, 2}, DirectParam{5, 1}, DirectParam{8, 1}),
                         [](const ::testing::TestParamInfo<DirectParam>& p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  std::to_string(std::get<1>(p.param)) + "ch";
                         });

// ---- Direct reads: in direct ring AllReduce and ReduceScatter calls between
// threads, the next rank reads each first step's data from this rank's
// input in place (WEFT_DIRECT_READ, on by default; prims_simple.h
// directReadSend). Results match the reference in and out of place, call
// after call on the same buffers; calls that may not read (a pre-op: float
// averages and PreMulSum; AllGather) read nothing, beside them on the same
// links; the FIFO ends' count (weftCommDescribe) shows the reads happened,
// and none with WEFT_DIRECT_READ=0.

unsigned long long directReads(ncclComm_t comm) {
  char text[16384];
  EXPECT_EQ(weftCommDescribe(comm, text, sizeof(text)), ncclSuccess);
  const char* at = std::strstr(text, "direct reads: ");
  EXPECT_NE(at, nullptr) << text;
  unsigned long long n = 0;
  if (at != nullptr) {
    EXPECT_EQ(std::sscanf(at, "direct reads: %llu", &n), 1) << at;
  }
  return n;
}

using ReadParam = std::tuple<int, int, bool>;  // ranks, channels, reads allowed
class DirectRead : public ::testing::TestWithParam<ReadParam> {};

TEST_P(DirectRead, FirstStepsAreReadInPlaceAndMatchTheReference) {
  const auto [nranks, channels, allowed] = GetParam();
  const std::string ch = std::to_string(channels);
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", ch.c_str());
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", ch.c_str());
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv read("WEFT_DIRECT_READ", allowed ? "1" : "0");
  std::vector<CollCase> copying, reading;
  for (int inPlace = 0; inPlace < 2; ++inPlace) {
    copying.push_back({CollOp::kAllReduce, ncclFloat64, TestOp::kAvg, 150001, 0, inPlace == 1});
    copying.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kPreMulHost, 300007, 0, inPlace == 1});
    copying.push_back({CollOp::kAllGather, ncclInt8, TestOp::kSum, 300007, 0, inPlace == 1});
    copying.push_back({CollOp::kReduceScatter, ncclFloat32, TestOp::kPreMulHost, 100003, 0, inPlace == 1});
    for (int repeat = 0; repeat < 2; ++repeat) {
      reading.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 300007, 0, inPlace == 1});
      reading.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kMax, 70001, 0, inPlace == 1});
      reading.push_back({CollOp::kAllReduce, ncclInt64, TestOp::kAvg, 100003, 0, inPlace == 1});
      reading.push_back({CollOp::kAllReduce, ncclBfloat16, TestOp::kProd, 250001, 0, inPlace == 1});
      reading.push_back({CollOp::kReduceScatter, ncclFloat32, TestOp::kSum, 100003, 0, inPlace == 1});
      reading.push_back({CollOp::kReduceScatter, ncclInt64, TestOp::kMin, 40001, 0, inPlace == 1});
    }
  }
  runRanks(RankMode::kThreads, nranks, [&](RankContext& ctx) {
    const unsigned long long start = directReads(ctx.comm);
    for (const CollCase& c : copying) runAndCheck(ctx, c);  // every rank makes every call
    const unsigned long long afterCopying = directReads(ctx.comm);
    EXPECT_EQ(afterCopying, start) << "rank " << ctx.rank << ": calls with a pre-op or no reduction read in place";
    for (const CollCase& c : reading) runAndCheck(ctx, c);
    const unsigned long long reads = directReads(ctx.comm) - afterCopying;
    if (allowed) {
      EXPECT_GT(reads, 0u) << "rank " << ctx.rank << ": no step was read in place";
    } else {
      EXPECT_EQ(reads, 0u) << "rank " << ctx.rank << ": steps read in place with WEFT_DIRECT_READ=0";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Threads, DirectRead,
                         ::testing::Values(ReadParam{2, 1, true}, ReadParam{2, 2, true}, ReadParam{3, 1, true},
                                           ReadParam{4, 2, true}, ReadParam{2, 1, false}),
                         [](const ::testing::TestParamInfo<ReadParam>& p) {
                           return std::to_string(std::get<0>(p.param)) + "ranks_" +
                                  std::to_string(std::get<1>(p.param)) + "ch_" +
                                  (std::get<2>(p.param) ? "reads" : "copies");
                         });

}  // namespace
}  // namespace weft::test
