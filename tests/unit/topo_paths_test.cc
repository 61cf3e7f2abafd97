// Path classes as NCCL 2.27 prints them (P2C for a Grace GPU's NICs, PXN
// through an NVLink peer next to the NIC), and the DGX-1's hybrid cube
// mesh: direct NVLinks are NVL paths and the rings fill every NVLink, as
// NCCL's graph for that machine does.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "graph/channel_budget.h"
#include "graph/graph_file.h"
#include "graph/plan.h"
#include "graph/rails.h"
#include "graph/topo_fuse.h"
#include "graph/topo_xml.h"
#include "plan_checks.h"

namespace weft::graph {
namespace {

const std::string kDir = std::string(WEFT_FIXTURES_DIR) + "/machines";

// A fixture; a vendor file without GPUs merged with its detected/ view.
Topology load(const std::string& name) {
  auto file = readXmlFile(kDir + "/" + name);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return {};
  std::unique_ptr<XmlNode> xml = std::move(file).value();
  if (!hasGpus(*xml)) {
    auto detected = readXmlFile(kDir + "/detected/" + name);
    EXPECT_TRUE(detected.ok()) << name;
    if (!detected.ok()) return {};
    xml = mergeTopologyFile(*xml, detected.value().get());
  }
  auto t = topologyFromXml(*xml);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : Topology{};
}

Topology parse(const std::string& text) {
  auto xml = parseXml(text);
  EXPECT_TRUE(xml.ok()) << xml.status().message();
  auto t = topologyFromXml(*xml.value());
  EXPECT_TRUE(t.ok()) << t.status().message();
  return t.ok() ? std::move(t).value() : Topology{};
}

TEST(PathClasses, NamesAndOrderAreNcclsOf227) {
  const char* kNccl[] = {"LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS", "NET", "DIS"};
  for (int t = 0; t <= static_cast<int>(PathType::kDis); ++t) {
    EXPECT_STREQ(pathTypeName(static_cast<PathType>(t)), kNccl[t]);
    PathType back = PathType::kLoc;
    ASSERT_TRUE(parsePathType(kNccl[t], &back));
    EXPECT_EQ(static_cast<int>(back), t);
  }
  EXPECT_LT(PathType::kPxb, PathType::kP2c);
  EXPECT_LT(PathType::kPxn, PathType::kPhb);
}

// DGX Spark: the GPU reaches its CPU over C2C (345 GB/s) and both NICs hang
// from that CPU at PCIe Gen5 x4 (12 GB/s): P2C both ways, at 12 GB/s; the
// planner's physical class stays PHB.
TEST(PathClasses, GraceNicsAreP2c) {
  const Topology t = load("gb10_spark_c2c.xml");
  const int gpu = t.nodesOf(NodeType::kGpu).at(0);
  ASSERT_EQ(t.nodesOf(NodeType::kNet).size(), 2u);
  for (int net : t.nodesOf(NodeType::kNet)) {
    EXPECT_EQ(t.path(gpu, net).type, PathType::kPhb);
    EXPECT_EQ(t.ncclPath(gpu, net).type, PathType::kP2c);
    EXPECT_DOUBLE_EQ(t.ncclPath(gpu, net).bw, 12.0);
    EXPECT_EQ(t.ncclPath(net, gpu).type, PathType::kP2c);
    EXPECT_EQ(t.pxnPeer(gpu, net), -1);
  }
  EXPECT_NE(netPathsLine(t, gpu).find("(3/12.0/P2C)"), std::string::npos) << netPathsLine(t, gpu);
}

// H800 with one NIC per GPU behind NVSwitches: a GPU's own NIC is PIX, every
// other NIC PXN through the GPU next to it, at min(NVLink, that GPU's PCIe
// to the NIC) = 48 GB/s; physically (what the planner reads) those paths
// cross the CPU.
TEST(PathClasses, OtherRailsArePxnThroughTheirGpu) {
  const Topology t = load("h800x8_nvswitch_8nic.xml");
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu), nets = t.nodesOf(NodeType::kNet);
  ASSERT_EQ(nets.size(), 8u);
  for (int g : gpus) {
    int own = 0;
    for (int n : nets) {
      const Path p = t.ncclPath(g, n);
      if (p.type == PathType::kPix) {
        ++own;
        EXPECT_EQ(t.pxnPeer(g, n), -1);
        continue;
      }
      ASSERT_EQ(p.type, PathType::kPxn) << t.node(g).dev << " to " << t.node(n).id;
      const int peer = t.pxnPeer(g, n);
      ASSERT_GE(peer, 0);
      EXPECT_EQ(t.path(peer, n).type, PathType::kPix) << "the peer is the NIC's own GPU";
      EXPECT_EQ(t.path(g, peer).type, PathType::kNvl);
      EXPECT_DOUBLE_EQ(p.bw, std::min(t.path(g, peer).bw, t.path(peer, n).bw));
      EXPECT_DOUBLE_EQ(p.bw, 48.0);
      EXPECT_GE(t.path(g, n).type, PathType::kPhb) << "physical class unchanged";
      EXPECT_EQ(t.ncclPath(n, g).type, t.path(n, g).type) << "PXN is GPU to NET only";
    }
    EXPECT_EQ(own, 1);
  }
  EXPECT_NE(netPathsLine(t, gpus[0]).find("/PXN via GPU/1)"), std::string::npos) << netPathsLine(t, gpus[0]);
}

// Perlmutter's NICs hang off the CPU (PHB from the nearest GPU), so NCCL
// uses no PXN there: its published GRAPH log prints PHB 24.0 and SYS 16.0.
TEST(PathClasses, NoPxnWhenTheNicsGpuIsNotUnderItsSwitch) {
  const Topology t = load("perlmutter_a100x4_4nic.xml");
  for (int g : t.nodesOf(NodeType::kGpu)) {
    int phb = 0;
    for (int n : t.nodesOf(NodeType::kNet)) {
      const Path p = t.ncclPath(g, n);
      EXPECT_EQ(t.pxnPeer(g, n), -1);
      if (p.type == PathType::kPhb) {
        ++phb;
        EXPECT_DOUBLE_EQ(p.bw, 24.0);
      } else {
        EXPECT_EQ(p.type, PathType::kSys);
        EXPECT_DOUBLE_EQ(p.bw, 16.0);
      }
    }
    EXPECT_EQ(phb, 1);
  }
}

// GPU 0 is under the NIC's outer switch on a Gen3 x4 link (3 GB/s, PXB);
// GPU 1 shares the inner switch with the NIC (PIX, 24 GB/s). With an
// NVLink between them GPU 0 reaches the NIC faster through GPU 1: PXN at
// min(80, 24); without one it stays PXB.
std::string twoGpus(bool nvlink) {
  const std::string link = nvlink ? "<nvlink target=\"0000:03:00.0\" count=\"4\" tclass=\"0x030200\"/>" : "";
  const std::string back = nvlink ? "<nvlink target=\"0000:02:00.0\" count=\"4\" tclass=\"0x030200\"/>" : "";
  return "<system version=\"1\"><cpu numaid=\"0\" arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" "
         "modelid=\"143\"><pci busid=\"0000:01:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" "
         "link_width=\"16\"><pci busid=\"0000:02:00.0\" class=\"0x030200\" link_speed=\"8.0 GT/s PCIe\" "
         "link_width=\"4\"><gpu dev=\"0\" sm=\"80\" rank=\"0\">" +
         link +
         "</gpu></pci><pci busid=\"0000:04:00.0\" class=\"0x060400\" link_speed=\"16.0 GT/s PCIe\" "
         "link_width=\"16\"><pci busid=\"0000:03:00.0\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" "
         "link_width=\"16\"><gpu dev=\"1\" sm=\"80\" rank=\"1\">" +
         back +
         "</gpu></pci><pci busid=\"0000:05:00.0\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" "
         "link_width=\"16\"><nic><net name=\"mlx5_0\" dev=\"0\" speed=\"200000\"/></nic></pci></pci></pci>"
         "</cpu></system>";
}

TEST(PathClasses, PxnWhenTheNvlinkPeerIsFaster) {
  for (bool nvlink : {true, false}) {
    SCOPED_TRACE(nvlink ? "NVLink" : "no NVLink");
    const Topology t = parse(twoGpus(nvlink));
    const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
    const int net = t.nodesOf(NodeType::kNet).at(0);
    ASSERT_EQ(t.path(gpus[0], net).type, PathType::kPxb);
    EXPECT_DOUBLE_EQ(t.path(gpus[0], net).bw, 3.0);
    EXPECT_EQ(t.ncclPath(gpus[1], net).type, PathType::kPix);
    EXPECT_EQ(t.ncclPath(gpus[0], net).type, nvlink ? PathType::kPxn : PathType::kPxb);
    EXPECT_DOUBLE_EQ(t.ncclPath(gpus[0], net).bw, nvlink ? 24.0 : 3.0);
    EXPECT_EQ(t.pxnPeer(gpus[0], net), nvlink ? gpus[1] : -1);
  }
}

// DGX-1: each V100 has six NVLinks, doubled to two peers (40 GB/s) and
// single to two others (20 GB/s). A direct NVLink is the pair's path, NVL
// at that link's figure, even where a route through two GPUs over double
// links is wider; GPUs without one are NVB.
TEST(Dgx1, DirectNvlinksAreNvlAtTheirWidth) {
  const Topology t = load("dgx1_v100x8_cube_mesh.xml");
  const std::vector<int> g = t.nodesOf(NodeType::kGpu);
  ASSERT_EQ(g.size(), 8u);
  const std::map<std::pair<int, int>, double> kLinks = {
      {{0, 3}, 40}, {{0, 4}, 40}, {{1, 2}, 40}, {{1, 5}, 40}, {{2, 3}, 40}, {{4, 7}, 40}, {{5, 6}, 40}, {{6, 7}, 40},
      {{0, 1}, 20}, {{0, 2}, 20}, {{1, 3}, 20}, {{2, 6}, 20}, {{3, 7}, 20}, {{4, 5}, 20}, {{4, 6}, 20}, {{5, 7}, 20}};
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b) {
      if (a == b) continue;
      const auto it = kLinks.find({std::min(a, b), std::max(a, b)});
      const Path& p = t.path(g[static_cast<size_t>(a)], g[static_cast<size_t>(b)]);
      SCOPED_TRACE(std::to_string(a) + "-" + std::to_string(b));
      if (it != kLinks.end()) {
        EXPECT_EQ(p.type, PathType::kNvl);
        EXPECT_DOUBLE_EQ(p.bw, it->second);
        EXPECT_EQ(p.hops, 1);
      } else {
        EXPECT_EQ(p.type, PathType::kNvb);
      }
    }
}

// Rotates a cycle to start at GPU 0, for comparing rings as cycles.
std::vector<int> fromZero(std::vector<int> ring) {
  std::rotate(ring.begin(), std::find(ring.begin(), ring.end(), 0), ring.end());
  return ring;
}

// NCCL's graph for this machine holds 6 rings: the double-link ring twice
// each way and the single-link ring once each way, every NVLink used both
// ways. Weft sizes the same: 6 search channels at 20 GB/s (NCCL 2.27's
// sm_70 figure; the graph's 22 is its NCCL's), 12 channels, on the same
// rings, which load every directed NVLink exactly to its bandwidth.
TEST(Dgx1, RingsFillEveryNvlinkAsNcclsGraphDoes) {
  const Topology t = load("dgx1_v100x8_cube_mesh.xml");
  const RingSearch probe = searchRings(t, 1);
  EXPECT_DOUBLE_EQ(probe.bwPerChannel, 40.0) << "the fastest ring alone: double links";
  const ChannelBudget b = channelBudget(t, probe, 1, 1, 32);
  EXPECT_EQ(b.searchChannels, 6);
  EXPECT_DOUBLE_EQ(b.bwIntra, 20.0);
  EXPECT_DOUBLE_EQ(b.ringSpeed, 20.0);
  EXPECT_EQ(b.channels, 12);

  auto graphs = loadGraphFile(kDir + "/dgx1_v100x8_graph.xml", t);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  ASSERT_EQ(graphs.value().rings.size(), 6u);
  const RingSearch nccl = imposeRings(t, 6, graphs.value());
  EXPECT_TRUE(nccl.nvlinkOnly);
  EXPECT_DOUBLE_EQ(nccl.bwPerChannel, 20.0);
  EXPECT_GE(b.searchChannels, static_cast<int>(graphs.value().rings.size()));
  EXPECT_GE(b.bwIntra, nccl.bwPerChannel);

  SearchOptions o;
  o.ringSpeed = b.ringSpeed;
  const RingSearch r = searchRings(t, b.channels, o);
  ASSERT_EQ(static_cast<int>(r.rings.size()), 12);
  EXPECT_TRUE(r.nvlinkOnly);
  EXPECT_EQ(r.worstType, PathType::kNvl);
  EXPECT_DOUBLE_EQ(r.bwPerChannel, 20.0);
  std::multiset<std::vector<int>> ours, theirs;
  for (int c = 0; c < 6; ++c) {
    ours.insert(fromZero(r.rings[static_cast<size_t>(c)]));
    theirs.insert(fromZero(nccl.rings[static_cast<size_t>(c)]));
    EXPECT_EQ(r.rings[static_cast<size_t>(c) + 6], r.rings[static_cast<size_t>(c)]) << "each ring on two channels";
  }
  EXPECT_EQ(ours, theirs);
  // Every directed NVLink carries exactly its bandwidth at 20 GB/s a ring.
  std::map<std::pair<int, size_t>, double> load;
  const std::vector<int> g = t.nodesOf(NodeType::kGpu);
  for (int c = 0; c < 6; ++c) {
    const std::vector<int>& ring = r.rings[static_cast<size_t>(c)];
    for (size_t i = 0; i < ring.size(); ++i)
      for (const Hop& h : t.route(g[static_cast<size_t>(ring[i])], g[static_cast<size_t>(ring[(i + 1) % 8])]))
        load[{h.node, h.link}] += 20.0;
  }
  int nvlinks = 0;
  for (int gpu : g)
    for (size_t l = 0; l < t.links(gpu).size(); ++l)
      if (t.links(gpu)[l].type == LinkType::kNvl) {
        ++nvlinks;
        const double carried = load[{gpu, l}];
        EXPECT_DOUBLE_EQ(carried, t.links(gpu)[l].bw) << "GPU " << t.node(gpu).dev << " link " << l;
      }
  EXPECT_EQ(nvlinks, 8 * 4) << "four NVLinked peers per GPU";
}

// Whether some Hamiltonian cycle of the GPUs has NVL paths only (exhaustive).
bool hasNvlinkRing(const Topology& t) {
  const std::vector<int> g = t.nodesOf(NodeType::kGpu);
  if (g.size() < 2) return false;
  std::vector<int> order(g.size());
  std::iota(order.begin(), order.end(), 0);
  do {
    bool all = true;
    for (size_t i = 0; all && i < order.size(); ++i)
      all = t.path(g[static_cast<size_t>(order[i])], g[static_cast<size_t>(order[(i + 1) % order.size()])]).type ==
            PathType::kNvl;
    if (all) return true;
  } while (std::next_permutation(order.begin() + 1, order.end()));
  return false;
}

// On every real machine, with the rings the channel budget packed: where an
// NVLink ring exists no ring hop leaves NVLink (no PCIe, no SYS), the rings
// are permutations, the budget's channels fit the links, and trees span
// every rank across 1 to 16 hosts (1024 for the two meshes, whose rings
// the budget's speed changes).
TEST(Dgx1, EveryMachineKeepsItsRingsOnNvlinkAtTheBudgetsSpeed) {
  for (const char* f : {"dgx1_v100x8_cube_mesh.xml", "azure_ndv2_topo.xml", "azure_ndv4_topo.xml",
                        "azure_ndv5_topo.xml", "h800x8_nvswitch_8nic.xml", "hgx_b200x8_socket_nic.xml",
                        "hgx_h200x8_socket_nic.xml", "ibm_h100x8_vsi_width0.xml", "perlmutter_a100x4_4nic.xml",
                        "gb10_spark_c2c.xml", "rtx3090x8_dual_xeon_pcie.xml", "azure_ncv4_topo.xml"}) {
    const Topology t = load(f);
    const bool nvlinkRing = hasNvlinkRing(t);
    const bool mesh = std::string(f).find("dgx1") == 0 || std::string(f).find("ndv2") != std::string::npos;
    for (int nodes : {1, 2, 3, 16, 1024}) {
      if (nodes == 1024 && !mesh) continue;  // test_machines plans 1024 hosts of every machine
      SCOPED_TRACE(std::string(f) + " x" + std::to_string(nodes));
      const ChannelBudget b = channelBudget(t, searchRings(t, 1), nodes, 1, 32);
      EXPECT_LE(b.bwIntra * b.searchChannels, b.capacity + 1e-9);
      SearchOptions o;
      o.ringSpeed = b.ringSpeed;
      const RingSearch r = searchRings(t, b.channels, o);
      if (nvlinkRing) {
        EXPECT_TRUE(r.nvlinkOnly);
        EXPECT_EQ(r.worstType, PathType::kNvl);
      }
      const ChannelPlan p = buildChannelPlan(r, localRanks(t), nodes);
      ASSERT_EQ(static_cast<int>(p.rings.size()), b.channels);
      expectRingsAndTreesSpanRanks(p);
    }
  }
}

// The NVSwitch-less NDv2 (a DGX-1's mesh, from its detection view) gets
// the same six rings at 20 GB/s.
TEST(Dgx1, AzureNdv2HasTheSameMesh) {
  const Topology t = load("azure_ndv2_topo.xml");
  const ChannelBudget b = channelBudget(t, searchRings(t, 1), 1, 1, 32);
  EXPECT_EQ(b.searchChannels, 6);
  EXPECT_DOUBLE_EQ(b.bwIntra, 20.0);
}

}  // namespace
}  // namespace weft::graph
