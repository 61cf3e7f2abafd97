// Local machine detection into NCCL's topology XML: CPUs and the PCI tree
// from hwloc (sysfs when hwloc is missing), GPUs and NVLinks from the CUDA
// driver and NVML (loaded at run time; absent means no GPUs), NICs from
// sysfs. The result is the same XML a topology file holds, so detected and
// loaded machines become a Topology through the same topologyFromXml.
//
// Only devices that matter are placed: each GPU and NIC with the PCI
// switches above it, under the CPU (NUMA node) it hangs from.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/gpu_api.h"
#include "graph/xml.h"

namespace weft::graph {

struct DetectOptions {
  std::string sysfsRoot = "/sys";
  std::string hwlocXml;  // an hwloc XML export to read instead of this machine (tests)
  bool useHwloc = true;
  std::vector<int> cudaDevices;            // CUDA ordinals to describe; empty: every visible one
  std::vector<std::string> netInterfaces;  // socket NIC candidates, used when there is no HCA
  int rank = -1;                           // written on the detected GPUs (a communicator rank)
  // Injected APIs (tests). Null: load libcuda.so.1 / libnvidia-ml.so.1,
  // unless loadLibraries is false.
  CudaDriverApi* cuda = nullptr;
  NvmlApi* nvml = nullptr;
  bool loadLibraries = true;
};

struct DetectResult {
  std::unique_ptr<XmlNode> xml;  // <system version="1">
  std::string machineSource;     // "hwloc" or "sysfs"
  std::string notes;             // what was missing or failed (empty: nothing)
  int gpus = 0, nets = 0;
};

Result<DetectResult> detectSystem(const DetectOptions& options);

}  // namespace weft::graph
