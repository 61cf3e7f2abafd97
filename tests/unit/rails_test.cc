// NIC rails from the plan to the network's devices: the search's NET per
// channel and direction (graph/search.h), named by PCI bus id and name
// (graph/rails.h), matched to the devices a network plugin reports
// (transport/net/net_rails.h); spread by channel when nothing matches.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "graph/rails.h"
#include "graph/search.h"
#include "graph/topo_fuse.h"
#include "graph/topo_xml.h"
#include "transport/net/net_rails.h"
#include "transport/transport.h"

namespace weft::graph {
namespace {

const std::string kFixtures = WEFT_FIXTURES_DIR;

Topology load(const std::string& path) {
  auto file = readXmlFile(kFixtures + "/" + path);
  EXPECT_TRUE(file.ok()) << file.status().message();
  std::unique_ptr<XmlNode> xml = std::move(file).value();
  if (!hasGpus(*xml)) {  // a vendor file of the PCI tree, as NCCL_TOPO_FILE merges with detection
    const std::string name = path.substr(path.rfind('/') + 1);
    auto detected = readXmlFile(kFixtures + "/machines/detected/" + name);
    EXPECT_TRUE(detected.ok());
    xml = mergeTopologyFile(*xml, detected.value().get());
  }
  auto t = topologyFromXml(*xml);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return std::move(t).value();
}

// A network whose devices are the topology's NICs in reverse order, named
// differently (a plugin's names need not be the topology's) and found by
// their sysfs paths, as a plugin's getProperties reports them.
std::vector<NicIdentity> fakeDevicesByBus(const Topology& t) {
  std::vector<NetDeviceName> names;
  for (int net : t.nodesOf(NodeType::kNet)) {
    const NicIdentity nic = nicIdentity(t, net);
    names.push_back({"plugin-dev-" + nic.name, "/sys/devices/pci0000:00/0000:00:01.0/" + nic.busId, nic.port});
  }
  std::reverse(names.begin(), names.end());
  return nicsOfDevices(names);
}

transport::LinkSpec linkFor(int channel, const NicIdentity& nic) {
  transport::LinkSpec spec;
  spec.channel = channel;
  spec.nic = nic;
  return spec;
}

// Per channel: the device each direction of the channel's inter-node
// traffic uses on this host, and whether the plan chose it.
struct ChannelDevices {
  std::vector<int> in, out;
  bool allPlanned = true;
};

ChannelDevices devicesOf(const Topology& t, const RingSearch& r, const std::vector<NicIdentity>& devices) {
  ChannelDevices d;
  for (size_t c = 0; c < r.netIn.size(); ++c) {
    const int channel = static_cast<int>(c);
    const auto in = transport::chooseNetDevice(linkFor(channel, nicIdentity(t, r.netIn[c])), devices, "Fake");
    const auto out = transport::chooseNetDevice(linkFor(channel, nicIdentity(t, r.netOut[c])), devices, "Fake");
    d.in.push_back(in.dev);
    d.out.push_back(out.dev);
    d.allPlanned = d.allPlanned && in.planned && out.planned;
  }
  return d;
}

TEST(Rails, NicIdentityNamesTheNicsPciDeviceNameAndPort) {
  const Topology t = load("multinic.xml");
  const std::vector<int> nets = t.nodesOf(NodeType::kNet);
  ASSERT_EQ(nets.size(), 4u);
  const NicIdentity nic = nicIdentity(t, nets[2]);
  EXPECT_EQ(nic.name, "mlx5_2");
  EXPECT_EQ(nic.busId, "0000:63:00.0");
  EXPECT_EQ(nic.port, 1);
  EXPECT_EQ(nic.dev, 2);
  EXPECT_EQ(nicIdentity(t, -1).dev, -1);
  EXPECT_EQ(describeNic(nic), "mlx5_2 port 1, PCI 0000:63:00.0");
}

TEST(Rails, EachChannelUsesTheDeviceOfItsPlannedNic) {
  const Topology t = load("multinic.xml");
  const std::vector<NicIdentity> devices = fakeDevicesByBus(t);
  const RingSearch r = searchRings(t, 4);
  const ChannelDevices d = devicesOf(t, r, devices);
  EXPECT_TRUE(d.allPlanned);
  for (size_t c = 0; c < r.netIn.size(); ++c) {
    // The fake's device for the planned NIC is the one on its bus.
    EXPECT_EQ(devices[static_cast<size_t>(d.in[c])].busId, nicIdentity(t, r.netIn[c]).busId) << "channel " << c;
    EXPECT_EQ(devices[static_cast<size_t>(d.out[c])].busId, nicIdentity(t, r.netOut[c]).busId) << "channel " << c;
    EXPECT_EQ(d.in[c], d.out[c]) << "channel " << c << " enters and leaves by one NIC";
  }
  EXPECT_EQ(std::set<int>(d.in.begin(), d.in.end()).size(), 4u) << "four channels over four NICs";
}

// Real servers with one NIC per GPU: eight channels on eight devices, each
// entering and leaving by one (NCCL_CROSS_NIC=0, and the default 2).
TEST(Rails, EightNicServersSpreadChannelsOverEveryDeviceOnTheirRails) {
  for (const char* f :
       {"machines/h800x8_nvswitch_8nic.xml", "machines/azure_ndv5_topo.xml", "machines/azure_ndv4_topo.xml"}) {
    SCOPED_TRACE(f);
    const Topology t = load(f);
    const std::vector<NicIdentity> devices = fakeDevicesByBus(t);
    ASSERT_EQ(devices.size(), 8u);
    for (int crossNic : {0, 2}) {
      SearchOptions o;
      o.crossNic = crossNic;
      const ChannelDevices d = devicesOf(t, searchRings(t, 8, o), devices);
      EXPECT_TRUE(d.allPlanned);
      EXPECT_EQ(d.in, d.out) << "NCCL_CROSS_NIC=" << crossNic;
      EXPECT_EQ(std::set<int>(d.in.begin(), d.in.end()).size(), 8u) << "NCCL_CROSS_NIC=" << crossNic;
    }
  }
}

// Without PCI paths (a socket network on virtual interfaces) the name
// decides; ports of one HCA stay apart.
TEST(Rails, ByNameWhenTheDevicesHaveNoPciPath) {
  NicIdentity planned;
  planned.dev = 1;
  planned.name = "veth1";
  const std::vector<NicIdentity> devices = nicsOfDevices({{"veth0", "", 0}, {"veth1", "", 0}});
  const RailMatch m = matchNic(planned, devices);
  EXPECT_EQ(m.dev, 1);
  EXPECT_STREQ(m.by, "name");
  NicIdentity port2;
  port2.dev = 0;
  port2.name = "mlx5_0";
  port2.busId = "0000:23:00.0";
  port2.port = 2;
  const std::vector<NicIdentity> ports = nicsOfDevices(
      {{"mlx5_0", "/sys/devices/pci0000:20/0000:23:00.0", 1}, {"mlx5_0", "/sys/devices/pci0000:20/0000:23:00.0", 2}});
  EXPECT_EQ(matchNic(port2, ports).dev, 1);
  EXPECT_STREQ(matchNic(port2, ports).by, "PCI bus id");
}

// A virtio NIC's sysfs path ends below its PCI device.
TEST(Rails, TheBusIdIsTheLastOnThePciPath) {
  const std::vector<NicIdentity> d =
      nicsOfDevices({{"eth0", "/sys/devices/pci0000:00/0000:00:03.0/virtio2", 0}, {"eth1", "", 0}});
  EXPECT_EQ(d[0].busId, "0000:00:03.0");
  EXPECT_EQ(d[1].busId, "");
  EXPECT_EQ(d[1].dev, 1);
}

// No match (the plan's NIC is not among the devices, or the plan names no
// NIC): the channel number modulo the device count, so channels still
// spread over every device.
TEST(Rails, FallsBackToSpreadingByChannel) {
  const Topology t = load("multinic.xml");
  const std::vector<NicIdentity> other = nicsOfDevices({{"eth0", "", 0}, {"eth1", "", 0}, {"eth2", "", 0}});
  const NicIdentity planned = nicIdentity(t, t.nodesOf(NodeType::kNet)[3]);
  EXPECT_EQ(matchNic(planned, other).dev, -1);
  for (int channel = 0; channel < 6; ++channel) {
    const auto choice = transport::chooseNetDevice(linkFor(channel, planned), other, "Fake");
    EXPECT_FALSE(choice.planned);
    EXPECT_EQ(choice.dev, channel % 3);
    EXPECT_EQ(choice.name, "eth" + std::to_string(channel % 3));
    EXPECT_EQ(transport::chooseNetDevice(linkFor(channel, NicIdentity{}), other, "Fake").dev, channel % 3);
  }
  EXPECT_EQ(transport::chooseNetDevice(linkFor(5, planned), {}, "Fake").dev, 0) << "no devices: no crash";
}

// Links the plan does not route use the NICs nearest the rank's GPU,
// spread by channel.
TEST(Rails, UnplannedLinksUseTheNicsNearestTheGpu) {
  const Topology t = load("multinic.xml");
  const std::vector<int> gpus = t.nodesOf(NodeType::kGpu);
  auto nameOf = [&](int gpu, int channel) { return nicIdentity(t, nearestNet(t, gpu, channel)).name; };
  EXPECT_EQ(nameOf(gpus[0], 0), "mlx5_0");
  EXPECT_EQ(nameOf(gpus[0], 1), "mlx5_1");
  EXPECT_EQ(nameOf(gpus[0], 2), "mlx5_0");
  EXPECT_EQ(nameOf(gpus[3], 0), "mlx5_2");
  EXPECT_EQ(nameOf(gpus[3], 1), "mlx5_3");
  EXPECT_EQ(nearestNet(t, -1, 0), -1);
  Topology bare;
  Node gpu = makeNode(NodeType::kGpu, "0000:01:00.0");
  const int g = bare.addNode(gpu);
  bare.computePaths();
  EXPECT_EQ(nearestNet(bare, g, 3), -1) << "no NET at all";
}

// The host backend's machine: one NIC per interface the socket network
// uses, so the plan's NICs are its devices by name.
TEST(Rails, SyntheticHostHasOneNicPerInterface) {
  const Topology t = syntheticTopology(2, 8.0, 1.25, {"wa0", "wb0"});
  const RingSearch r = searchRings(t, 4);
  const std::vector<NicIdentity> devices = nicsOfDevices({{"wa0", "", 0}, {"wb0", "", 0}});
  const ChannelDevices d = devicesOf(t, r, devices);
  EXPECT_TRUE(d.allPlanned);
  EXPECT_EQ(d.in, d.out);
  EXPECT_EQ(std::set<int>(d.in.begin(), d.in.end()).size(), 2u) << "channels over both interfaces";
  EXPECT_EQ(syntheticTopology(2).nodesOf(NodeType::kNet).size(), 1u);
}

}  // namespace
}  // namespace weft::graph
