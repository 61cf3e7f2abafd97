// The machine around the devices: CPUs (NUMA nodes) and where a PCI device
// sits (its NUMA node and the PCI switches above it), from hwloc or, as a
// fallback, from sysfs. Detection asks this for every GPU and NIC it places.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/sysfs.h"

namespace weft::graph {

// The attributes of a <cpu> element of NCCL's topology format.
struct CpuInfo {
  int numa = 0;
  std::string affinity;  // cpumask: 32-bit hex groups, most significant first, comma-separated
  std::string arch, vendor, family, model;
};

// The attributes of a <pci> element.
struct PciAttrs {
  std::string busId, cls, vendor, device, subVendor, subDevice;
  std::string linkSpeed, linkWidth;  // "16.0 GT/s PCIe", "16"; empty when unknown
};

struct PciPlace {
  int numa = -1;                   // -1: unknown (the first CPU is used)
  std::vector<PciAttrs> switches;  // PCI switches above the device, the one nearest the CPU first
  PciAttrs self;
};

class MachineInfo {
 public:
  virtual ~MachineInfo() = default;
  virtual std::vector<CpuInfo> cpus() const = 0;
  // False when the device is unknown to this source.
  virtual bool locate(const std::string& busId, PciPlace* out) const = 0;
  virtual const char* name() const = 0;
};

// A switch shows up as a chain of bridges: its upstream port, then one
// downstream port per slot, below a root port of the CPU. Given a device's
// bridges nearest the device first (root port last), keeps one node per
// switch — its upstream port, every second bridge from the device up — so
// two devices under one switch are one switch apart (PIX), as in NCCL's
// model, and root ports vanish into their CPU.
std::vector<std::string> switchesOf(const std::vector<std::string>& bridgesNearestFirst);

// Fills link speed/width and class from sysfs when it has them (hwloc knows
// only a combined GB/s figure).
void overlaySysfsAttrs(const Sysfs& sysfs, PciAttrs* attrs);

// sysfs only: CPUs from devices/system/node, PCI parents from the resolved
// device path (bus/pci/devices/<id>).
std::unique_ptr<MachineInfo> sysfsMachine(const Sysfs& sysfs);

// hwloc: this machine, or an hwloc XML export (tests) when hwlocXmlPath is
// set. Fails when hwloc is missing from the build or cannot load.
Result<std::unique_ptr<MachineInfo>> hwlocMachine(const std::string& hwlocXmlPath, const Sysfs& sysfs);
bool hwlocBuilt();

}  // namespace weft::graph
