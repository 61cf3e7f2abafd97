// Built when hwloc (libhwloc-dev, found through pkg-config) is missing:
// detection then reads CPUs and PCI parents from sysfs only.
#include "graph/machine.h"

namespace weft::graph {

bool hwlocBuilt() { return false; }

Result<std::unique_ptr<MachineInfo>> hwlocMachine(const std::string&, const Sysfs&) {
  return errorStatus(ncclInvalidUsage, "hwloc: this build has no hwloc (install libhwloc-dev and reconfigure)");
}

}  // namespace weft::graph
