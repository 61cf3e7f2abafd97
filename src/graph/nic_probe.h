// Network devices from sysfs: InfiniBand/RoCE HCAs (class/infiniband, one
// net per active port) or, when there are none, the socket interfaces the
// caller selected (class/net), each with its speed and its PCI device. A
// virtual interface (lo, veth, a bridge) has no PCI device.
#pragma once

#include <string>
#include <vector>

#include "graph/sysfs.h"

namespace weft::graph {

struct NetInfo {
  std::string name;  // "mlx5_0", "eth0"
  int port = 1;
  int speedMbps = 0;  // Mb/s
  std::string guid;   // "0x..."
  std::string busId;  // normalised PCI bus id; empty: virtual
  int numa = -1;      // from sysfs, for devices no PCI tree knows
};

// Used when a link does not report its speed (virtio, some VMs): NCCL's
// assumption for sockets.
constexpr int kDefaultNetSpeedMbps = 10000;

// The PCI device behind a sysfs device link ("class/net/eth0/device"): the
// nearest bus id on its resolved path (a virtio NIC resolves to
// .../0000:00:03.0/virtio2). Empty when it is not on PCI.
std::string pciDeviceOf(const Sysfs& sysfs, const std::string& deviceLink);

std::vector<NetInfo> probeIbNets(const Sysfs& sysfs);
std::vector<NetInfo> probeSocketNets(const Sysfs& sysfs, const std::vector<std::string>& interfaces);

// "100 Gb/sec (4X EDR)" -> 100000; 0 when unreadable.
int parseIbRateMbps(const std::string& rate);

}  // namespace weft::graph
