// Merged IB network devices (NCCL_IB_MERGE_NICS): the grouping rule on its
// own, then the data path on the verbs emulation laid out as one dual-port
// NIC (emu0 and emu1: functions 0 and 1 of PCI device 0000:17:00) and one
// single-port NIC (emu2 at 0000:63:00.0). Network device 0 is emu0+emu1,
// device 1 is emu2.
#define WEFT_IB_PAIR_EMULATE "3"
#define WEFT_IB_PAIR_PCI                                                                          \
  "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0,/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.1," \
  "/sys/devices/pci0000:62/0000:62:01.0/0000:63:00.0"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ib_gdr_pair.h"
#include "ib_pair.h"
#include "net_test_util.h"
#include "transport/net/ib/ib_comm.h"
#include "transport/net/ib/ib_device.h"
#include "transport/net/ib/ib_emulation.h"

namespace weft::testing {
namespace {

namespace ib = transport::ib;
using Groups = std::vector<std::vector<int>>;

const std::string kNic = "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.";
const std::string kOtherNic = "/sys/devices/pci0000:62/0000:62:01.0/0000:63:00.";

ib::PortPlacement ibPort(const std::string& path) { return {path, false}; }
ib::PortPlacement rocePort(const std::string& path) { return {path, true}; }

TEST(IbMergeRule, PciPathWithoutTheFunction) {
  EXPECT_EQ(ib::pciPathWithoutFunction(kNic + "1"), kNic.substr(0, kNic.size() - 1));
  EXPECT_EQ(ib::pciPathWithoutFunction("0000:17:00.7"), "0000:17:00");
  EXPECT_EQ(ib::pciPathWithoutFunction(""), "");
  EXPECT_EQ(ib::pciPathWithoutFunction("/sys/devices/virtual/net"), "") << "not a PCI function";
  EXPECT_EQ(ib::pciPathWithoutFunction("/sys/devices/pci0000:00.1/virtual"), "") << "the dot is not in the last part";
  EXPECT_EQ(ib::pciMergeKey(kNic + "1", false), kNic.substr(0, kNic.size() - 1));
  EXPECT_EQ(ib::pciMergeKey(kNic + "1", true), kNic.substr(0, kNic.size() - 3));
  EXPECT_EQ(ib::pciMergeKey("", true), "");
}

TEST(IbMergeRule, TwoFunctionsOfOneNicMergeAndAnotherNicDoesNot) {
  const std::vector<ib::PortPlacement> ports = {ibPort(kNic + "0"), ibPort(kNic + "1"), ibPort(kOtherNic + "0")};
  EXPECT_EQ(ib::mergePorts(ports, true), (Groups{{0, 1}, {2}}));
  EXPECT_EQ(ib::mergePorts(ports, false), (Groups{{0}, {1}, {2}})) << "NCCL_IB_MERGE_NICS=0: one device per port";
}

TEST(IbMergeRule, WithoutMergeVfsOnlyTheFunctionMayDiffer) {
  // Device 01 on the same bus is another PCI device; bus 18 another NIC.
  const std::vector<ib::PortPlacement> ports = {
      ibPort("/sys/devices/pci0000:16/0000:17:00.0"), ibPort("/sys/devices/pci0000:16/0000:17:01.0"),
      ibPort("/sys/devices/pci0000:16/0000:18:00.1"), ibPort("/sys/devices/pci0000:16/0000:17:00.3")};
  EXPECT_EQ(ib::mergePorts(ports, true, false), (Groups{{0, 3}, {1}, {2}}));
  // NCCL_IB_MERGE_VFS=1 (the default): the device number may differ too
  // (virtual functions on one bus), the bus may not.
  EXPECT_EQ(ib::mergePorts(ports, true, true), (Groups{{0, 1, 3}, {2}}));
  // Two ports of one HCA (one PCI function) share the path: they merge too.
  EXPECT_EQ(ib::mergePorts({ibPort(kNic + "0"), ibPort(kNic + "0")}, true), (Groups{{0, 1}}));
}

TEST(IbMergeRule, DifferentLinkLayersStayApart) {
  const std::vector<ib::PortPlacement> ports = {ibPort(kNic + "0"), rocePort(kNic + "1"), rocePort(kNic + "2"),
                                                ibPort(kNic + "3")};
  EXPECT_EQ(ib::mergePorts(ports, true), (Groups{{0, 3}, {1, 2}}));
}

TEST(IbMergeRule, AtMostFourPortsPerDevice) {
  std::vector<ib::PortPlacement> ports;
  for (int f = 0; f < 6; ++f) ports.push_back(ibPort(kNic + std::to_string(f)));
  EXPECT_EQ(ib::mergePorts(ports, true), (Groups{{0, 1, 2, 3}, {4, 5}}));
  EXPECT_EQ(ib::mergePorts(ports, true, false, 2), (Groups{{0, 1}, {2, 3}, {4, 5}}));
}

TEST(IbMergeRule, PortsWithoutAPciPathAreNeverMerged) {
  EXPECT_EQ(ib::mergePorts({ibPort(""), ibPort(""), ibPort(kNic + "0")}, true), (Groups{{0}, {1}, {2}}));
}

// NCCL_IB_HCA filters ports before they are merged: a dual-port NIC with
// one port excluded is a one-port device (the probe filters, then merges:
// ib_probe.cc; the multirank test runs it end to end).
TEST(IbMergeRule, PortsLeftOutByIbHcaAreNotMerged) {
  const ib::HcaFilter filter = ib::parseHcaFilter("^mlx5_1");
  std::vector<ib::PortPlacement> selected;
  const std::vector<std::pair<std::string, std::string>> all = {
      {"mlx5_0", kNic + "0"}, {"mlx5_1", kNic + "1"}, {"mlx5_2", kOtherNic + "0"}};
  for (const auto& [name, path] : all)
    if (ib::hcaSelected(filter, name, 1)) selected.push_back(ibPort(path));
  EXPECT_EQ(ib::mergePorts(selected, true), (Groups{{0}, {1}}));
}

// ---- the emulated dual-port NIC ------------------------------------------------

TEST(IbMerge, TheDualPortNicIsOneDeviceWithTheSpeedOfBoth) {
  const weftNet_v8_t& api = ibApi();
  int ndev = 0;
  ASSERT_EQ(api.devices(&ndev), ncclSuccess);
  ASSERT_EQ(ndev, 2);
  weftNetProperties_v8_t merged{}, single{};
  ASSERT_EQ(api.getProperties(0, &merged), ncclSuccess);
  ASSERT_EQ(api.getProperties(1, &single), ncclSuccess);
  EXPECT_STREQ(merged.name, "emu0+emu1");
  EXPECT_EQ(merged.speed, 200000) << "two EDR x4 ports";
  EXPECT_STREQ(merged.pciPath, (kNic + "0").c_str()) << "the first port's";
  EXPECT_EQ(merged.port, 1);
  EXPECT_EQ(merged.guid, ib::ibPorts(nullptr)[0]->guid);
  EXPECT_EQ(merged.regIsGlobal, 1);
  EXPECT_STREQ(single.name, "emu2");
  EXPECT_EQ(single.speed, 100000);
  EXPECT_STREQ(single.pciPath, (kOtherNic + "0").c_str());
  ASSERT_EQ(ib::ibDevices(nullptr).size(), 2u);
  EXPECT_EQ(ib::ibDevices(nullptr)[0]->portCount(), 2);
}

// Sends messages of several sizes from `sender` to `receiver` and checks
// each byte; returns the bytes each emulated device wrote meanwhile.
std::vector<int64_t> exchange(int sender, int receiver, int qpsPerConnection, int expectedQps) {
  ScopedEnv qps("NCCL_IB_QPS_PER_CONNECTION", std::to_string(qpsPerConnection).c_str());
  IbPair p(sender, receiver);
  p.connect();
  EXPECT_EQ(static_cast<int>(static_cast<ib::IbComm*>(p.send)->qpNumbers().size()), expectedQps);
  EXPECT_EQ(static_cast<int>(static_cast<ib::IbComm*>(p.recv)->qpNumbers().size()), expectedQps);
  const ib::emu::Counters before = ib::emu::counters();
  uint64_t message = 100;
  for (int bytes : {0, 1, 129, 4096, 65537, (1 << 20) + 5}) {
    SCOPED_TRACE(::testing::Message() << bytes << " bytes from device " << sender << " to " << receiver);
    const std::vector<uint8_t> pattern = patternMessage(++message, bytes);
    std::copy(pattern.begin(), pattern.end(), p.sendBuf.begin());
    std::fill(p.recvBuf.begin(), p.recvBuf.end(), 0xee);
    void* r = p.postRecv(static_cast<int>(p.recvBuf.size()) - 64);
    void* s = p.postSend(bytes);
    EXPECT_TRUE(r && s);
    if (!r || !s) break;
    int sent = -1, received = -1;
    EXPECT_EQ(p.wait(s, &sent), ncclSuccess) << ibNetLastError();
    EXPECT_EQ(p.wait(r, &received), ncclSuccess) << ibNetLastError();
    EXPECT_EQ(received, bytes);
    EXPECT_EQ(firstMismatch(p.recvBuf.data(), message, bytes), -1);
    EXPECT_EQ(p.recvBuf[static_cast<size_t>(bytes)], 0xee) << "a byte written past the message";
  }
  const ib::emu::Counters after = ib::emu::counters();
  std::vector<int64_t> out;
  for (int d = 0; d < 3; ++d) out.push_back(after.bytesWrittenFrom[d] - before.bytesWrittenFrom[d]);
  return out;
}

TEST(IbMerge, BothPortsCarryTheDataOfAMergedConnection) {
  for (int qpc : {1, 3}) {
    SCOPED_TRACE(::testing::Message() << qpc << " QPs per connection");
    const std::vector<int64_t> written = exchange(0, 0, qpc, 2 * qpc);
    // Each port carries its QPs' stripes (and emu0 the receiver's FIFO writes).
    EXPECT_GT(written[0], 500000);
    EXPECT_GT(written[1], 500000);
    EXPECT_EQ(written[2], 0) << "emu2 is another device";
  }
}

TEST(IbMerge, SidesWithDifferentPortCountsPairTheirQpsRoundRobin) {
  // Two ports to one: QP 0 from emu0 and QP 1 from emu1, both to emu2.
  std::vector<int64_t> written = exchange(0, 1, 1, 2);
  EXPECT_GT(written[0], 500000);
  EXPECT_GT(written[1], 500000);
  EXPECT_GT(written[2], 0) << "the receiver's FIFO writes";
  // One port to two: both QPs from emu2, one to each of the receiver's ports.
  written = exchange(1, 0, 1, 2);
  EXPECT_GT(written[2], 1000000);
  EXPECT_EQ(written[1], 0) << "the receiver writes its FIFO from its port 0 only";
  EXPECT_GT(written[0], 0);
}

TEST(IbMerge, MemoryIsRegisteredOnEveryPortOnce) {
  IbPair p(0, 0);
  p.connect();
  std::vector<char> buffer(1 << 16);
  const ib::emu::Counters before = ib::emu::counters();
  void* first = nullptr;
  void* inside = nullptr;
  ASSERT_EQ(p.api.regMr(p.send, buffer.data(), buffer.size(), kNetPtrHost, &first), ncclSuccess);
  ASSERT_EQ(p.api.regMr(p.send, buffer.data() + 64, 100, kNetPtrHost, &inside), ncclSuccess);
  EXPECT_EQ(ib::emu::counters().memoryRegistrations - before.memoryRegistrations, 2) << "one per port";
  auto* handle = static_cast<ib::MrHandle*>(first);
  ASSERT_EQ(handle->count, 2);
  EXPECT_NE(handle->entries[0]->mr->rkey, handle->entries[1]->mr->rkey);
  EXPECT_EQ(portEntry(inside, 0), handle->entries[0]) << "port 0's cache";
  EXPECT_EQ(portEntry(inside, 1), handle->entries[1]) << "port 1's cache";
  for (void* mr : {first, inside}) EXPECT_EQ(p.api.deregMr(p.send, mr), ncclSuccess);
  EXPECT_EQ(ib::emu::counters().liveRegions, before.liveRegions);
}

TEST(IbMerge, FlushReadsThroughEveryPort) {
  GdrPair p(0, 0);
  p.connect();
  p.registerGpu();
  ASSERT_EQ(static_cast<ib::MrHandle*>(p.gpuMr)->count, 2);
  const int kBytes = 9000;
  const std::vector<uint8_t> pattern = patternMessage(9, kBytes);
  std::copy(pattern.begin(), pattern.end(), p.sendBuf.begin());
  void* r = p.receiveIntoGpu();
  void* s = p.postSend(kBytes);
  ASSERT_TRUE(r && s);
  int bytes = 0;
  ASSERT_EQ(p.wait(s, &bytes), ncclSuccess) << ibNetLastError();
  ASSERT_EQ(p.wait(r, &bytes), ncclSuccess) << ibNetLastError();
  EXPECT_EQ(firstMismatch(p.gpu.view + GdrPair::kOffset, 9, kBytes), -1) << "the message is not in the dma-buf";
  const int64_t readsBefore = ib::emu::counters().reads;
  void* flush = nullptr;
  ASSERT_EQ(p.flush(kBytes, p.gpuMr, &flush), ncclSuccess) << ibNetLastError();
  ASSERT_NE(flush, nullptr);
  ASSERT_EQ(p.wait(flush, &bytes), ncclSuccess) << ibNetLastError();
  EXPECT_EQ(ib::emu::counters().reads, readsBefore + 2) << "one loopback READ per port";
}

// A completion error names the port (physical device) and QP that failed.
TEST(IbMerge, ACompletionErrorNamesThePortOfTheFailedQp) {
  ScopedEnv timeout("NCCL_IB_TIMEOUT", "10");
  ScopedEnv retries("NCCL_IB_RETRY_CNT", "1");
  IbPair p(0, 0);
  p.connect();
  ASSERT_NE(p.postRecv(100000), nullptr);
  // The receiver's QP 1 (on emu1) vanishes; QP 0 (emu0) still answers.
  ib::emu::makeUnreachable(static_cast<ib::IbComm*>(p.recv)->qpNumbers()[1]);
  void* s = p.postSend(50000);
  ASSERT_NE(s, nullptr);
  int bytes = 0;
  EXPECT_EQ(p.wait(s, &bytes, 5), ncclRemoteError);
  const std::string why = ibNetLastError();
  const uint32_t qpn = static_cast<ib::IbComm*>(p.send)->qpNumbers()[1];
  EXPECT_TRUE(contains(why, "on emu1:1 QP " + std::to_string(qpn))) << why;
  EXPECT_TRUE(contains(why, "transport retry counter exceeded")) << why;
  EXPECT_TRUE(contains(why, "sending to ")) << why;
}

}  // namespace
}  // namespace weft::testing
