#include "graph/nic_probe.h"

#include <cstdlib>

namespace weft::graph {
namespace {

int numaOf(const Sysfs& sysfs, const std::string& busId) {
  if (busId.empty()) return -1;
  const std::string numa = sysfs.read("bus/pci/devices/" + busId + "/numa_node").value_or("-1");
  return std::atoi(numa.c_str());
}

// sysfs spells a GUID as four groups of four hex digits ("0c42:a103:0016:8ec6").
std::string guidOf(const std::string& nodeGuid) {
  std::string hex;
  for (char c : nodeGuid)
    if (c != ':') hex += c;
  return hex.empty() ? "" : "0x" + hex;
}

}  // namespace

std::string pciDeviceOf(const Sysfs& sysfs, const std::string& deviceLink) {
  const std::vector<std::string> ids = busIdsInPath(sysfs.resolve(deviceLink));
  return ids.empty() ? "" : ids.back();
}

int parseIbRateMbps(const std::string& rate) {
  char* end = nullptr;
  const double gbps = std::strtod(rate.c_str(), &end);
  if (end == rate.c_str() || gbps <= 0) return 0;
  return static_cast<int>(gbps * 1000 + 0.5);
}

std::vector<NetInfo> probeIbNets(const Sysfs& sysfs) {
  std::vector<NetInfo> out;
  for (const std::string& dev : sysfs.list("class/infiniband")) {
    const std::string dir = "class/infiniband/" + dev;
    for (const std::string& port : sysfs.list(dir + "/ports")) {
      const std::string portDir = dir + "/ports/" + port;
      // "4: ACTIVE": a port that is down carries nothing.
      if (sysfs.read(portDir + "/state").value_or("").find("ACTIVE") == std::string::npos) continue;
      NetInfo net;
      net.name = dev;
      net.port = std::atoi(port.c_str());
      net.speedMbps = parseIbRateMbps(sysfs.read(portDir + "/rate").value_or(""));
      if (net.speedMbps <= 0) net.speedMbps = kDefaultNetSpeedMbps;
      net.guid = guidOf(sysfs.read(dir + "/node_guid").value_or(""));
      net.busId = pciDeviceOf(sysfs, dir + "/device");
      net.numa = numaOf(sysfs, net.busId);
      out.push_back(net);
    }
  }
  return out;
}

std::vector<NetInfo> probeSocketNets(const Sysfs& sysfs, const std::vector<std::string>& interfaces) {
  std::vector<NetInfo> out;
  for (const std::string& name : interfaces) {
    const std::string dir = "class/net/" + name;
    if (sysfs.resolve(dir).empty()) continue;  // not a local interface
    NetInfo net;
    net.name = name;
    // "-1" or EINVAL when the driver does not know (virtio, loopback).
    const int speed = std::atoi(sysfs.read(dir + "/speed").value_or("0").c_str());
    net.speedMbps = speed > 0 ? speed : kDefaultNetSpeedMbps;
    net.busId = pciDeviceOf(sysfs, dir + "/device");
    net.numa = numaOf(sysfs, net.busId);
    out.push_back(net);
  }
  return out;
}

}  // namespace weft::graph
