// Topology files, paths, ring search and channel plans on the fixtures in
// tests/fixtures (NCCL's XML format): properties, not snapshots.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "graph/plan.h"
#include "graph/search.h"
#include "graph/topo_xml.h"

namespace weft::graph {
namespace {

Topology load(const std::string& name) {
  auto t = loadTopologyFile(std::string(WEFT_FIXTURES_DIR) + "/" + name);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : Topology();
}

PathType gpuPath(const Topology& t, int a, int b) {
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
  return t.path(gpus[static_cast<size_t>(a)], gpus[static_cast<size_t>(b)]).type;
}

bool isPermutation(std::vector<int> v, int n) {
  std::sort(v.begin(), v.end());
  for (int i = 0; i < n; ++i)
    if (static_cast<int>(v.size()) != n || v[static_cast<size_t>(i)] != i) return false;
  return true;
}

const char* const kFixtures[] = {"dgx1_cubemesh.xml", "nvswitch8.xml", "pcie_dual_socket.xml", "gpu1.xml",
                                 "gpu2_nvlink.xml",   "gpu3_pcie.xml", "multinic.xml",         "pcie_5gpu_2nic.xml"};

TEST(TopologyXml, FixturesLoadAndRoundTrip) {
  for (const char* f : kFixtures) {
    SCOPED_TRACE(f);
    Topology a = load(f);
    ASSERT_FALSE(a.nodesOf(NodeType::kGpu).empty());
    auto b = topologyFromXml(*topologyToXml(a));
    ASSERT_TRUE(b.ok()) << b.status().message();
    const Topology& t = b.value();
    ASSERT_EQ(t.nodes().size(), a.nodes().size());
    for (size_t i = 0; i < a.nodes().size(); ++i) {
      EXPECT_EQ(t.nodes()[i].type, a.nodes()[i].type) << "node " << i;
      EXPECT_EQ(t.nodes()[i].id, a.nodes()[i].id) << "node " << i;
      EXPECT_EQ(t.nodes()[i].sm, a.nodes()[i].sm);
      EXPECT_EQ(t.nodes()[i].parent, a.nodes()[i].parent);
      ASSERT_EQ(t.links(static_cast<int>(i)).size(), a.links(static_cast<int>(i)).size()) << "node " << i;
      for (size_t k = 0; k < a.links(static_cast<int>(i)).size(); ++k) {
        EXPECT_EQ(t.links(static_cast<int>(i))[k].to, a.links(static_cast<int>(i))[k].to);
        EXPECT_DOUBLE_EQ(t.links(static_cast<int>(i))[k].bw, a.links(static_cast<int>(i))[k].bw);
      }
    }
    // Dumping the reloaded model gives the same text: nothing drifts.
    EXPECT_EQ(writeXml(*topologyToXml(t)), writeXml(*topologyToXml(a)));
  }
}

TEST(TopologyXml, ErrorsNameTheProblem) {
  auto bad = parseXml("<system version=\"1\">\n<cpu numaid=\"0\">\n</system>");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 3"), std::string::npos) << bad.status().message();
  auto missing = loadTopologyFile("/nonexistent/topo.xml");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/topo.xml"), std::string::npos);
}

TEST(Paths, ClassesOnFixtures) {
  Topology dgx = load("dgx1_cubemesh.xml");
  EXPECT_EQ(gpuPath(dgx, 0, 1), PathType::kNvl);
  EXPECT_EQ(gpuPath(dgx, 0, 4), PathType::kNvl);
  EXPECT_EQ(gpuPath(dgx, 0, 5), PathType::kNvb) << "no direct NVLink: through a GPU";
  EXPECT_EQ(gpuPath(dgx, 3, 3), PathType::kLoc);
  Topology nvs = load("nvswitch8.xml");
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      if (a != b) {
        EXPECT_EQ(gpuPath(nvs, a, b), PathType::kNvl);
      }
  Topology pcie = load("pcie_dual_socket.xml");
  EXPECT_EQ(gpuPath(pcie, 0, 1), PathType::kPix);
  EXPECT_EQ(gpuPath(pcie, 0, 2), PathType::kPhb);
  EXPECT_EQ(gpuPath(pcie, 0, 4), PathType::kSys);
  const std::vector<int> nets = pcie.nodesOf(NodeType::kNet);
  ASSERT_EQ(nets.size(), 1u);
  EXPECT_EQ(pcie.path(nets[0], pcie.nodesOf(NodeType::kGpu)[0]).type, PathType::kPhb);
  EXPECT_EQ(pcie.path(nets[0], pcie.nodesOf(NodeType::kGpu)[5]).type, PathType::kSys);
  Topology multi = load("multinic.xml");
  EXPECT_EQ(multi.path(multi.nodesOf(NodeType::kNet)[0], multi.nodesOf(NodeType::kGpu)[0]).type, PathType::kPix);
  // NVLink bandwidth scales with the link count.
  EXPECT_GT(dgx.path(dgx.nodesOf(NodeType::kGpu)[0], dgx.nodesOf(NodeType::kGpu)[3]).bw,
            dgx.path(dgx.nodesOf(NodeType::kGpu)[0], dgx.nodesOf(NodeType::kGpu)[1]).bw);
}

TEST(Search, RingsArePermutationsAndUseNvlinkWhereItExists) {
  for (const char* f : kFixtures) {
    SCOPED_TRACE(f);
    Topology t = load(f);
    const int g = static_cast<int>(t.nodesOf(NodeType::kGpu).size());
    RingSearch r = searchRings(t, 4);
    ASSERT_EQ(r.rings.size(), 4u);
    for (const auto& ring : r.rings) EXPECT_TRUE(isPermutation(ring, g));
    const bool hasNvlinkRing = std::string(f) == "dgx1_cubemesh.xml" || std::string(f) == "nvswitch8.xml" ||
                               std::string(f) == "gpu2_nvlink.xml";
    EXPECT_EQ(r.nvlinkOnly, hasNvlinkRing);
    if (!hasNvlinkRing) continue;
    for (const auto& ring : r.rings)
      for (size_t i = 0; i < ring.size(); ++i)
        EXPECT_EQ(gpuPath(t, ring[i], ring[(i + 1) % ring.size()]), PathType::kNvl);
  }
}

TEST(Search, PcieRingsCrossEachSocketBoundaryOnce) {
  RingSearch r = searchRings(load("pcie_dual_socket.xml"), 2);
  EXPECT_EQ(r.socketCrossings, 2);  // into socket 1 and back: the minimum for a ring over two sockets
  EXPECT_EQ(r.worstType, PathType::kSys);
  RingSearch one = searchRings(load("gpu3_pcie.xml"), 2);
  EXPECT_EQ(one.socketCrossings, 0);
}

// Across hosts a ring enters each host at its first GPU and leaves from its
// last, by one NIC (its rail): the first GPU is as close to a NIC as the
// host allows and the NIC is the closest to it; the last GPU reaches that
// NIC as closely, directly or through an NVLink peer next to it (NCCL's
// PXN), on every fixture.
TEST(Search, RingsEnterAndLeaveNextToNics) {
  for (const char* f : kFixtures) {
    SCOPED_TRACE(f);
    Topology t = load(f);
    const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
    PathType best = PathType::kDis;
    for (size_t g = 0; g < gpus.size(); ++g) best = std::min(best, netClass(t, static_cast<int>(g)));
    RingSearch r = searchRings(t, 8);
    for (size_t c = 0; c < r.rings.size(); ++c) {
      const int first = r.rings[c].front(), last = r.rings[c].back();
      EXPECT_EQ(netClass(t, first), best) << "channel " << c << " enters at GPU " << first;
      EXPECT_EQ(netClass(t, last), best) << "channel " << c << " leaves from GPU " << last;
      ASSERT_GE(r.netIn[c], 0);
      EXPECT_EQ(t.path(r.netIn[c], gpus[static_cast<size_t>(first)]).type, best);
      EXPECT_EQ(r.netOut[c], r.netIn[c]) << "channel " << c << " stays on its rail";
      EXPECT_TRUE(leavesByRail(t, last, r.netOut[c])) << "channel " << c;
    }
  }
}

TEST(Search, ChannelsSpreadOverNicsAndStayOnOneWhenTheyCan) {
  Topology nvs = load("nvswitch8.xml");
  RingSearch r = searchRings(nvs, 8);
  EXPECT_EQ(std::set<int>(r.netIn.begin(), r.netIn.end()).size(), 8u) << "eight channels enter by eight NICs";
  EXPECT_EQ(std::set<int>(r.netOut.begin(), r.netOut.end()).size(), 8u) << "and leave by eight";
  const std::vector<int> gpus = nvs.nodesOf(NodeType::kGpu);
  for (size_t c = 0; c < r.rings.size(); ++c)
    EXPECT_EQ(nvs.path(r.netIn[c], gpus[static_cast<size_t>(r.rings[c][0])]).type, PathType::kPix)
        << "channel " << c << " starts at a GPU under its NIC's switch";
  // Two GPUs share each NIC: a ring can enter and leave by the same one.
  for (const char* f : {"dgx1_cubemesh.xml", "multinic.xml", "pcie_5gpu_2nic.xml"}) {
    SCOPED_TRACE(f);
    Topology t = load(f);
    RingSearch s = searchRings(t, 4);
    EXPECT_EQ(s.netIn, s.netOut);
    const size_t nics = t.nodesOf(NodeType::kNet).size();
    EXPECT_EQ(std::set<int>(s.netIn.begin(), s.netIn.end()).size(), std::min<size_t>(nics, 4)) << "spread";
  }
}

TEST(Search, PcieRingsKeepSocketsTogether) {
  for (const char* f : {"pcie_dual_socket.xml", "multinic.xml", "pcie_5gpu_2nic.xml"}) {
    SCOPED_TRACE(f);
    RingSearch r = searchRings(load(f), 4);
    EXPECT_EQ(r.socketCrossings, 2);
    EXPECT_FALSE(r.nvlinkOnly);
  }
}

TEST(ChannelPlan, MultiNodeRingsAndTrees) {
  for (const char* f : {"dgx1_cubemesh.xml", "gpu1.xml", "gpu3_pcie.xml", "pcie_5gpu_2nic.xml"}) {
    for (int nodes : {1, 2, 3, 16, 17}) {
      SCOPED_TRACE(std::string(f) + " x" + std::to_string(nodes));
      ChannelPlan p = buildChannelPlan(load(f), nodes, 4);
      ASSERT_EQ(p.rings.size(), 4u);
      for (const auto& ring : p.rings) EXPECT_TRUE(isPermutation(ring, p.nranks));
      std::vector<std::set<int>> interior(2);
      for (size_t c = 0; c < p.trees.size(); ++c) {
        const RankTree& t = p.trees[c];
        int roots = 0;
        for (int r = 0; r < p.nranks; ++r) {
          roots += t.up[static_cast<size_t>(r)] < 0;
          EXPECT_LE(t.down[static_cast<size_t>(r)].size(), 3u);
          // A node is interior when its chain head has children on other nodes.
          for (int child : t.down[static_cast<size_t>(r)])
            if (child / p.ranksPerNode != r / p.ranksPerNode) interior[c % 2].insert(r / p.ranksPerNode);
        }
        EXPECT_EQ(roots, 1);
      }
      int both = 0;
      for (int n : interior[0]) both += interior[1].count(n) ? 1 : 0;
      EXPECT_LE(both, nodes % 2 == 1 && nodes > 1 ? 1 : 0);
    }
  }
}

TEST(Synthetic, HostBackendMachine) {
  Topology t = syntheticTopology(4);
  EXPECT_EQ(t.nodesOf(NodeType::kGpu).size(), 4u);
  EXPECT_EQ(gpuPath(t, 0, 3), PathType::kPhb);
  ChannelPlan p = buildChannelPlan(t, 3, 2);
  EXPECT_EQ(p.nranks, 12);
  for (const auto& ring : p.rings) EXPECT_TRUE(isPermutation(ring, 12));
}

}  // namespace
}  // namespace weft::graph
