// 2D torus AllReduce through the API, forced with NCCL_ALGO: grids given by
// WEFT_TORUS (2x2, 2x3, 3x3, 4x4, one row, one column, rows across virtual
// nodes) and derived (the most square factorisation, nodes x ranks per
// node); every type and reduction, in place and out of place, sizes across
// FIFO steps, chunks and uneven segments, against the scalar reference. The
// forced name is really chosen; the grid and its source are logged; a rank
// count without a grid falls back to the ring; an invalid WEFT_TORUS fails
// init naming it.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <tuple>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

struct Setting {
  RankMode mode;
  int nranks;
  const char* torus;  // WEFT_TORUS; "" derived
  int perNode;        // WEFT_RANKS_PER_NODE; 0 none
  const char* name;
};

class Torus : public ::testing::TestWithParam<Setting> {};

std::vector<CollCase> everyReduction() {
  std::vector<CollCase> cases;
  for (size_t count : {size_t{1}, size_t{7}, size_t{2049}, size_t{8192 * 3 + 5}, size_t{60001}})
    cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, count, 0, count % 2 == 1});
  cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kProd, 5000, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclUint8, TestOp::kMax, 4099, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclInt8, TestOp::kMin, 300, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclInt64, TestOp::kMin, 777, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclUint64, TestOp::kSum, 778, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclFloat16, TestOp::kAvg, 3001, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclInt32, TestOp::kAvg, 3001, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclBfloat16, TestOp::kPreMulHost, 999, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclFloat64, TestOp::kPreMulPtr, 999, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclFloat8e4m3, TestOp::kMax, 513, 0, false});
  cases.push_back({CollOp::kAllReduce, ncclFloat8e5m2, TestOp::kSum, 64, 0, true});
  // Other collectives on the same channels, then the torus again.
  cases.push_back({CollOp::kReduceScatter, ncclFloat32, TestOp::kSum, 1000, 0, false});
  cases.push_back({CollOp::kAllGather, ncclInt32, TestOp::kSum, 999, 0, true});
  cases.push_back({CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 4096, 0, false});
  return cases;
}

TEST_P(Torus, EveryReductionAgainstTheReference) {
  const Setting s = GetParam();
  ScopedEnv torus("WEFT_TORUS", s.torus[0] ? s.torus : nullptr);
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", s.perNode > 0 ? std::to_string(s.perNode).c_str() : nullptr);
  ScopedEnv algo("NCCL_ALGO", "allreduce:Torus2D");
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");  // 8 KiB steps: many steps and chunks per call
  runCases(s.mode, s.nranks, everyReduction());
}

std::string settingName(const ::testing::TestParamInfo<Setting>& p) {
  return std::string(modeName(p.param.mode)) + "_" + p.param.name;
}

INSTANTIATE_TEST_SUITE_P(
    Threads, Torus,
    ::testing::Values(Setting{RankMode::kThreads, 4, "2x2", 0, "2x2"}, Setting{RankMode::kThreads, 6, "2x3", 0, "2x3"},
                      Setting{RankMode::kThreads, 6, "3x2", 0, "3x2"}, Setting{RankMode::kThreads, 9, "3x3", 0, "3x3"},
                      Setting{RankMode::kThreads, 16, "4x4", 0, "4x4"}, Setting{RankMode::kThreads, 5, "1x5", 0, "1x5"},
                      Setting{RankMode::kThreads, 4, "4x1", 0, "4x1"},
                      Setting{RankMode::kThreads, 12, "", 0, "derived_3x4"},
                      Setting{RankMode::kThreads, 8, "", 4, "nodes_2x4"},
                      Setting{RankMode::kThreads, 8, "4x2", 4, "4x2_across_nodes"}),
    settingName);
INSTANTIATE_TEST_SUITE_P(Processes, Torus,
                         ::testing::Values(Setting{RankMode::kProcesses, 6, "", 3, "nodes_2x3"},
                                           Setting{RankMode::kProcesses, 4, "2x2", 0, "2x2"}),
                         settingName);

// The grid, where it came from, and the forced choice, in the log.
std::string forcedLog(int nranks, const char* torus, const char* perNode) {
  ScopedEnv grid("WEFT_TORUS", torus);
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", perNode);
  ScopedEnv filter("NCCL_ALGO", "allreduce:Torus2D");
  return runLogged(nranks, "GRAPH,TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 1024, 0, false});
  });
}

TEST(TorusChoice, GridAndSourceAreLoggedAndTheForcedNameIsChosen) {
  const std::string given = forcedLog(6, "3x2", nullptr);
  EXPECT_NE(given.find("Torus2D grid 3 x 2 (WEFT_TORUS=3x2)"), std::string::npos) << given;
  EXPECT_NE(given.find("AllReduce 4096 bytes: Torus2D"), std::string::npos) << given;
  const std::string square = forcedLog(12, nullptr, nullptr);
  EXPECT_NE(square.find("Torus2D grid 3 x 4 (the most square factorisation)"), std::string::npos) << square;
  EXPECT_NE(square.find("AllReduce 4096 bytes: Torus2D"), std::string::npos) << square;
  const std::string nodes = forcedLog(8, nullptr, "2");
  EXPECT_NE(nodes.find("Torus2D grid 4 x 2 (4 nodes x 2 ranks per node)"), std::string::npos) << nodes;
  EXPECT_NE(nodes.find("AllReduce 4096 bytes: Torus2D"), std::string::npos) << nodes;
}

// Every threads setting of the suite above really runs the torus (not the
// ring it falls back to).
TEST(TorusChoice, EveryGridOfTheSuiteRunsTheTorus) {
  const std::vector<Setting> settings = {{RankMode::kThreads, 4, "2x2", 0, ""}, {RankMode::kThreads, 6, "2x3", 0, ""},
                                         {RankMode::kThreads, 9, "3x3", 0, ""}, {RankMode::kThreads, 16, "4x4", 0, ""},
                                         {RankMode::kThreads, 5, "1x5", 0, ""}, {RankMode::kThreads, 4, "4x1", 0, ""},
                                         {RankMode::kThreads, 12, "", 0, ""},   {RankMode::kThreads, 8, "", 4, ""},
                                         {RankMode::kThreads, 8, "4x2", 4, ""}};
  for (const Setting& s : settings) {
    const std::string perNode = std::to_string(s.perNode);
    const std::string log =
        forcedLog(s.nranks, s.torus[0] ? s.torus : nullptr, s.perNode > 0 ? perNode.c_str() : nullptr);
    EXPECT_NE(log.find("AllReduce 4096 bytes: Torus2D"), std::string::npos) << s.nranks << " ranks " << s.torus << log;
  }
}

// A prime rank count has no grid: an INFO line says so and the ring runs.
TEST(TorusChoice, NoGridFallsBackToTheRing) {
  const std::string log = forcedLog(7, nullptr, nullptr);
  EXPECT_NE(log.find("no Torus2D: 7 ranks have no grid of 2 or more rows and columns"), std::string::npos) << log;
  EXPECT_NE(log.find("AllReduce 4096 bytes: Ring"), std::string::npos) << log;
  EXPECT_NE(log.find("Torus2D -"), std::string::npos) << log;
}

// Not named in NCCL_ALGO, the torus is priced but the ring keeps the call.
TEST(TorusChoice, OptInOnly) {
  ScopedEnv filter("NCCL_ALGO", nullptr);
  ScopedEnv grid("WEFT_TORUS", "2x4");
  const std::string log = runLogged(8, "TUNING", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 1 << 18, 0, false});
  });
  EXPECT_NE(log.find("Torus2D "), std::string::npos) << log;
  EXPECT_EQ(log.find("bytes: Torus2D"), std::string::npos) << log;
}

// A broken link on a row or column ring: no torus, and the ring goes around it.
TEST(TorusChoice, BrokenLinkOnItsRingsFallsBackToTheRing) {
  ScopedEnv broken("WEFT_BROKEN_LINKS", "0-1");
  const std::string log = forcedLog(6, "2x3", nullptr);
  EXPECT_NE(log.find("no Torus2D: link 0-1, on its rings, is broken"), std::string::npos) << log;
  EXPECT_NE(log.find("AllReduce 4096 bytes: Ring"), std::string::npos) << log;
}

// WEFT_TORUS must tile the ranks: init fails with a message naming it (a
// rank told of another's failure first fails with that rank's message).
TEST(TorusChoice, InvalidShapeFailsInitNamingIt) {
  for (const char* bad : {"2x3", "4by1", "0x4", "x4"}) {
    ScopedEnv grid("WEFT_TORUS", bad);
    std::atomic<int> invalid{0};
    runRanksRaw(RankMode::kThreads, 4, [&](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      const ncclResult_t rc = ncclCommInitRank(&comm, nranks, id, rank);
      EXPECT_NE(rc, ncclSuccess) << bad;
      invalid += rc == ncclInvalidArgument ? 1 : 0;
      const std::string error = ncclGetLastError(nullptr);
      EXPECT_NE(error.find(std::string("WEFT_TORUS=\"") + bad + "\""), std::string::npos) << error;
      EXPECT_NE(error.find("ROWS * COLUMNS = 4"), std::string::npos) << error;
      if (rc == ncclSuccess) ncclCommDestroy(comm);
    });
    EXPECT_GT(invalid.load(), 0) << bad;
  }
}

}  // namespace
}  // namespace weft::test
