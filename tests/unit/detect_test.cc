// Detection without the hardware: sysfs helpers on a fake tree, hwloc on an
// XML export (tests/fixtures/hwloc), the CUDA/NVML logic on fakes, and the
// whole pipeline from those to a Topology through topologyFromXml.
#include <gtest/gtest.h>

#include "graph/detect.h"
#include "graph/gpu_probe.h"
#include "graph/machine.h"
#include "graph/nic_probe.h"
#include "graph/topo_xml.h"
#include "unit/fake_gpu.h"
#include "unit/fake_sysfs.h"

namespace weft::graph {
namespace {

using test::FakeCuda;
using test::FakeNvml;
using test::FakeSysfs;

const std::string kHwlocXml = std::string(WEFT_FIXTURES_DIR) + "/hwloc/two_socket.xml";

TEST(BusId, NormalisesEverySpelling) {
  EXPECT_EQ(normalizeBusId("00000000:1B:00.0"), "0000:1b:00.0");  // NVML
  EXPECT_EQ(normalizeBusId("0000:1B:00.0"), "0000:1b:00.0");      // CUDA driver
  EXPECT_EQ(normalizeBusId("0000:1b:00.1"), "0000:1b:00.1");      // sysfs
  EXPECT_EQ(normalizeBusId("pci0000:00"), "");
  EXPECT_EQ(normalizeBusId("0000:1b:00.0x"), "");
  EXPECT_EQ(normalizeBusId("0000:1b:40.0"), "") << "device numbers stop at 0x1f";
}

TEST(BusId, PathComponents) {
  const auto ids = busIdsInPath("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
  ASSERT_EQ(ids.size(), 1u);
  EXPECT_EQ(ids[0], "0000:00:03.0");
  EXPECT_EQ(busIdsInPath("devices/virtual/net/lo").size(), 0u);
}

TEST(PciSwitches, OneNodePerSwitchAndNoRootPort) {
  // device <- downstream port <- upstream port <- root port
  EXPECT_EQ(switchesOf({"dsp", "usp", "rp"}), std::vector<std::string>{"usp"});
  EXPECT_EQ(switchesOf({"rp"}), std::vector<std::string>{});
  EXPECT_EQ(switchesOf({"dsp2", "usp2", "dsp1", "usp1", "rp"}), (std::vector<std::string>{"usp2", "usp1"}));
}

TEST(Sysfs, MachineFromFakeTree) {
  FakeSysfs fs;
  fs.file("devices/system/node/node0/cpumap", "00000003");
  fs.file("devices/system/node/node1/cpumap", "0000000c");
  fs.pciDevice("pci0000:00/0000:00:01.0", {{"class", "0x060400"}});
  fs.pciDevice("pci0000:00/0000:00:01.0/0000:01:00.0", {{"class", "0x060400"}, {"max_link_width", "16"}});
  fs.pciDevice("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0");
  fs.pciDevice("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0/0000:03:00.0",
               {{"class", "0x030200"}, {"numa_node", "1"}, {"max_link_speed", "16.0 GT/s PCIe"}});
  auto machine = sysfsMachine(Sysfs(fs.root()));
  const auto cpus = machine->cpus();
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(cpus[1].numa, 1);
  EXPECT_EQ(cpus[1].affinity, "0000000c");
  PciPlace place;
  ASSERT_TRUE(machine->locate("0000:03:00.0", &place));
  EXPECT_EQ(place.numa, 1);
  ASSERT_EQ(place.switches.size(), 1u);
  EXPECT_EQ(place.switches[0].busId, "0000:01:00.0");
  EXPECT_EQ(place.switches[0].linkWidth, "16");
  EXPECT_EQ(place.self.cls, "0x030200");
  EXPECT_EQ(place.self.linkSpeed, "16.0 GT/s PCIe");
  EXPECT_FALSE(machine->locate("0000:99:00.0", &place));
}

TEST(Hwloc, MachineFromXmlExport) {
  if (!hwlocBuilt()) GTEST_SKIP() << "built without hwloc";
  FakeSysfs empty;
  auto machine = hwlocMachine(kHwlocXml, Sysfs(empty.root()));
  ASSERT_TRUE(machine.ok()) << machine.status().message();
  const auto cpus = machine.value()->cpus();
  ASSERT_EQ(cpus.size(), 2u);
  EXPECT_EQ(cpus[0].vendor, "GenuineIntel");
  EXPECT_EQ(cpus[0].model, "85");
  EXPECT_EQ(cpus[1].affinity, "0000000c");
  PciPlace gpu;
  ASSERT_TRUE(machine.value()->locate("0000:03:00.0", &gpu));
  EXPECT_EQ(gpu.numa, 0);
  ASSERT_EQ(gpu.switches.size(), 1u) << "root port dropped, switch ports merged";
  EXPECT_EQ(gpu.switches[0].busId, "0000:01:00.0");
  EXPECT_EQ(gpu.self.cls, "0x030200");
  EXPECT_EQ(gpu.self.linkWidth, "16");
  EXPECT_EQ(gpu.self.linkSpeed, "8.0 GT/s PCIe") << "15.75 GB/s is x16 Gen3";
  PciPlace far;
  ASSERT_TRUE(machine.value()->locate("0000:81:00.0", &far));
  EXPECT_EQ(far.numa, 1);
  EXPECT_TRUE(far.switches.empty());
  EXPECT_EQ(far.self.linkSpeed, "16.0 GT/s PCIe");
}

TEST(Nics, InfinibandPortsAndSocketInterfaces) {
  FakeSysfs fs;
  fs.pciDevice("pci0000:00/0000:00:01.0/0000:04:00.0", {{"numa_node", "0"}});
  fs.link("class/infiniband/mlx5_0/device", "../../../devices/pci0000:00/0000:00:01.0/0000:04:00.0");
  fs.file("class/infiniband/mlx5_0/node_guid", "0c42:a103:0016:8ec6");
  fs.file("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
  fs.file("class/infiniband/mlx5_0/ports/1/rate", "200 Gb/sec (4X HDR)");
  fs.file("class/infiniband/mlx5_0/ports/2/state", "1: DOWN");
  const auto ib = probeIbNets(Sysfs(fs.root()));
  ASSERT_EQ(ib.size(), 1u) << "the port that is down carries nothing";
  EXPECT_EQ(ib[0].speedMbps, 200000);
  EXPECT_EQ(ib[0].busId, "0000:04:00.0");
  EXPECT_EQ(ib[0].guid, "0x0c42a10300168ec6");

  fs.pciDevice("pci0000:00/0000:00:03.0");
  fs.dir("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
  fs.link("class/net/eth0", "../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
  fs.link("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device", "../../../virtio2");
  fs.file("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/speed", "-1");
  fs.dir("devices/virtual/net/lo");
  fs.link("class/net/lo", "../../devices/virtual/net/lo");
  const auto socks = probeSocketNets(Sysfs(fs.root()), {"eth0", "lo", "absent0"});
  ASSERT_EQ(socks.size(), 2u);
  EXPECT_EQ(socks[0].busId, "0000:00:03.0") << "a virtio NIC is the PCI device above it";
  EXPECT_EQ(socks[0].speedMbps, kDefaultNetSpeedMbps);
  EXPECT_EQ(socks[1].busId, "") << "loopback is virtual";
  EXPECT_EQ(parseIbRateMbps("100 Gb/sec (4X EDR)"), 100000);
  EXPECT_EQ(parseIbRateMbps("garbage"), 0);
}

// A DGX-1-like pair: GPU A has two links to B and one to a POWER CPU; B one
// inactive link and one without P2P.
TEST(GpuProbe, NvlinksGroupedByFarEnd) {
  FakeCuda cuda;
  cuda.gpus = {{"0000:1B:00.0", 7, 0}, {"0000:1C:00.0", 7, 0}};
  FakeNvml nvml;
  nvml.devices = {"0000:1b:00.0", "0000:1c:00.0"};
  nvml.links["0000:1b:00.0"] = {{"0000:1c:00.0"}, {"0000:1c:00.0"}, {"0000:00:00.0", FakeNvml::kRemoteIbmNpu}};
  nvml.links["0000:1c:00.0"] = {{"0000:1b:00.0"},
                                {"0000:1b:00.0", FakeNvml::kRemoteGpu, false},
                                {"0000:1b:00.0", FakeNvml::kRemoteGpu, true, false}};
  GpuProbeResult r = probeGpus(cuda, &nvml, {});
  ASSERT_EQ(r.gpus.size(), 2u) << r.note;
  EXPECT_EQ(r.gpus[0].busId, "0000:1b:00.0");
  EXPECT_EQ(r.gpus[0].sm, 70);
  ASSERT_EQ(r.gpus[0].nvlinks.size(), 2u);
  EXPECT_EQ(r.gpus[0].nvlinks[0].target, "0000:1c:00.0");
  EXPECT_EQ(r.gpus[0].nvlinks[0].count, 2);
  EXPECT_EQ(r.gpus[0].nvlinks[0].tclass, kNvlinkGpuClass);
  EXPECT_EQ(r.gpus[0].nvlinks[1].tclass, kNvlinkCpuClass);
  ASSERT_EQ(r.gpus[1].nvlinks.size(), 1u);
  EXPECT_EQ(r.gpus[1].nvlinks[0].count, 1) << "inactive and non-P2P links do not count";
  EXPECT_EQ(nvml.initialised, 0) << "every nvmlInit is matched by nvmlShutdown";
  // Only the ordinals asked for.
  GpuProbeResult one = probeGpus(cuda, &nvml, {1});
  ASSERT_EQ(one.gpus.size(), 1u);
  EXPECT_EQ(one.gpus[0].ordinal, 1);
  EXPECT_EQ(one.gpus[0].busId, "0000:1c:00.0");
}

// NVSwitch box: 18 links per GPU spread over 4 switches. An older driver
// cannot name the far end: a GPU NVML knows is a GPU, the rest switches.
TEST(GpuProbe, NvswitchesWithAndWithoutRemoteType) {
  FakeCuda cuda;
  FakeNvml nvml;
  const char* switches[] = {"0000:c1:00.0", "0000:c2:00.0", "0000:c3:00.0", "0000:c4:00.0"};
  for (int g = 0; g < 2; ++g) {
    char bus[16];
    std::snprintf(bus, sizeof(bus), "0000:%02X:00.0", 0x19 + 0x10 * g);
    cuda.gpus.push_back({bus, 9, 0});
    nvml.devices.push_back(normalizeBusId(bus));
    for (int l = 0; l < 18; ++l) nvml.links[normalizeBusId(bus)].push_back({switches[l % 4], FakeNvml::kRemoteSwitch});
  }
  for (bool remoteType : {true, false}) {
    nvml.hasRemoteType = remoteType;
    GpuProbeResult r = probeGpus(cuda, &nvml, {});
    ASSERT_EQ(r.gpus.size(), 2u);
    EXPECT_EQ(r.gpus[1].sm, 90);
    ASSERT_EQ(r.gpus[1].nvlinks.size(), 4u);
    int total = 0;
    for (const NvlinkInfo& l : r.gpus[1].nvlinks) {
      EXPECT_EQ(l.tclass, kNvlinkSwitchClass) << "remote type " << remoteType;
      total += l.count;
    }
    EXPECT_EQ(total, 18);
  }
}

TEST(GpuProbe, NoDriverNoGpus) {
  FakeCuda cuda;
  cuda.gpus = {{"0000:1b:00.0"}};
  cuda.initResult = 100;  // CUDA_ERROR_NO_DEVICE
  GpuProbeResult r = probeGpus(cuda, nullptr, {});
  EXPECT_TRUE(r.gpus.empty());
  EXPECT_NE(r.note.find("cuInit"), std::string::npos);
  cuda.initResult = 0;
  GpuProbeResult noNvml = probeGpus(cuda, nullptr, {});
  ASSERT_EQ(noNvml.gpus.size(), 1u);
  EXPECT_TRUE(noNvml.gpus[0].nvlinks.empty());
  EXPECT_NE(noNvml.note.find("NVML"), std::string::npos);
}

// The whole pipeline on the two-socket machine: hwloc XML, fake sysfs with
// the HCA, fake driver with two GPUs joined by NVLink.
class DetectPipeline : public ::testing::Test {
 protected:
  void SetUp() override {
    fs_.pciDevice("pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0", {{"numa_node", "0"}});
    fs_.link("class/infiniband/mlx5_0/device",
             "../../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0");
    fs_.file("class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE");
    fs_.file("class/infiniband/mlx5_0/ports/1/rate", "100 Gb/sec (4X EDR)");
    cuda_.gpus = {{"0000:03:00.0", 7, 0}, {"0000:81:00.0", 7, 0}};
    nvml_.devices = {"0000:03:00.0", "0000:81:00.0"};
    nvml_.links["0000:03:00.0"] = {{"0000:81:00.0"}, {"0000:81:00.0"}};
    nvml_.links["0000:81:00.0"] = {{"0000:03:00.0"}, {"0000:03:00.0"}};
    options_.sysfsRoot = fs_.root();
    options_.hwlocXml = kHwlocXml;
    options_.cuda = &cuda_;
    options_.nvml = &nvml_;
    options_.loadLibraries = false;
  }
  FakeSysfs fs_;
  FakeCuda cuda_;
  FakeNvml nvml_;
  DetectOptions options_;
};

TEST_F(DetectPipeline, DetectedXmlBecomesTheSameModelAsAFile) {
  if (!hwlocBuilt()) GTEST_SKIP() << "built without hwloc";
  auto detected = detectSystem(options_);
  ASSERT_TRUE(detected.ok()) << detected.status().message();
  EXPECT_EQ(detected.value().machineSource, "hwloc");
  EXPECT_EQ(detected.value().gpus, 2);
  EXPECT_EQ(detected.value().nets, 1);
  auto topo = topologyFromXml(*detected.value().xml);
  ASSERT_TRUE(topo.ok()) << topo.status().message();
  const Topology& t = topo.value();
  const auto gpus = t.nodesOf(NodeType::kGpu), nets = t.nodesOf(NodeType::kNet);
  ASSERT_EQ(gpus.size(), 2u);
  ASSERT_EQ(nets.size(), 1u);
  EXPECT_EQ(t.node(gpus[0]).sm, 70);
  EXPECT_EQ(t.path(gpus[0], gpus[1]).type, PathType::kNvl) << "the NVLinks were placed";
  EXPECT_EQ(t.path(nets[0], gpus[0]).type, PathType::kPix) << "GPU and HCA share the switch";
  EXPECT_EQ(t.path(nets[0], gpus[1]).type, PathType::kSys) << "the other socket";
  EXPECT_DOUBLE_EQ(t.node(nets[0]).speedGbs, 12.5) << "the port's 100 Gb/s";
  EXPECT_DOUBLE_EQ(t.path(nets[0], gpus[0]).bw, 12.0) << "bounded by the Gen3 x16 links";
  // Written and read back: the same text (a topology file of this machine).
  const std::string text = writeXml(*detected.value().xml);
  auto reread = parseXml(text);
  ASSERT_TRUE(reread.ok());
  auto again = topologyFromXml(*reread.value());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(writeXml(*topologyToXml(again.value())), writeXml(*topologyToXml(t)));
}

TEST_F(DetectPipeline, OneRankDescribesOnlyItsGpuAndFallsBackToSysfs) {
  options_.cudaDevices = {1};
  options_.rank = 5;
  options_.useHwloc = false;
  // sysfs only knows the HCA: the GPU lands under the first CPU.
  auto detected = detectSystem(options_);
  ASSERT_TRUE(detected.ok());
  EXPECT_EQ(detected.value().machineSource, "sysfs");
  auto topo = topologyFromXml(*detected.value().xml);
  ASSERT_TRUE(topo.ok());
  const auto gpus = topo.value().nodesOf(NodeType::kGpu);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(topo.value().node(gpus[0]).id, "0000:81:00.0");
  EXPECT_EQ(topo.value().node(gpus[0]).rank, 5);
}

}  // namespace
}  // namespace weft::graph
