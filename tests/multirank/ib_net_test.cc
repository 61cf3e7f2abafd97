// Collectives across virtual nodes over the built-in IB network, on the
// in-process verbs emulation (WEFT_IB_EMULATE: the emulation joins threads
// of one process only, so ranks are threads here). NCCL_NET=IB makes an
// unusable IB network an error, so a passing run carried every byte between
// nodes over RC queue pairs. Each case runs in a forked child: the network
// is chosen once per process.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

// Runs body in a child process that must exit cleanly within `seconds`.
void inFreshProcess(unsigned seconds, const std::function<void()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(seconds);  // a hang fails the test (SIGALRM) instead of stalling ctest
    body();
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFEXITED(status) ? "child failed, exit status " + std::to_string(WEXITSTATUS(status))
                            : "child killed by signal " + std::to_string(WTERMSIG(status)) + " (14: it hung)");
}

std::vector<CollCase> collectives(int nranks) {
  return {{CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 300001, 0, false},
          {CollOp::kAllReduce, ncclInt64, TestOp::kMax, 4097, 0, true},
          {CollOp::kBroadcast, ncclInt8, TestOp::kSum, 70001, nranks - 1, false},
          {CollOp::kReduce, ncclInt32, TestOp::kProd, 5000, 1, false},
          {CollOp::kAllGather, ncclFloat64, TestOp::kSum, 9999, 0, false},
          {CollOp::kReduceScatter, ncclInt32, TestOp::kSum, 20000, 0, true},
          {CollOp::kAlltoAll, ncclUint8, TestOp::kSum, 33333, 0, false},
          {CollOp::kAllReduce, ncclUint8, TestOp::kSum, 1, 0, false}};
}

struct Setting {
  int nranks;
  int perNode;
  int qps;
  const char* algo;
};

class OverIb : public ::testing::TestWithParam<Setting> {};

TEST_P(OverIb, CollectivesAreExact) {
  const Setting s = GetParam();
  inFreshProcess(240, [s] {
    ScopedEnv emulate("WEFT_IB_EMULATE", "2");
    ScopedEnv net("NCCL_NET", "IB");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", std::to_string(s.perNode).c_str());
    ScopedEnv qps("NCCL_IB_QPS_PER_CONNECTION", std::to_string(s.qps).c_str());
    ScopedEnv algo("NCCL_ALGO", s.algo);
    ScopedEnv buff("NCCL_BUFFSIZE", "131072");  // 16 KiB steps: many messages per call
    ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
    runCases(RankMode::kThreads, s.nranks, collectives(s.nranks));
  });
}

INSTANTIATE_TEST_SUITE_P(IbEmulation, OverIb,
                         ::testing::Values(Setting{2, 1, 1, "Ring"}, Setting{4, 1, 1, "Ring,Tree"},
                                           Setting{4, 2, 2, "Ring"}, Setting{3, 1, 4, "Ring,Tree"},
                                           Setting{6, 2, 1, "Ring,Tree"}),
                         [](const ::testing::TestParamInfo<Setting>& p) {
                           return std::to_string(p.param.nranks) + "ranks_" + std::to_string(p.param.perNode) +
                                  "pernode_" + std::to_string(p.param.qps) + "qps_" +
                                  (std::string(p.param.algo).find("Tree") != std::string::npos ? "tree" : "ring");
                         });

// Without NCCL_NET the IB network is chosen before sockets when it finds a
// port, and says so; NCCL_IB_DISABLE=1 leaves the traffic to sockets.
TEST(OverIbChoice, ChosenBeforeSocketsUnlessDisabled) {
  for (const char* disable : {"0", "1"}) {
    inFreshProcess(120, [disable] {
      ScopedEnv emulate("WEFT_IB_EMULATE", "1");
      ScopedEnv off("NCCL_IB_DISABLE", disable);
      ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
      const std::string log = runLogged(2, "NET,INIT", [](RankContext& ctx) {
        runAndCheck(ctx, {CollOp::kAllReduce, ncclInt32, TestOp::kSum, 1000, 0, false});
      });
      const bool ib = log.find("Using network IB") != std::string::npos;
      const bool socket = log.find("Using network Socket") != std::string::npos;
      EXPECT_EQ(ib, disable[0] == '0') << log;
      EXPECT_EQ(socket, disable[0] == '1') << log;
    });
  }
}

// NCCL_NET=IB with the IB network turned off is the user's contradiction.
TEST(OverIbChoice, NcclNetIbWithIbDisabledIsInvalidUsage) {
  inFreshProcess(120, [] {
    ScopedEnv emulate("WEFT_IB_EMULATE", "1");
    ScopedEnv net("NCCL_NET", "IB");
    ScopedEnv off("NCCL_IB_DISABLE", "1");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
    ScopedEnv patience("WEFT_BOOTSTRAP_TIMEOUT", "20");
    runRanksRaw(RankMode::kThreads, 2, [](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      EXPECT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclInvalidUsage);
      const std::string why = ncclGetLastError(comm);
      EXPECT_NE(why.find("NCCL_IB_DISABLE"), std::string::npos) << why;
      if (comm != nullptr) ncclCommAbort(comm);
    });
  });
}

// Rails: multinic_emu.xml is multinic.xml (four GPUs, four NICs) with its
// NICs named after the emulation's devices, so the plan's NIC of every
// channel is a device of the IB network by name. Two nodes of four ranks,
// four channels: each channel's links on a node use one device (the rail it
// enters and leaves by), and the four channels use four devices.
const std::string kFixtures = WEFT_FIXTURES_DIR;

struct RailLog {
  std::map<std::pair<int, int>, std::set<int>> devicesOf;  // (node, channel) -> devices its links use
  int planned = 0, spread = 0;
};

RailLog parseRails(const std::string& log, int perNode) {
  RailLog out;
  const std::regex line(
      R"(Channel (\d+)/0 : (\d+) -> (\d+) \[(send|receive)\] via NET/IB/(\d+)\(emu\d+\) (the plan's NIC|spread by channel))");
  for (auto it = std::sregex_iterator(log.begin(), log.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const int local = m[4] == "send" ? std::stoi(m[2]) : std::stoi(m[3]);
    out.devicesOf[{local / perNode, std::stoi(m[1])}].insert(std::stoi(m[5]));
    (m[6] == "the plan's NIC" ? out.planned : out.spread) += 1;
  }
  return out;
}

// Two virtual nodes of 4 ranks over the emulated IB network with four NICs
// (multinic_emu.xml), 4 channels, one checked AllReduce; the NET and GRAPH log.
std::string allReduceOverFourEmulatedNics() {
  ScopedEnv emulate("WEFT_IB_EMULATE", "4");
  ScopedEnv net("NCCL_NET", "IB");
  ScopedEnv topo("NCCL_TOPO_FILE", (kFixtures + "/multinic_emu.xml").c_str());
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "4");
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "4");
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "4");
  return runLogged(8, "NET,GRAPH", [](RankContext& ctx) {
    runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 300001, 0, false});
  });
}

TEST(OverIbRails, EachChannelUsesItsPlannedNicOnBothNodes) {
  inFreshProcess(240, [] {
    ScopedEnv algo("NCCL_ALGO", "Ring,Tree");  // only planned links (a hierarchical ring's are the GPU's nearest)
    const std::string log = allReduceOverFourEmulatedNics();
    const RailLog rails = parseRails(log, 4);
    EXPECT_GT(rails.planned, 0) << log;
    EXPECT_EQ(rails.spread, 0) << log;
    // The plan's entry NIC per channel (the GRAPH line; the same on every
    // rank, the nodes being alike): emu<k> is the IB network's device k.
    std::map<int, int> planned;
    const std::regex graphLine(R"(Channel (\d+) : enters the node by NET \d+ \(emu(\d+))");
    for (auto it = std::sregex_iterator(log.begin(), log.end(), graphLine); it != std::sregex_iterator(); ++it)
      planned[std::stoi((*it)[1])] = std::stoi((*it)[2]);
    ASSERT_EQ(planned.size(), 4u) << log;
    std::set<int> used;
    for (const auto& [where, devices] : rails.devicesOf) {
      EXPECT_EQ(devices, std::set<int>{planned[where.second]})
          << "node " << where.first << " channel " << where.second << ": one device, its planned NIC's";
      used.insert(devices.begin(), devices.end());
    }
    EXPECT_EQ(rails.devicesOf.size(), 8u) << "two nodes x four channels: " << log;
    EXPECT_EQ(used.size(), 4u) << "four channels over four NICs";
  });
}

// NCCL_IB_HCA leaves two of the four NICs: the plan's other two match no
// device, which is said once each, and their channels spread over the two.
TEST(OverIbRails, NicsLeftOutByIbHcaFallBackToSpreading) {
  inFreshProcess(240, [] {
    ScopedEnv hca("NCCL_IB_HCA", "=emu0,emu1");
    const std::string log = allReduceOverFourEmulatedNics();
    const RailLog rails = parseRails(log, 4);
    EXPECT_GT(rails.planned, 0) << log;
    EXPECT_GT(rails.spread, 0) << log;
    for (const auto& [where, devices] : rails.devicesOf)
      for (int d : devices) EXPECT_LT(d, 2) << "only emu0 and emu1 are devices";
    const std::string unmatched = "the plan's NIC emu2 port 1, PCI 0000:63:00.0 matches none of the network's devices";
    EXPECT_NE(log.find(unmatched), std::string::npos) << log;
    EXPECT_EQ(log.find(unmatched), log.rfind(unmatched)) << "said once";
  });
}

// Merged devices (NCCL_IB_MERGE_NICS): the emulation laid out as one
// dual-port NIC (emu0, emu1: functions 0 and 1 of PCI device 0000:17:00) and
// one single-port NIC (emu2). Two virtual hosts, two channels: channel 0 on
// network device 0 (emu0+emu1), channel 1 on device 1 (emu2).
constexpr const char* kDualPortLayout =
    "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0,/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.1,"
    "/sys/devices/pci0000:62/0000:62:01.0/0000:63:00.0";

std::string collectivesOverDualPortLayout() {
  ScopedEnv emulate("WEFT_IB_EMULATE", "3");
  ScopedEnv pci("WEFT_IB_EMULATE_PCI", kDualPortLayout);
  ScopedEnv net("NCCL_NET", "IB");
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv minCh("NCCL_MIN_NCHANNELS", "2");
  ScopedEnv maxCh("NCCL_MAX_NCHANNELS", "2");
  ScopedEnv buff("NCCL_BUFFSIZE", "131072");
  return runLogged(2, "NET,INIT", [](RankContext& ctx) {
    for (const CollCase& c : collectives(2)) runAndCheck(ctx, c);
  });
}

TEST(OverIbMerged, ADualPortNicIsOneDeviceAndBothPortsCarryData) {
  inFreshProcess(240, [] {
    const std::string log = collectivesOverDualPortLayout();
    EXPECT_NE(log.find("Using network IB (2 devices)"), std::string::npos) << log;
    EXPECT_NE(log.find("network device 0 is emu0+emu1: ports emu0:1, emu1:1 of one NIC merged"), std::string::npos)
        << log;
    EXPECT_NE(log.find("via NET/IB/0(emu0+emu1)"), std::string::npos) << log;
    // Every sender on the merged device says what each port carried.
    const std::regex closed(R"(on emu0\+emu1 closed; bytes sent per port: emu0:1 (\d+), emu1:1 (\d+))");
    int connections = 0;
    for (auto it = std::sregex_iterator(log.begin(), log.end(), closed); it != std::sregex_iterator(); ++it) {
      connections += 1;
      EXPECT_GT(std::stoll((*it)[1]), 0) << it->str();
      EXPECT_GT(std::stoll((*it)[2]), 0) << it->str();
    }
    EXPECT_GT(connections, 0) << log;
  });
}

TEST(OverIbMerged, MergeNicsZeroKeepsThePortsApart) {
  inFreshProcess(240, [] {
    ScopedEnv off("NCCL_IB_MERGE_NICS", "0");
    const std::string log = collectivesOverDualPortLayout();
    EXPECT_NE(log.find("Using network IB (3 devices)"), std::string::npos) << log;
    EXPECT_EQ(log.find("emu0+emu1"), std::string::npos) << log;
  });
}

TEST(OverIbMerged, IbHcaSelectsPortsBeforeTheyAreMerged) {
  inFreshProcess(240, [] {
    ScopedEnv hca("NCCL_IB_HCA", "^emu1");
    const std::string log = collectivesOverDualPortLayout();
    EXPECT_NE(log.find("Using network IB (2 devices)"), std::string::npos) << log;
    EXPECT_EQ(log.find("emu0+"), std::string::npos) << log;
    EXPECT_EQ(log.find("(emu1)"), std::string::npos) << log;
  });
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// A rank that aborts (destroying its QPs and closing its set-up sockets)
// while the others are in a call: they fail in bounded time, never hang.
// Either the aborting rank's failure notice ends their call first, or the
// IB network sees the closed connection and the message says so.
TEST(OverIbFailures, PeerAbortFailsTheOthersInBoundedTime) {
  inFreshProcess(120, [] {
    ScopedEnv emulate("WEFT_IB_EMULATE", "2");
    ScopedEnv net("NCCL_NET", "IB");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
    ScopedEnv timeout("WEFT_TIMEOUT", "60");
    runRanksRaw(RankMode::kThreads, 3, [](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
      std::vector<int> v(1 << 18, 1);
      ASSERT_EQ(ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr), ncclSuccess);
      if (rank == 1) {
        // A returned call's last steps may still wait in the proxy: finalize
        // sends them, so the others' first call surely completes.
        EXPECT_EQ(ncclCommFinalize(comm), ncclSuccess);
        EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
        return;
      }
      const auto t0 = std::chrono::steady_clock::now();
      ncclResult_t rc = ncclSuccess;
      for (int i = 0; i < 50 && rc == ncclSuccess; ++i)
        rc = ncclAllReduce(v.data(), v.data(), v.size(), ncclInt32, ncclSum, comm, nullptr);
      EXPECT_TRUE(rc == ncclRemoteError || rc == ncclSystemError) << ncclGetErrorString(rc);
      EXPECT_LT(secondsSince(t0), 20.0) << "the failure took too long to notice";
      const std::string msg = ncclGetLastError(comm);
      const bool notice = msg.find("rank 1 failed") != std::string::npos;
      const bool network = msg.find("over IB") != std::string::npos || msg.find("IB test") != std::string::npos ||
                           msg.find("IB isend") != std::string::npos || msg.find("IB irecv") != std::string::npos;
      EXPECT_TRUE(notice || network) << msg;
      EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);
    });
  });
}

}  // namespace
}  // namespace weft::test
