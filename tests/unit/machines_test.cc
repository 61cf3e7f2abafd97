// Every real machine in tests/fixtures/machines plans without error, and the
// plans keep their promises: rings at the best bottleneck any ring of the
// machine has, socket crossings at the minimum, channels on one NIC rail,
// tree chains headed next to their NIC, trees that span every rank.
#include <gtest/gtest.h>

#include <dirent.h>

#include <algorithm>
#include <cstdio>
#include <numeric>
#include <set>

#include "graph/channel_budget.h"
#include "graph/graph_file.h"
#include "graph/plan.h"
#include "graph/topo_fuse.h"
#include "graph/topo_xml.h"
#include "plan_checks.h"

namespace weft::graph {
namespace {

const std::string kDir = std::string(WEFT_FIXTURES_DIR) + "/machines";

struct Machine {
  std::string name;
  Topology topo;
};

// A vendor file without GPUs merges with its detected/ view, as
// NCCL_TOPO_FILE merges with detection.
Machine loadMachine(const std::string& name) {
  Machine m{name, {}};
  auto file = readXmlFile(kDir + "/" + name);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return m;
  std::unique_ptr<XmlNode> xml = std::move(file).value();
  if (!hasGpus(*xml)) {
    auto detected = readXmlFile(kDir + "/detected/" + name);
    EXPECT_TRUE(detected.ok()) << name << " has no GPU and no detected/ view";
    if (!detected.ok()) return m;
    xml = mergeTopologyFile(*xml, detected.value().get());
  }
  auto t = topologyFromXml(*xml);
  EXPECT_TRUE(t.ok()) << t.status().message();
  if (t.ok()) m.topo = std::move(t).value();
  return m;
}

std::vector<std::string> machineFiles() {
  std::vector<std::string> out;
  if (DIR* d = opendir(kDir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string n = e->d_name;
      if (n.size() > 4 && n.compare(n.size() - 4, 4, ".xml") == 0 && n.find("_graph") == std::string::npos)
        out.push_back(n);
    }
    closedir(d);
  }
  std::sort(out.begin(), out.end());
  return out;
}

int cpuOf(const Topology& t, int node) {
  while (node >= 0 && t.node(node).type != NodeType::kCpu) node = t.node(node).parent;
  return node;
}

double cycleBandwidth(const Topology& t, const std::vector<int>& gpus, const std::vector<int>& order) {
  double bw = kLocalBandwidth;
  for (size_t i = 0; order.size() > 1 && i < order.size(); ++i)
    bw = std::min(
        bw, t.path(gpus[static_cast<size_t>(order[i])], gpus[static_cast<size_t>(order[(i + 1) % order.size()])]).bw);
  return bw;
}

// The best bottleneck of any Hamiltonian cycle (exhaustive; up to 9 GPUs).
double bestCycleBandwidth(const Topology& t) {
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
  std::vector<int> order(gpus.size());
  std::iota(order.begin(), order.end(), 0);
  double best = 0;
  do best = std::max(best, cycleBandwidth(t, gpus, order));
  while (order.size() > 1 && std::next_permutation(order.begin() + 1, order.end()));
  return best;
}

// Generated machines: 1-4 sockets of Intel or AMD CPUs, 1-3 PCIe switches
// per socket each holding 1-2 GPUs and maybe a NIC, NVLink as none, pairs,
// a ring or an NVSwitch, GPU generations from sm_70 to sm_100. Deterministic.
std::string generateMachine(uint64_t seed) {
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  auto rnd = [&](int n) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    return static_cast<int>(x % static_cast<uint64_t>(n));
  };
  const int sms[] = {70, 80, 86, 90, 100};
  const int sm = sms[rnd(5)];
  const int sockets = 1 + rnd(4), nvlink = rnd(4);  // 0 none, 1 pairs, 2 ring, 3 NVSwitch
  const char* vendor = rnd(2) ? "GenuineIntel" : "AuthenticAMD";
  std::vector<std::string> bus;
  std::string body;
  int nets = 0, id = 1;
  for (int c = 0; c < sockets; ++c) {
    body += "<cpu numaid=\"" + std::to_string(c) + "\" arch=\"x86_64\" vendor=\"" + vendor +
            "\" familyid=\"6\" modelid=\"143\">";
    for (int sw = 1 + rnd(3); sw > 0; --sw) {
      char sb[32];
      std::snprintf(sb, sizeof(sb), "0000:%02x:00.0", id++);
      body += std::string("<pci busid=\"") + sb + "\" class=\"0x060400\" link_speed=\"" +
              (rnd(2) ? "32.0 GT/s PCIe" : "16.0 GT/s PCIe") + "\" link_width=\"16\">";
      for (int g = 1 + rnd(2); g > 0 && bus.size() < 8; --g) {
        std::snprintf(sb, sizeof(sb), "0000:%02x:00.0", id++);
        bus.push_back(sb);
        body += std::string("<pci busid=\"") + sb + "\" class=\"0x030200\" link_speed=\"16.0 GT/s PCIe\" " +
                "link_width=\"" + (rnd(3) ? "16" : "0") + "\"><gpu dev=\"" + std::to_string(bus.size() - 1) +
                "\" sm=\"" + std::to_string(sm) + "\" rank=\"" + std::to_string(bus.size() - 1) + "\">@" +
                std::to_string(bus.size() - 1) + "@</gpu></pci>";
      }
      if (rnd(2)) {
        std::snprintf(sb, sizeof(sb), "0000:%02x:00.0", id++);
        body += std::string("<pci busid=\"") + sb + "\" class=\"0x020700\" link_speed=\"16.0 GT/s PCIe\" " +
                "link_width=\"16\"><nic><net name=\"mlx5_" + std::to_string(nets) + "\" dev=\"" + std::to_string(nets) +
                "\" speed=\"" + (rnd(2) ? "200000" : "400000") + "\"/></nic></pci>";
        ++nets;
      }
      body += "</pci>";
    }
    body += "</cpu>";
  }
  const int n = static_cast<int>(bus.size());
  for (int g = 0; g < n; ++g) {
    std::string links;
    auto link = [&](int peer, int count) {
      links += "<nvlink target=\"" + bus[static_cast<size_t>(peer)] + "\" count=\"" + std::to_string(count) +
               "\" tclass=\"0x030200\"/>";
    };
    if (nvlink == 1 && (g ^ 1) < n) link(g ^ 1, 4);
    if (nvlink == 2 && n > 2) link((g + 1) % n, 2), link((g + n - 1) % n, 2);
    if (nvlink == 3) links = "<nvlink target=\"fffffff:ff:ff.0\" count=\"12\" tclass=\"0x068000\"/>";
    const std::string mark = "@" + std::to_string(g) + "@";
    body.replace(body.find(mark), mark.size(), links);
  }
  return "<system version=\"1\">" + body + "</system>";
}

std::vector<Machine> generatedMachines() {
  std::vector<Machine> out;
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    auto xml = parseXml(generateMachine(seed));
    EXPECT_TRUE(xml.ok()) << xml.status().message();
    if (!xml.ok()) continue;
    auto t = topologyFromXml(*xml.value());
    EXPECT_TRUE(t.ok()) << t.status().message();
    if (t.ok()) out.push_back({"generated " + std::to_string(seed), std::move(t).value()});
  }
  return out;
}

std::vector<Machine> allMachines() {
  std::vector<Machine> out;
  for (const std::string& f : machineFiles()) out.push_back(loadMachine(f));
  for (Machine& m : generatedMachines()) out.push_back(std::move(m));
  return out;
}

TEST(Machines, AtLeastTenRealFilesEachWithGpus) {
  const std::vector<std::string> files = machineFiles();
  EXPECT_GE(files.size(), 10u);
  for (const std::string& f : files) {
    SCOPED_TRACE(f);
    Machine m = loadMachine(f);
    const std::vector<int> gpus = m.topo.nodesOf(NodeType::kGpu);
    ASSERT_FALSE(gpus.empty());
    for (int a : gpus)
      for (int b : gpus) EXPECT_NE(m.topo.path(a, b).type, PathType::kDis);
  }
}

// The fastest ring: no Hamiltonian cycle of the machine has a better
// bottleneck than the searched rings (checked exhaustively up to 9 GPUs).
TEST(Machines, RingsUseTheFastestLinksThatFormARing) {
  for (const Machine& m : allMachines()) {
    SCOPED_TRACE(m.name);
    if (m.topo.nodesOf(NodeType::kGpu).size() > 9) continue;
    const RingSearch r = searchRings(m.topo, 4);
    EXPECT_DOUBLE_EQ(r.bwPerChannel, bestCycleBandwidth(m.topo));
  }
}

TEST(Machines, PcieRingsCrossEachSocketBoundaryOnce) {
  for (const Machine& m : allMachines()) {
    SCOPED_TRACE(m.name);
    const RingSearch r = searchRings(m.topo, 2);
    if (r.nvlinkOnly) continue;
    std::set<int> sockets;
    for (int g : m.topo.nodesOf(NodeType::kGpu)) sockets.insert(cpuOf(m.topo, g));
    EXPECT_EQ(r.socketCrossings, sockets.size() > 1 ? static_cast<int>(sockets.size()) : 0);
  }
}

// Rails: a channel leaves by the NIC it entered by, its first GPU next to
// that NIC and its last next to it or NVLink-adjacent to a GPU that is;
// channels spread over every NIC at the best class.
TEST(Machines, ChannelsStayOnOneRailAndSpreadOverNics) {
  for (const Machine& m : allMachines()) {
    const std::string& f = m.name;
    const std::vector<int> gpus = m.topo.nodesOf(NodeType::kGpu);
    if (m.topo.nodesOf(NodeType::kNet).empty()) continue;
    PathType best = PathType::kDis;
    for (size_t g = 0; g < gpus.size(); ++g) best = std::min(best, netClass(m.topo, static_cast<int>(g)));
    // The NICs nearest some GPU: the best class, and of those the fastest.
    std::set<int> railNets;
    for (int g : gpus) {
      double fastest = 0;
      for (int n : m.topo.nodesOf(NodeType::kNet))
        if (m.topo.path(n, g).type == best) fastest = std::max(fastest, m.topo.path(n, g).bw);
      for (int n : m.topo.nodesOf(NodeType::kNet))
        if (m.topo.path(n, g).type == best && m.topo.path(n, g).bw == fastest) railNets.insert(n);
    }
    for (int crossNic : {0, 2}) {
      SCOPED_TRACE(f + " NCCL_CROSS_NIC=" + std::to_string(crossNic));
      SearchOptions o;
      o.crossNic = crossNic;
      const RingSearch r = searchRings(m.topo, static_cast<int>(railNets.size()), o);
      for (size_t c = 0; c < r.rings.size(); ++c) {
        SCOPED_TRACE("channel " + std::to_string(c));
        ASSERT_GE(r.netIn[c], 0);
        EXPECT_EQ(m.topo.path(r.netIn[c], gpus[static_cast<size_t>(r.rings[c].front())]).type, best);
        const int last = r.rings[c].back();
        if (crossNic == 0) {
          EXPECT_EQ(r.netOut[c], r.netIn[c]);
        } else if (r.netOut[c] == r.netIn[c]) {  // on the rail: crossing would not have brought the end nearer
          EXPECT_TRUE(leavesByRail(m.topo, last, r.netOut[c]) || netClass(m.topo, last) != best);
        } else {  // crossed: only because the rail's NIC is not near the last GPU and another is
          EXPECT_FALSE(leavesByRail(m.topo, last, r.netIn[c]));
          EXPECT_EQ(m.topo.path(r.netOut[c], gpus[static_cast<size_t>(last)]).type, best);
        }
        // The tree's chain head is the ring's first GPU, next to the NIC.
        EXPECT_EQ(r.chains[c].front(), r.rings[c].front());
      }
      EXPECT_EQ(std::set<int>(r.netIn.begin(), r.netIn.end()).size(), railNets.size()) << "spread over every rail";
    }
  }
}

// On the rail-optimised machines staying on the rail never costs a ring
// end its NIC: every channel keeps its rail even when crossing is allowed.
TEST(Machines, RailOptimisedServersNeverCross) {
  for (const char* f :
       {"azure_ndv4_topo.xml", "azure_ndv5_topo.xml", "ibm_h100x8_vsi_width0.xml", "h800x8_nvswitch_8nic.xml"}) {
    SCOPED_TRACE(f);
    Machine m = loadMachine(f);
    const RingSearch r = searchRings(m.topo, 16);
    EXPECT_EQ(r.netIn, r.netOut);
    EXPECT_EQ(std::set<int>(r.netIn.begin(), r.netIn.end()).size(), 8u);
    EXPECT_TRUE(r.nvlinkOnly);
  }
}

TEST(Machines, EveryFixturePlansAcrossNodeCounts) {
  for (const Machine& m : allMachines()) {
    const std::string& f = m.name;
    const std::vector<int> local = localRanks(m.topo);
    for (int nodes : {1, 2, 3, 4, 16, 1024}) {
      SCOPED_TRACE(f + " x" + std::to_string(nodes));
      const ChannelBudget b = channelBudget(m.topo, searchRings(m.topo, 1), nodes, 1, 32);
      EXPECT_GE(b.channels, 2);
      EXPECT_LE(b.channels, 32);
      EXPECT_LE(b.bwIntra * b.searchChannels, b.capacity + 1e-9) << "channels within the links";
      const ChannelPlan p = buildChannelPlan(searchRings(m.topo, b.channels), local, nodes);
      ASSERT_EQ(static_cast<int>(p.rings.size()), b.channels);
      expectRingsAndTreesSpanRanks(p);
    }
  }
}

// Files without GPUs take the tree from the file and the devices from
// detection, matched by bus id: the GPUs sit under the file's switches and
// nothing detection-only is left behind.
TEST(Machines, PciOnlyFilesMergeWithDetection) {
  Machine m = loadMachine("azure_ndv4_topo.xml");
  EXPECT_EQ(m.topo.nodesOf(NodeType::kGpu).size(), 8u);
  EXPECT_EQ(m.topo.nodesOf(NodeType::kNet).size(), 8u);
  EXPECT_EQ(m.topo.nodesOf(NodeType::kCpu).size(), 4u) << "the file's four NUMA nodes, no extra one";
  for (int g : m.topo.nodesOf(NodeType::kGpu)) {
    EXPECT_EQ(m.topo.node(m.topo.node(g).parent).id.substr(0, 7), "ffff:ff") << "under the file's switch";
    EXPECT_EQ(m.topo.node(g).sm, 80);
  }
  // Each GPU shares its switch with a NIC: the GPU-NIC path is one switch.
  for (size_t g = 0; g < 8; ++g) EXPECT_EQ(netClass(m.topo, static_cast<int>(g)), PathType::kPix);
}

// NCCL's printed figures for the same kinds of links (an H200 VM's
// NCCL_DEBUG_SUBSYS=GRAPH log in NVIDIA/nccl-tests issue 256: PCI[48.0] for
// Gen5 x16, PCI[0.2] for a 2.5 GT/s x1 bridge, NVL[370.8] to the NVSwitch,
// NET[50.0] for a 400 Gb/s port) come out of the IBM H100 VM's file, whose
// devices report link_width="0".
TEST(Machines, LinkFiguresMatchNcclOnAVmFile) {
  Machine m = loadMachine("ibm_h100x8_vsi_width0.xml");
  const int gpu = m.topo.nodesOf(NodeType::kGpu)[0];
  for (const Link& l : m.topo.links(gpu)) {
    if (l.type == LinkType::kPci) {
      EXPECT_DOUBLE_EQ(l.bw, 48.0) << "width 0 read as x16, Gen5";
    }
    if (l.type == LinkType::kNvl) {
      EXPECT_NEAR(l.bw, 370.8, 1e-9);
    }
  }
  const int bridge = m.topo.node(gpu).parent;
  for (const Link& l : m.topo.links(bridge)) {
    if (m.topo.node(l.to).type == NodeType::kCpu) {
      EXPECT_DOUBLE_EQ(l.bw, 0.1875) << "a 2.5 GT/s x1 bridge";
    }
  }
  EXPECT_DOUBLE_EQ(m.topo.node(m.topo.nodesOf(NodeType::kNet)[0]).speedGbs, 25.0);  // 200 Gb/s ports here
}

// Ranks from the file: the L20 server numbers its GPUs' ranks across
// devices (dev 4 is rank 2); plans and printed rings speak in those ranks.
TEST(Machines, RanksFollowTheFile) {
  Machine m = loadMachine("l20x16_pcie_switch_ranks.xml");
  const std::vector<int> gpus = m.topo.nodesOf(NodeType::kGpu);
  const std::vector<int> local = localRanks(m.topo);
  for (size_t i = 0; i < gpus.size(); ++i) EXPECT_EQ(local[i], m.topo.node(gpus[i]).rank);
  const ChannelPlan p = buildChannelPlan(searchRings(m.topo, 2), local, 1);
  // Consecutive ranks of the ring are PCIe neighbours: a ring in ranks that
  // looked like it crossed sockets at every hop would cross 16 times.
  int crossings = 0;
  auto gpuOfRank = [&](int r) {
    return gpus[static_cast<size_t>(std::find(local.begin(), local.end(), r) - local.begin())];
  };
  for (size_t i = 0; i < p.rings[0].size(); ++i)
    crossings +=
        cpuOf(m.topo, gpuOfRank(p.rings[0][i])) != cpuOf(m.topo, gpuOfRank(p.rings[0][(i + 1) % p.rings[0].size()]));
  EXPECT_EQ(crossings, 2);
  EXPECT_EQ(channelLine(0, 2, {0, 1, 2, 3}), "Channel 00/02 : 0 1 2 3");
}

// Azure ships an NCCL graph file for its NC A100 v4 VM: it loads against
// the VM's topology file and imposes its two rings.
TEST(Machines, VendorGraphFileLoads) {
  Machine m = loadMachine("azure_ncv4_topo.xml");
  auto graphs = loadGraphFile(kDir + "/azure_ncv4_graph.xml", m.topo);
  ASSERT_TRUE(graphs.ok()) << graphs.status().message();
  ASSERT_EQ(graphs.value().rings.size(), 2u);
  const RingSearch r = imposeRings(m.topo, 4, graphs.value());
  EXPECT_EQ(r.rings[0], (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(r.rings[1], (std::vector<int>{0, 3, 2, 1}));
  EXPECT_DOUBLE_EQ(r.bwPerChannel, 12.0) << "NCCL's speedintra for this VM";
}

}  // namespace
}  // namespace weft::graph

namespace weft::graph {
namespace {

// The channel count follows NCCL's sizing of its ring graph (worked by hand
// from the speed lists): an H100 NVSwitch host's 370.8 GB/s fits 6 rings at
// 60 GB/s, doubled to 12 at 30 because one channel would move more than
// 25 GB/s, and twice that for the communicator; NCCL_MAX/MIN_NCHANNELS
// bound the result.
TEST(ChannelBudget, FromTheTopologyWithinTheLimits) {
  Machine h100 = loadMachine("ibm_h100x8_vsi_width0.xml");
  const RingSearch r = searchRings(h100.topo, 1);
  ChannelBudget b = channelBudget(h100.topo, r, 1, 1, 32);
  EXPECT_DOUBLE_EQ(b.capacity, 6 * 60.0) << "6 rings at 60 GB/s fill 18 links of 20.6";
  EXPECT_EQ(b.searchChannels, 12);
  EXPECT_DOUBLE_EQ(b.bwIntra, 30.0);
  EXPECT_EQ(b.channels, 24);
  EXPECT_EQ(channelBudget(h100.topo, r, 1, 1, 16).channels, 16) << "NCCL_MAX_NCHANNELS=16";
  EXPECT_EQ(channelBudget(h100.topo, r, 1, 32, 32).channels, 32) << "NCCL_MIN_NCHANNELS=32";
  // Across hosts: 25 GB/s per 200 Gb/s port, one rail per channel: 8 rails
  // at 24 GB/s.
  b = channelBudget(h100.topo, r, 2, 1, 32);
  EXPECT_EQ(b.searchChannels, 8);
  EXPECT_DOUBLE_EQ(b.bwInter, 24.0);
  EXPECT_EQ(b.channels, 16);
  // 400 Gb/s ports (NDv5): 7 channels at 48 GB/s; sm_90 across hosts above
  // 45 GB/s per channel doubles the communicator's channels again.
  Machine ndv5 = loadMachine("azure_ndv5_topo.xml");
  b = channelBudget(ndv5.topo, searchRings(ndv5.topo, 1), 2, 1, 32);
  EXPECT_EQ(b.searchChannels, 7);
  EXPECT_DOUBLE_EQ(b.bwInter, 48.0);
  EXPECT_EQ(b.channels, 28);
  // A PCIe VM whose links read 12 GB/s: one ring fills them.
  Machine ncv4 = loadMachine("azure_ncv4_topo.xml");
  b = channelBudget(ncv4.topo, searchRings(ncv4.topo, 1), 1, 1, 32);
  EXPECT_EQ(b.searchChannels, 1);
  EXPECT_DOUBLE_EQ(b.bwIntra, 12.0);
  EXPECT_EQ(b.channels, 2);
}

}  // namespace
}  // namespace weft::graph

namespace weft::graph {
namespace {

// Machines whose NCCL run was published with their topology: NCCL 2.27.3 /
// 2.29.7 logs and NCCL_GRAPH_DUMP_FILE graphs (sources in the fixtures'
// README). On each, Weft's channels are no fewer and no slower, and NCCL's
// graph file loads and imposes its rings.
TEST(ChannelBudget, NoFewerAndNoSlowerThanNcclWherePublished) {
  struct Published {
    const char* topo;
    const char* graph;
    int searchChannels;  // "Pattern 4, ... nChannels N" / the ring graph's nchannels
    double bw;           // its bw / speedintra
    int channels;        // "Channel xx/yy"
  };
  const Published kPublished[] = {
      {"perlmutter_a100x4_4nic.xml", "perlmutter_a100x4_graph.xml", 12, 20, 24},
      {"hgx_h200x8_socket_nic.xml", "hgx_h200x8_graph.xml", 12, 30, 24},
      {"hgx_b200x8_socket_nic.xml", "hgx_b200x8_graph.xml", 16, 45, 32},
  };
  for (const Published& p : kPublished) {
    SCOPED_TRACE(p.topo);
    Machine m = loadMachine(p.topo);
    const RingSearch r = searchRings(m.topo, 1);
    const ChannelBudget b = channelBudget(m.topo, r, 1, 1, 32);
    EXPECT_GE(b.searchChannels, p.searchChannels);
    EXPECT_GE(b.bwIntra, p.bw);
    EXPECT_GE(b.channels, p.channels);
    EXPECT_GE(b.searchChannels * b.bwIntra, p.searchChannels * p.bw) << "moves as much in total";
    auto graphs = loadGraphFile(kDir + "/" + p.graph, m.topo);
    ASSERT_TRUE(graphs.ok()) << graphs.status().message();
    EXPECT_EQ(static_cast<int>(graphs.value().rings.size()), p.searchChannels);
    const RingSearch imposed = imposeRings(m.topo, p.channels, graphs.value());
    EXPECT_TRUE(imposed.nvlinkOnly);
    EXPECT_DOUBLE_EQ(imposed.bwPerChannel, r.bwPerChannel) << "NCCL's rings and Weft's have one bottleneck";
  }
}

}  // namespace
}  // namespace weft::graph
