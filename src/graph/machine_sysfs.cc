// MachineInfo from sysfs alone: used when hwloc is absent from the build or
// fails, and for devices hwloc filtered out.
#include <sys/utsname.h>

#include <algorithm>
#include <cstdlib>

#include "graph/machine.h"

namespace weft::graph {

std::vector<std::string> switchesOf(const std::vector<std::string>& bridgesNearestFirst) {
  std::vector<std::string> out;
  for (size_t i = 1; i < bridgesNearestFirst.size(); i += 2) out.push_back(bridgesNearestFirst[i]);
  return out;
}

void overlaySysfsAttrs(const Sysfs& sysfs, PciAttrs* attrs) {
  const std::string dir = "bus/pci/devices/" + attrs->busId + "/";
  auto take = [&](const char* file, std::string* field) {
    if (auto v = sysfs.read(dir + file); v && !v->empty()) *field = *v;
  };
  take("class", &attrs->cls);
  take("vendor", &attrs->vendor);
  take("device", &attrs->device);
  take("subsystem_vendor", &attrs->subVendor);
  take("subsystem_device", &attrs->subDevice);
  take("max_link_speed", &attrs->linkSpeed);
  take("max_link_width", &attrs->linkWidth);
}

namespace {

std::string machineArch() {
  utsname u{};
  return uname(&u) == 0 ? u.machine : "";
}

class SysfsMachine : public MachineInfo {
 public:
  explicit SysfsMachine(const Sysfs& sysfs) : sysfs_(sysfs) {}

  std::vector<CpuInfo> cpus() const override {
    std::vector<CpuInfo> out;
    for (const std::string& entry : sysfs_.list("devices/system/node")) {
      if (entry.compare(0, 4, "node") != 0 || entry.size() == 4) continue;
      CpuInfo cpu;
      cpu.numa = std::atoi(entry.c_str() + 4);
      cpu.affinity = sysfs_.read("devices/system/node/" + entry + "/cpumap").value_or("");
      cpu.arch = machineArch();
      out.push_back(cpu);
    }
    if (out.empty()) out.push_back(CpuInfo{0, "", machineArch(), "", "", ""});
    std::sort(out.begin(), out.end(), [](const CpuInfo& a, const CpuInfo& b) { return a.numa < b.numa; });
    return out;
  }

  bool locate(const std::string& busId, PciPlace* out) const override {
    const std::vector<std::string> chain = busIdsInPath(sysfs_.resolve("bus/pci/devices/" + busId));
    if (chain.empty() || chain.back() != busId) return false;
    std::vector<std::string> bridges(chain.rbegin() + 1, chain.rend());  // nearest the device first
    std::vector<std::string> switches = switchesOf(bridges);
    *out = PciPlace{};
    for (auto it = switches.rbegin(); it != switches.rend(); ++it) out->switches.push_back(attrsOf(*it));
    out->self = attrsOf(busId);
    const std::string numa = sysfs_.read("bus/pci/devices/" + busId + "/numa_node").value_or("-1");
    out->numa = std::atoi(numa.c_str());
    return true;
  }

  const char* name() const override { return "sysfs"; }

 private:
  PciAttrs attrsOf(const std::string& busId) const {
    PciAttrs a;
    a.busId = busId;
    overlaySysfsAttrs(sysfs_, &a);
    return a;
  }

  Sysfs sysfs_;
};

}  // namespace

std::unique_ptr<MachineInfo> sysfsMachine(const Sysfs& sysfs) { return std::make_unique<SysfsMachine>(sysfs); }

}  // namespace weft::graph
