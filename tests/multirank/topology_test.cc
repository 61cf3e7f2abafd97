// Topology at communicator init, through the public API on the host
// backend: NCCL_P2P_LEVEL in transport choice, NCCL_TOPO_FILE (fused over the
// ranks of a host) and NCCL_TOPO_DUMP_FILE, NCCL_GRAPH_FILE and
// NCCL_GRAPH_DUMP_FILE, and the rings and trees printed at NCCL_DEBUG=INFO.
// Collectives are checked on every shape a file produces.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

const std::string kFixtures = WEFT_FIXTURES_DIR;

void allreduce(RankContext& ctx) { runAndCheck(ctx, {CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 5000, 0, false}); }

TEST(TransportChoice, P2pLevelBelowThePathTurnsP2pOff) {
  // Host backend ranks of one node are PHB apart (through the CPU).
  {
    ScopedEnv level("NCCL_P2P_LEVEL", "NVL");
    const std::string log = runLogged(2, "INIT", allreduce);
    EXPECT_NE(log.find("via SHM"), std::string::npos) << log;
    EXPECT_EQ(log.find("via P2P"), std::string::npos) << log;
  }
  {
    ScopedEnv level("NCCL_P2P_LEVEL", "PHB");
    const std::string log = runLogged(2, "INIT", allreduce);
    EXPECT_NE(log.find("via P2P/direct"), std::string::npos) << log;
  }
  {
    ScopedEnv legacy("NCCL_P2P_LEVEL", "2");  // PXB
    const std::string log = runLogged(2, "INIT", allreduce);
    EXPECT_NE(log.find("via SHM"), std::string::npos) << log;
  }
}

// A bad value fails init with the variable, the value and what is expected.
void expectInitFails(const char* expect1, const char* expect2) {
  runRanksRaw(RankMode::kThreads, 2, [&](int rank, int nranks, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    const ncclResult_t rc = ncclCommInitRank(&comm, nranks, id, rank);
    EXPECT_NE(rc, ncclSuccess);
    const std::string msg = ncclGetLastError(nullptr);
    EXPECT_NE(msg.find(expect1), std::string::npos) << msg;
    EXPECT_NE(msg.find(expect2), std::string::npos) << msg;
    if (comm) ncclCommDestroy(comm);
  });
}

TEST(TransportChoice, BadValuesAreNamed) {
  {
    ScopedEnv level("NCCL_P2P_LEVEL", "fastest");
    expectInitFails("NCCL_P2P_LEVEL=\"fastest\"", "expected LOC, NVL");
  }
  {
    ScopedEnv shm("NCCL_SHM_DISABLE", "yes");
    expectInitFails("NCCL_SHM_DISABLE=\"yes\"", "expected 0 or 1");
  }
}

// multinic.xml: four GPUs, two sockets, two NICs per socket. Each node of
// four ranks is one such machine; rings open at a GPU pair sharing a NIC.
TEST(TopoFile, HostBackendUsesTheFileAndDumpsIt) {
  const std::string dump = tempPath("topo-dump");
  ScopedEnv file("NCCL_TOPO_FILE", (kFixtures + "/multinic.xml").c_str());
  ScopedEnv out("NCCL_TOPO_DUMP_FILE", dump.c_str());
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  ScopedEnv perNode("WEFT_RANKS_PER_NODE", "4");
  ScopedEnv algo("NCCL_ALGO", "allreduce:tree");
  const std::string log = runLogged(8, "INIT", [](RankContext& ctx) {
    allreduce(ctx);
    runAndCheck(ctx, {CollOp::kAllGather, ncclInt32, TestOp::kSum, 777, 0, false});
  });
  EXPECT_NE(log.find("Channel 00/02 : 1 2 3 0 5 6 7 4"), std::string::npos) << log;
  EXPECT_NE(log.find("Trees [0]"), std::string::npos) << log;
  EXPECT_NE(log.find("topology NCCL_TOPO_FILE="), std::string::npos) << log;
  const std::string written = slurp(dump);
  std::remove(dump.c_str());
  EXPECT_NE(written.find("<system version=\"1\">"), std::string::npos) << written;
  EXPECT_NE(written.find("mlx5_3"), std::string::npos) << written;
  EXPECT_NE(written.find("rank=\"3\""), std::string::npos) << "the model carries its ranks: " << written;
}

// The file's NICs (mlx5_*) are not the socket network's interfaces: every
// network link spreads by channel, and the first unmatched NIC says so.
TEST(TopoFile, NicsTheNetworkLacksFallBackToSpreadingByChannel) {
  ScopedEnv file("NCCL_TOPO_FILE", (kFixtures + "/multinic.xml").c_str());
  ScopedEnv net("NCCL_NET", "Socket");
  ScopedEnv perNode("WEFT_RANKS_PER_NODE", "4");
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  const std::string log = runLogged(8, "NET,GRAPH", allreduce);
  EXPECT_NE(log.find("matches none of the network's devices"), std::string::npos) << log;
  EXPECT_NE(log.find("[send] via NET/Socket/"), std::string::npos) << log;
  EXPECT_EQ(log.find("the plan's NIC\n"), std::string::npos) << log;
  EXPECT_NE(log.find("enters the node by NET"), std::string::npos) << log;
}

TEST(TopoFile, GpuCountMustMatchTheNode) {
  ScopedEnv file("NCCL_TOPO_FILE", (kFixtures + "/gpu3_pcie.xml").c_str());
  expectInitFails("has 3 GPUs", "2 ranks");
}

// A cloud image's file of the PCI tree alone has no GPU for the host
// backend's ranks: refused, saying why, not a crash in the search.
TEST(TopoFile, PciOnlyFileIsRefusedOnTheHostBackend) {
  ScopedEnv file("NCCL_TOPO_FILE", (kFixtures + "/machines/azure_ndv4_topo.xml").c_str());
  expectInitFails("azure_ndv4_topo.xml has no <gpu> element", "the host backend has none to merge it with");
}

TEST(TopoFile, AFileWeftCannotUseNamesItsLine) {
  ScopedEnv file("NCCL_TOPO_FILE", (kFixtures + "/fuzz/garbage_attributes.xml").c_str());
  expectInitFails("garbage_attributes.xml: line 2: <cpu numaid=\"zero\">", "expected an integer");
}

// A published dump of a real server (4 A10s on two sockets, ten NICs) as two
// virtual nodes of four ranks: rings stay on one NIC per channel and the
// collectives are right.
TEST(TopoFile, RealMachineAcrossTwoNodes) {
  ScopedEnv file("NCCL_TOPO_FILE", (kFixtures + "/machines/a10x4_dual_skylake_vnics.xml").c_str());
  ScopedEnv perNode("WEFT_RANKS_PER_NODE", "4");
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
  const std::string log = runLogged(8, "INIT", [](RankContext& ctx) {
    allreduce(ctx);
    runAndCheck(ctx, {CollOp::kAllGather, ncclInt32, TestOp::kSum, 555, 0, false});
  });
  EXPECT_NE(log.find("Channel 01/02 :"), std::string::npos) << log;
  EXPECT_NE(log.find("2 nodes x 4 ranks"), std::string::npos) << log;
}

// Processes of one host that read different files fuse them: the union has
// five GPUs, which neither file has, and both ranks fail the same way.
TEST(TopoFile, ViewsOfOneHostAreFused) {
  runRanksRaw(RankMode::kProcesses, 2, [](int rank, int nranks, const ncclUniqueId& id) {
    const std::string file = kFixtures + (rank == 0 ? "/gpu2_nvlink.xml" : "/gpu3_pcie.xml");
    setenv("NCCL_TOPO_FILE", file.c_str(), 1);
    ncclComm_t comm = nullptr;
    EXPECT_NE(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess);
    const std::string msg = ncclGetLastError(nullptr);
    EXPECT_NE(msg.find("has 5 GPUs"), std::string::npos) << msg;
    if (comm) ncclCommDestroy(comm);
  });
}

TEST(GraphFile, ImposedRingsAreUsedAndDumped) {
  const std::string graph = tempPath("graph-in"), dump = tempPath("graph-out");
  std::ofstream(graph) << R"(<graphs version="1">
  <graph id="0" pattern="4" crossnic="0" nchannels="1" speedintra="8" speedinter="1.25" latencyinter="0"
         typeintra="PHB" typeinter="PHB" samechannels="1">
    <channel><net dev="0"/><gpu dev="0"/><gpu dev="2"/><gpu dev="1"/><gpu dev="3"/><net dev="0"/></channel>
  </graph>
</graphs>
)";
  ScopedEnv in("NCCL_GRAPH_FILE", graph.c_str());
  ScopedEnv out("NCCL_GRAPH_DUMP_FILE", dump.c_str());
  ScopedEnv channels("NCCL_MAX_NCHANNELS", "1");
  const std::string log = runLogged(4, "INIT", [](RankContext& ctx) {
    allreduce(ctx);
    runAndCheck(ctx, {CollOp::kReduceScatter, ncclInt32, TestOp::kSum, 1001, 0, false});
  });
  EXPECT_NE(log.find("Channel 00/01 : 0 2 1 3"), std::string::npos) << log;
  const std::string written = slurp(dump);
  std::remove(graph.c_str());
  std::remove(dump.c_str());
  EXPECT_NE(written.find("<graphs version=\"1\">"), std::string::npos) << written;
  EXPECT_NE(written.find("<gpu dev=\"2\" rank=\"2\"/>\n      <gpu dev=\"1\" rank=\"1\"/>"), std::string::npos)
      << written;
}

TEST(GraphFile, ErrorsNameTheFile) {
  ScopedEnv in("NCCL_GRAPH_FILE", "/nonexistent/graph.xml");
  expectInitFails("/nonexistent/graph.xml", "cannot open");
}

}  // namespace
}  // namespace weft::test
