// MachineInfo from hwloc: NUMA nodes with their CPU sets and vendors, and
// the PCI tree (bridges and devices) with the NUMA node each hangs from.
// Everything is read once at construction; the hwloc topology is not kept.
#include <hwloc.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "graph/machine.h"

namespace weft::graph {
namespace {

std::string hex(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", digits, value);
  return buf;
}

std::string busIdOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%04x:%02x:%02x.%x", static_cast<unsigned>(pci.domain), pci.bus, pci.dev, pci.func);
  return buf;
}

// hwloc reports lanes x GT/s x encoding efficiency / 8 as one GB/s figure.
// Recover the lane count and rate, widest first (an x16 Gen3 link and an x8
// Gen4 one read the same; x16 is the common case for GPUs and NICs).
void linkFromGbs(float gbs, PciAttrs* a) {
  if (gbs <= 0) return;
  static const double kRates[] = {2.5, 5.0, 8.0, 16.0, 32.0, 64.0};
  for (int width : {16, 8, 4, 2, 1})
    for (double rate : kRates) {
      const double efficiency = rate < 8.0 ? 8.0 / 10.0 : 128.0 / 130.0;
      if (std::fabs(width * rate * efficiency / 8.0 - gbs) < 0.02 * gbs) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), "%.1f GT/s PCIe", rate);
        a->linkSpeed = buf;
        a->linkWidth = std::to_string(width);
        return;
      }
    }
}

PciAttrs attrsOf(const hwloc_obj_attr_u::hwloc_pcidev_attr_s& pci) {
  PciAttrs a;
  a.busId = busIdOf(pci);
  a.cls = hex(static_cast<unsigned>(pci.class_id) << 8, 6);  // hwloc has no programming interface byte
  a.vendor = hex(pci.vendor_id, 4);
  a.device = hex(pci.device_id, 4);
  a.subVendor = hex(pci.subvendor_id, 4);
  a.subDevice = hex(pci.subdevice_id, 4);
  linkFromGbs(pci.linkspeed, &a);
  return a;
}

std::string cpumask(hwloc_const_bitmap_t set) {
  const int last = hwloc_bitmap_last(set);
  if (last < 0) return "";
  std::string out;
  for (int group = last / 32; group >= 0; --group) {
    unsigned bits = 0;
    for (int b = 0; b < 32; ++b)
      if (hwloc_bitmap_isset(set, static_cast<unsigned>(group * 32 + b))) bits |= 1u << b;
    char buf[16];
    std::snprintf(buf, sizeof(buf), "%s%08x", out.empty() ? "" : ",", bits);
    out += buf;
  }
  return out;
}

std::string info(hwloc_obj_t obj, const char* name) {
  const char* v = obj ? hwloc_obj_get_info_by_name(obj, name) : nullptr;
  return v ? v : "";
}

class HwlocMachine : public MachineInfo {
 public:
  HwlocMachine(hwloc_topology_t topo, const Sysfs& sysfs) : sysfs_(sysfs) {
    readCpus(topo);
    for (hwloc_obj_t o = hwloc_get_next_bridge(topo, nullptr); o; o = hwloc_get_next_bridge(topo, o))
      if (o->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
        attrs_[busIdOf(o->attr->bridge.upstream.pci)] = attrsOf(o->attr->bridge.upstream.pci);
    for (hwloc_obj_t o = hwloc_get_next_pcidev(topo, nullptr); o; o = hwloc_get_next_pcidev(topo, o))
      readDevice(topo, o);
  }

  std::vector<CpuInfo> cpus() const override { return cpus_; }

  bool locate(const std::string& busId, PciPlace* out) const override {
    auto it = places_.find(busId);
    if (it == places_.end()) return false;
    *out = it->second;
    overlaySysfsAttrs(sysfs_, &out->self);
    for (PciAttrs& s : out->switches) overlaySysfsAttrs(sysfs_, &s);
    return true;
  }

  const char* name() const override { return "hwloc"; }

 private:
  void readCpus(hwloc_topology_t topo) {
    const std::string arch = info(hwloc_get_root_obj(topo), "Architecture");
    const int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    for (int i = 0; i < n; ++i) {
      hwloc_obj_t numa = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
      hwloc_obj_t package = numa->parent;
      while (package && package->type != HWLOC_OBJ_PACKAGE) package = package->parent;
      if (package == nullptr) package = hwloc_get_obj_by_type(topo, HWLOC_OBJ_PACKAGE, 0);
      cpus_.push_back(CpuInfo{static_cast<int>(numa->os_index), cpumask(numa->cpuset), arch, info(package, "CPUVendor"),
                              info(package, "CPUFamilyNumber"), info(package, "CPUModelNumber")});
    }
    if (cpus_.empty()) cpus_.push_back(CpuInfo{0, cpumask(hwloc_get_root_obj(topo)->cpuset), arch, "", "", ""});
  }

  void readDevice(hwloc_topology_t topo, hwloc_obj_t dev) {
    PciPlace place;
    place.self = attrsOf(dev->attr->pcidev);
    std::vector<std::string> bridges;  // nearest the device first
    for (hwloc_obj_t p = dev->parent; p && p->type == HWLOC_OBJ_BRIDGE; p = p->parent)
      if (p->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_PCI)
        bridges.push_back(busIdOf(p->attr->bridge.upstream.pci));
    const std::vector<std::string> switches = switchesOf(bridges);
    for (auto it = switches.rbegin(); it != switches.rend(); ++it) place.switches.push_back(attrs_[*it]);
    hwloc_obj_t anchor = hwloc_get_non_io_ancestor_obj(topo, dev);
    const int numa = anchor ? hwloc_bitmap_first(anchor->nodeset) : -1;
    place.numa = numa;
    places_[place.self.busId] = place;
  }

  Sysfs sysfs_;
  std::vector<CpuInfo> cpus_;
  std::map<std::string, PciAttrs> attrs_;  // bridges
  std::map<std::string, PciPlace> places_;
};

}  // namespace

bool hwlocBuilt() { return true; }

Result<std::unique_ptr<MachineInfo>> hwlocMachine(const std::string& hwlocXmlPath, const Sysfs& sysfs) {
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return errorStatus(ncclSystemError, "hwloc: cannot initialise a topology");
  // Keep the PCI devices that matter (GPUs, NICs, ...) and the bridges above them.
  hwloc_topology_set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (!hwlocXmlPath.empty() && hwloc_topology_set_xml(topo, hwlocXmlPath.c_str()) != 0) {
    hwloc_topology_destroy(topo);
    return errorStatus(ncclSystemError, "hwloc: cannot read %s", hwlocXmlPath.c_str());
  }
  if (hwloc_topology_load(topo) != 0) {
    hwloc_topology_destroy(topo);
    return errorStatus(ncclSystemError, "hwloc: cannot load the topology%s%s", hwlocXmlPath.empty() ? "" : " of ",
                       hwlocXmlPath.c_str());
  }
  std::unique_ptr<MachineInfo> machine = std::make_unique<HwlocMachine>(topo, sysfs);
  hwloc_topology_destroy(topo);
  return machine;
}

}  // namespace weft::graph
