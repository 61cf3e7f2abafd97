// Fusing per-rank views of a host, graph files (NCCL_GRAPH_FILE format) in
// and out, plans joined from per-host parts, and NCCL_P2P_LEVEL parsing.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "graph/graph_file.h"
#include "graph/p2p_level.h"
#include "graph/plan.h"
#include "graph/topo_fuse.h"
#include "graph/topo_xml.h"

namespace weft::graph {
namespace {

std::unique_ptr<XmlNode> xml(const std::string& text) {
  auto parsed = parseXml(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? std::move(parsed).value() : std::make_unique<XmlNode>();
}

Topology load(const std::string& name) {
  auto t = loadTopologyFile(std::string(WEFT_FIXTURES_DIR) + "/" + name);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : Topology();
}

// Each rank sees its own GPU (as CUDA device 0 of its process), the shared
// switch and the HCA; rank 1 also knows the second socket.
const char* kView0 = R"(<system version="1"><cpu numaid="0" vendor="GenuineIntel">
  <pci busid="0000:01:00.0" class="0x060400" link_width="16" link_speed="16.0 GT/s PCIe">
    <pci busid="0000:03:00.0" class="0x030200"><gpu dev="0" sm="80" rank="0"/></pci>
    <pci busid="0000:04:00.0" class="0x020000"><nic><net name="mlx5_0" dev="0" speed="200000" port="1"/></nic></pci>
  </pci></cpu></system>)";
const char* kView1 = R"(<system version="1"><cpu numaid="0" vendor="GenuineIntel">
  <pci busid="0000:01:00.0" class="0x060400" link_width="16" link_speed="16.0 GT/s PCIe">
    <pci busid="0000:05:00.0" class="0x030200"><gpu dev="0" sm="80" rank="1"/></pci>
    <pci busid="0000:04:00.0" class="0x020000"><nic><net name="mlx5_0" dev="0" speed="200000" port="1"/></nic></pci>
  </pci></cpu><cpu numaid="1" vendor="GenuineIntel"/></system>)";

TEST(Fuse, TwoRanksOneHost) {
  auto v0 = xml(kView0), v1 = xml(kView1);
  auto fused = fuseTopologyViews({v0.get(), v1.get()});
  auto topo = topologyFromXml(*fused);
  ASSERT_TRUE(topo.ok()) << topo.status().message();
  const Topology& t = topo.value();
  const auto gpus = t.nodesOf(NodeType::kGpu);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(t.nodesOf(NodeType::kNet).size(), 1u) << "the shared HCA once";
  EXPECT_EQ(t.nodesOf(NodeType::kCpu).size(), 2u);
  EXPECT_EQ(t.nodesOf(NodeType::kPci).size(), 1u) << "the shared switch once";
  EXPECT_EQ(t.path(gpus[0], gpus[1]).type, PathType::kPix);
  EXPECT_EQ(t.node(gpus[0]).rank, 0);
  EXPECT_EQ(t.node(gpus[1]).rank, 1);
  // Both processes called their GPU device 0: renumbered in bus-id order.
  EXPECT_EQ(t.node(gpus[0]).dev, 0);
  EXPECT_EQ(t.node(gpus[1]).dev, 1);
}

TEST(Fuse, DeterministicIdempotentAndFirstPlacementWins) {
  auto v0 = xml(kView0), v1 = xml(kView1);
  const std::string once = writeXml(*fuseTopologyViews({v0.get()}));
  EXPECT_EQ(writeXml(*fuseTopologyViews({v0.get(), v0.get()})), once) << "fusing a view with itself changes nothing";
  EXPECT_EQ(writeXml(*fuseTopologyViews({v0.get(), v1.get()})), writeXml(*fuseTopologyViews({v0.get(), v1.get()})));
  // A rank without hwloc places the GPU under the CPU: the first view's place stays.
  auto flat = xml(R"(<system version="1"><cpu numaid="0"><pci busid="0000:03:00.0" class="0x030200">
    <gpu dev="0" sm="80" rank="-1"/></pci></cpu></system>)");
  auto fused = fuseTopologyViews({v0.get(), flat.get()});
  EXPECT_EQ(gpuBusIds(*fused), std::vector<std::string>{"0000:03:00.0"});
  auto topo = topologyFromXml(*fused);
  ASSERT_TRUE(topo.ok());
  const auto gpus = topo.value().nodesOf(NodeType::kGpu);
  EXPECT_EQ(topo.value().node(topo.value().node(gpus[0]).parent).id, "0000:01:00.0");
  // A real rank replaces -1, whichever view comes first.
  auto reversed = topologyFromXml(*fuseTopologyViews({flat.get(), v0.get()}));
  ASSERT_TRUE(reversed.ok());
  EXPECT_EQ(reversed.value().node(reversed.value().nodesOf(NodeType::kGpu)[0]).rank, 0);
}

TEST(Fuse, KeepGpusAndSetRanks) {
  auto v0 = xml(kView0), v1 = xml(kView1);
  auto fused = fuseTopologyViews({v0.get(), v1.get()});
  keepGpus(fused.get(), {"0000:05:00.0"});
  EXPECT_EQ(gpuBusIds(*fused), std::vector<std::string>{"0000:05:00.0"});
  setGpuRanks(fused.get(), {{"0000:05:00.0", 7}});
  auto topo = topologyFromXml(*fused);
  ASSERT_TRUE(topo.ok());
  EXPECT_EQ(topo.value().node(topo.value().nodesOf(NodeType::kGpu)[0]).rank, 7);
  EXPECT_EQ(topo.value().nodesOf(NodeType::kNet).size(), 1u) << "NICs stay";
}

TEST(GraphFile, SearchedGraphsRoundTrip) {
  for (const char* f : {"dgx1_cubemesh.xml", "nvswitch8.xml", "pcie_dual_socket.xml", "multinic.xml", "gpu1.xml",
                        "gpu3_pcie.xml", "pcie_5gpu_2nic.xml"}) {
    SCOPED_TRACE(f);
    const Topology t = load(f);
    const RingSearch searched = searchRings(t, 4);
    auto parsed = parseXml(writeXml(*graphsToXml(t, searched)));
    ASSERT_TRUE(parsed.ok());
    auto graphs = graphsFromXml(*parsed.value(), t);
    ASSERT_TRUE(graphs.ok()) << graphs.status().message();
    EXPECT_EQ(graphs.value().rings.size(), 4u);
    EXPECT_EQ(graphs.value().trees.size(), 4u);
    const RingSearch imposed = imposeRings(t, 4, graphs.value());
    EXPECT_TRUE(imposed.imposed);
    EXPECT_EQ(imposed.rings, searched.rings);
    EXPECT_EQ(imposed.chains, searched.chains);
    EXPECT_EQ(imposed.netIn, searched.netIn);
    EXPECT_EQ(imposed.netOut, searched.netOut);
  }
}

TEST(GraphFile, NcclStyleFileWithHexDevsAndTreesOnly) {
  const Topology t = load("nvswitch8.xml");
  auto doc = xml(R"(<graphs version="1">
    <graph id="1" pattern="1" crossnic="0" nchannels="1" speedintra="40" speedinter="40" latencyinter="0"
           typeintra="NVL" typeinter="PIX" samechannels="1">
      <channel><net dev="0x3"/><gpu dev="0x3"/><gpu dev="0x1"/><gpu dev="0x0"/><gpu dev="0x2"/>
        <gpu dev="0x7"/><gpu dev="0x6"/><gpu dev="0x5"/><gpu dev="0x4"/><net dev="0x3"/></channel>
    </graph>
    <graph id="3" pattern="5"><channel><gpu dev="0"/></channel></graph>
  </graphs>)");
  auto graphs = graphsFromXml(*doc, t);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  const std::vector<int> order{3, 1, 0, 2, 7, 6, 5, 4};
  ASSERT_EQ(graphs.value().trees.size(), 1u);
  EXPECT_EQ(graphs.value().trees[0].gpus, order);
  EXPECT_EQ(graphs.value().rings.size(), 1u) << "rings follow the chains when only trees are given";
  const RingSearch r = imposeRings(t, 2, graphs.value());
  EXPECT_EQ(r.rings[1], order);
  EXPECT_EQ(t.node(r.netIn[0]).dev, 3);
}

TEST(GraphFile, ErrorsNameGraphChannelAndProblem) {
  const Topology t = load("gpu3_pcie.xml");
  auto missing = graphsFromXml(*xml(R"(<graphs><graph id="0"><channel><gpu dev="0"/><gpu dev="1"/><gpu dev="9"/>
    </channel></graph></graphs>)"),
                               t);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("graph 0 channel 0"), std::string::npos) << missing.status().message();
  EXPECT_NE(missing.status().message().find("dev \"9\""), std::string::npos) << missing.status().message();
  auto repeated = graphsFromXml(*xml(R"(<graphs><graph id="0"><channel><gpu dev="0"/></channel><channel>
    <gpu dev="0"/><gpu dev="0"/><gpu dev="1"/></channel></graph></graphs>)"),
                                t);
  ASSERT_FALSE(repeated.ok());
  EXPECT_NE(repeated.status().message().find("channel 0"), std::string::npos) << "one GPU of three";
  auto wrongRoot = graphsFromXml(*xml("<system/>"), t);
  ASSERT_FALSE(wrongRoot.ok());
  EXPECT_NE(wrongRoot.status().message().find("<graphs>"), std::string::npos);
}

TEST(Plan, HostsMayDifferInOrder) {
  HostChannels a, b;
  a.rings = {{0, 1, 2}, {2, 1, 0}};
  a.chains = a.rings;
  b.rings = {{5, 3, 4}, {4, 3, 5}};
  b.chains = b.rings;
  const ChannelPlan p = joinHosts({a, b}, 6);
  ASSERT_EQ(p.rings.size(), 2u);
  EXPECT_EQ(p.rings[0], (std::vector<int>{0, 1, 2, 5, 3, 4}));
  EXPECT_EQ(p.trees[0].up[0], -1) << "tree 0 is rooted at host 0's chain head";
  EXPECT_EQ(p.trees[0].up[5], 0) << "host 1's head hangs from host 0's head";
  EXPECT_EQ(p.trees[0].up[3], 5);
  EXPECT_EQ(p.trees[1].up[2], 4) << "tree 1 mirrors: host 1 is its root";
}

TEST(Plan, RanksSharingAGpuFollowEachOther) {
  RingSearch s;
  s.rings = {{1, 0}};
  s.chains = s.rings;
  const HostChannels h = hostChannels(s, {{0, 1}, {2}});
  EXPECT_EQ(h.rings[0], (std::vector<int>{2, 0, 1}));
}

TEST(P2pLevel, NcclSyntax) {
  const std::pair<const char*, PathType> good[] = {
      {"LOC", PathType::kLoc}, {"nvl", PathType::kNvl}, {"PIX", PathType::kPix}, {"PXB", PathType::kPxb},
      {"PHB", PathType::kPhb}, {"SYS", PathType::kSys}, {"0", PathType::kLoc},   {"1", PathType::kPix},
      {"2", PathType::kPxb},   {"3", PathType::kPhb},   {"4", PathType::kSys},   {"5", PathType::kSys}};
  for (const auto& [text, type] : good) {
    auto v = parseP2pLevel(text);
    ASSERT_TRUE(v.ok()) << text;
    ASSERT_TRUE(v.value().has_value()) << text;
    EXPECT_EQ(*v.value(), type) << text;
  }
  auto unset = parseP2pLevel("");
  ASSERT_TRUE(unset.ok());
  EXPECT_FALSE(unset.value().has_value());
  for (const char* bad : {"NET", "6", "-1", "fast", "PHB2"}) {
    auto v = parseP2pLevel(bad);
    ASSERT_FALSE(v.ok()) << bad;
    EXPECT_NE(v.status().message().find("NCCL_P2P_LEVEL"), std::string::npos);
    EXPECT_NE(v.status().message().find(std::string("\"") + bad + "\""), std::string::npos);
    EXPECT_NE(v.status().message().find("expected"), std::string::npos);
  }
}

TEST(P2pLevel, DefaultFollowsTheCpu) {
  EXPECT_EQ(defaultP2pLevel(load("dgx1_cubemesh.xml")), PathType::kPxb) << "Intel";
  EXPECT_EQ(defaultP2pLevel(load("multinic.xml")), PathType::kSys) << "AMD";
  EXPECT_EQ(defaultP2pLevel(syntheticTopology(2)), PathType::kSys);
}

}  // namespace
}  // namespace weft::graph
