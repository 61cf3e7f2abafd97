// The API's contract around the data path: bad arguments are rejected with a
// message naming the argument, its value and what was expected, and the
// communicator stays usable; split; config handshake; versions; entry points
// not implemented yet fail honestly.
#include <gtest/gtest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "multirank/coll_check.h"
#include "weft.h"

// A 2.28 entry point our 2.27 header does not declare; the library exports
// it for callers built against newer headers.
extern "C" ncclResult_t ncclCommRevoke(ncclComm_t comm, int revokeFlags);
// NCCL 2.28's device API, declared with opaque arguments (its types are not in a 2.27 header).
extern "C" ncclResult_t ncclDevCommCreate(ncclComm_t comm, const void* requirements, void* outDevComm);
extern "C" ncclResult_t ncclDevCommDestroy(ncclComm_t comm, const void* devComm);

namespace weft::test {
namespace {

// The last error mentions every fragment.
void expectMessage(ncclComm_t comm, std::initializer_list<const char*> fragments) {
  const std::string msg = ncclGetLastError(comm);
  for (const char* f : fragments) EXPECT_NE(msg.find(f), std::string::npos) << "\"" << f << "\" not in: " << msg;
}

void expectUsable(const RankContext& ctx) {
  std::vector<int> in(100, ctx.rank + 1), out(100, 0);
  ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, ncclSum, ctx.comm, nullptr), ncclSuccess)
      << ncclGetLastError(ctx.comm);
  EXPECT_EQ(out[99], ctx.nranks * (ctx.nranks + 1) / 2);
}

TEST(BadArguments, AreRejectedNamedAndLeaveTheCommunicatorUsable) {
  runRanks(RankMode::kThreads, 2, [](RankContext& ctx) {
    std::vector<float> buf(64, 1.0f);
    ncclComm_t c = ctx.comm;
    EXPECT_EQ(ncclAllReduce(nullptr, buf.data(), 64, ncclFloat32, ncclSum, c, nullptr), ncclInvalidArgument);
    expectMessage(c, {"sendbuff", "NULL"});
    EXPECT_EQ(ncclAllReduce(buf.data(), nullptr, 64, ncclFloat32, ncclSum, c, nullptr), ncclInvalidArgument);
    expectMessage(c, {"recvbuff", "NULL"});
    EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 64, static_cast<ncclDataType_t>(99), ncclSum, c, nullptr),
              ncclInvalidArgument);
    expectMessage(c, {"datatype", "99"});
    EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 64, ncclFloat32, static_cast<ncclRedOp_t>(77), c, nullptr),
              ncclInvalidArgument);
    expectMessage(c, {"op", "77"});
    EXPECT_EQ(ncclBroadcast(buf.data(), buf.data(), 64, ncclFloat32, 2, c, nullptr), ncclInvalidArgument);
    expectMessage(c, {"root", "2"});
    EXPECT_EQ(ncclReduce(buf.data(), buf.data(), 64, ncclFloat32, ncclSum, -1, c, nullptr), ncclInvalidArgument);
    expectMessage(c, {"root", "-1"});
    EXPECT_EQ(ncclSend(buf.data(), 64, ncclFloat32, 5, c, nullptr), ncclInvalidArgument);
    expectMessage(c, {"peer", "5"});
    EXPECT_EQ(ncclAllGather(buf.data(), buf.data(), SIZE_MAX / 2, ncclFloat32, c, nullptr), ncclInvalidArgument);
    expectMessage(c, {"count"});
    // count x 4 fits in size_t; count x 4 x nranks does not.
    EXPECT_EQ(ncclAllGather(buf.data(), buf.data(), SIZE_MAX / 4 - 1, ncclFloat32, c, nullptr), ncclInvalidArgument);
    expectMessage(c, {"count", "overflows"});
    // Every rejected call queued nothing: a real collective still matches up.
    expectUsable(ctx);
  });
}

TEST(BadArguments, NullAndDestroyedCommunicators) {
  std::vector<float> buf(8, 0);
  EXPECT_EQ(ncclAllReduce(buf.data(), buf.data(), 8, ncclFloat32, ncclSum, nullptr, nullptr), ncclInvalidArgument);
  expectMessage(nullptr, {"comm", "NULL"});
  int count = 0;
  EXPECT_EQ(ncclCommCount(nullptr, &count), ncclInvalidArgument);
  ncclComm_t comm = nullptr;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(ncclCommInitRank(&comm, 0, id, 0), ncclInvalidArgument);
  expectMessage(nullptr, {"nranks", "0"});
  EXPECT_EQ(ncclCommInitRank(&comm, 2, id, 2), ncclInvalidArgument);
  expectMessage(nullptr, {"rank", "2"});
  EXPECT_EQ(ncclCommInitRank(nullptr, 1, id, 0), ncclInvalidArgument);
}

TEST(Config, OldCallersGetDefaultsAndBadMagicIsRejected) {
  setenv("WEFT_BACKEND", "host", 0);
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(config.magic, 0xcafebeefu);
  EXPECT_EQ(config.size, sizeof(ncclConfig_t));
  EXPECT_EQ(config.blocking, NCCL_CONFIG_UNDEF_INT);
  // A caller built against an older header: only the fields up to maxCTAs.
  config.size = offsetof(ncclConfig_t, netName);
  config.maxCTAs = 2;
  config.commName = reinterpret_cast<const char*>(0x1);  // past its size: must not be read
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &config), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<int> v(10, 3), out(10, 0);
  EXPECT_EQ(ncclAllReduce(v.data(), out.data(), 10, ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(out, v);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);

  ncclConfig_t bad = NCCL_CONFIG_INITIALIZER;
  bad.magic = 0x12345678;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  EXPECT_EQ(ncclCommInitRankConfig(&comm, 1, id, 0, &bad), ncclInvalidArgument);
  expectMessage(nullptr, {"magic", "12345678"});
}

TEST(Versions, NcclApiAndWeft) {
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_EQ(version / 100, 227) << version;  // NCCL_VERSION(2,27,x) = 22700 + x
  EXPECT_EQ(version, NCCL_VERSION_CODE);
  EXPECT_STRNE(weftGetVersionString(), "");
  EXPECT_EQ(ncclGetVersion(nullptr), ncclInvalidArgument);
  EXPECT_EQ(std::string(ncclGetErrorString(ncclInvalidUsage)).rfind("invalid usage", 0), 0u);
}

TEST(Unsupported, EntryPointsFailWithAClearMessage) {
  runRanks(RankMode::kThreads, 2, [](RankContext& ctx) {
    EXPECT_EQ(ncclCommRevoke(ctx.comm, 0), ncclInvalidUsage);
    expectMessage(ctx.comm, {"ncclCommRevoke", "not supported"});
    char devComm[64] = {};
    EXPECT_EQ(ncclDevCommCreate(ctx.comm, nullptr, devComm), ncclInvalidUsage);
    expectMessage(ctx.comm, {"ncclDevCommCreate", "not supported", "device API"});
    EXPECT_EQ(ncclDevCommDestroy(ctx.comm, devComm), ncclInvalidUsage);
    expectMessage(ctx.comm, {"ncclDevCommDestroy", "not supported"});
    expectUsable(ctx);
  });
}

// The model's time of a group of `calls` AllReduces of `count` floats on
// comm, simulated (nothing runs: out stays as it was).
float simulateAllReduces(ncclComm_t comm, size_t count, int calls) {
  std::vector<float> in(count, 1.0f), out(count, -7.0f);
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupStart(), ncclSuccess);
  for (int i = 0; i < calls; ++i)
    EXPECT_EQ(ncclAllReduce(in.data(), out.data(), count, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << ncclGetLastError(comm);
  EXPECT_EQ(out.front(), -7.0f) << "a simulated group ran";
  EXPECT_EQ(out.back(), -7.0f) << "a simulated group ran";
  return sim.estimatedTime;
}

// ncclGroupSimulateEnd plans the group, runs nothing, and gives the cost
// model's time: larger for more bytes, the sum for calls one after another.
// Only rank 0 simulates, so a following call shows that nothing the ranks
// must agree on moved.
TEST(GroupSimulate, EstimatesWithoutRunningAndLeavesTheCommInStep) {
  runRanks(RankMode::kThreads, 2, [](RankContext& ctx) {
    if (ctx.rank == 0) {
      const float small = simulateAllReduces(ctx.comm, 2, 1);
      const float large = simulateAllReduces(ctx.comm, 1 << 22, 1);
      const float twice = simulateAllReduces(ctx.comm, 1 << 22, 2);
      EXPECT_GT(small, 0.0f);
      EXPECT_GT(large, 10 * small);
      EXPECT_NEAR(twice, 2 * large, 0.01 * large);
      // Sends and receives: a hop of 1 MiB, more than an 8-byte AllReduce.
      std::vector<char> buf(1 << 20);
      ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      EXPECT_EQ(ncclSend(buf.data(), buf.size(), ncclInt8, 1, ctx.comm, nullptr), ncclSuccess);
      EXPECT_EQ(ncclRecv(buf.data(), buf.size(), ncclInt8, 1, ctx.comm, nullptr), ncclSuccess);
      EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclSuccess) << ncclGetLastError(ctx.comm);
      EXPECT_GT(sim.estimatedTime, small);
    }
    expectUsable(ctx);
  });
}

// A simInfo missing or not initialised is named and leaves the group open:
// ncclGroupEnd then runs it. Without a group the call is refused.
TEST(GroupSimulate, BadSimInfoLeavesTheGroupOpen) {
  runRanks(RankMode::kThreads, 2, [](RankContext& ctx) {
    std::vector<int> in(100, ctx.rank + 1), out(100, 0);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(in.data(), out.data(), in.size(), ncclInt32, ncclSum, ctx.comm, nullptr), ncclSuccess);
    if (ctx.rank == 0) {
      EXPECT_EQ(ncclGroupSimulateEnd(nullptr), ncclInvalidArgument);
      expectMessage(nullptr, {"simInfo", "NULL"});
      ncclSimInfo_t raw{};
      raw.magic = 0x1234;
      EXPECT_EQ(ncclGroupSimulateEnd(&raw), ncclInvalidArgument);
      expectMessage(nullptr, {"magic 0x1234", "NCCL_SIM_INFO_INITIALIZER"});
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(ctx.comm);
    EXPECT_EQ(out[99], 3);
  });
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  EXPECT_EQ(ncclGroupSimulateEnd(&sim), ncclInvalidUsage);
  expectMessage(nullptr, {"without a matching ncclGroupStart"});
}

class Split : public ::testing::TestWithParam<RankMode> {};

TEST_P(Split, ColorsKeysAndNoColor) {
  runRanks(GetParam(), 5, [](RankContext& ctx) {
    // Colors: even ranks, odd ranks; rank 4 opts out. Keys reverse the order.
    const int color = ctx.rank == 4 ? NCCL_SPLIT_NOCOLOR : ctx.rank % 2;
    ncclComm_t child = nullptr;
    ASSERT_EQ(ncclCommSplit(ctx.comm, color, 100 - ctx.rank, &child, nullptr), ncclSuccess)
        << ncclGetLastError(ctx.comm);
    if (ctx.rank == 4) {
      EXPECT_EQ(child, nullptr);
    } else {
      ASSERT_NE(child, nullptr);
      int n = 0, r = -1;
      ASSERT_EQ(ncclCommCount(child, &n), ncclSuccess);
      ASSERT_EQ(ncclCommUserRank(child, &r), ncclSuccess);
      EXPECT_EQ(n, 2);
      EXPECT_EQ(r, ctx.rank < 2 ? 1 : 0) << "keys decide the order";  // {0,2}->{2,0}; {1,3}->{3,1}
      std::vector<int> in(1000, ctx.rank), out(1000, -1);
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), 1000, ncclInt32, ncclSum, child, nullptr), ncclSuccess);
      EXPECT_EQ(out[0], color == 0 ? 0 + 2 : 1 + 3);
      EXPECT_EQ(ncclCommDestroy(child), ncclSuccess);
    }
    expectUsable(ctx);  // the parent is unaffected
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, Split, ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const ::testing::TestParamInfo<RankMode>& p) { return std::string(modeName(p.param)); });

}  // namespace
}  // namespace weft::test
