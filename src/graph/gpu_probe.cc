#include "graph/gpu_probe.h"

#include <algorithm>

#include "graph/sysfs.h"

namespace weft::graph {
namespace {

std::string classOfRemote(NvmlApi& nvml, NvmlDevice dev, unsigned link, const std::string& target,
                          const std::vector<std::string>& gpuBusIds) {
  int type = NvmlApi::kRemoteUnknown;
  if (nvml.deviceGetNvLinkRemoteDeviceType(dev, link, &type) == 0) {
    if (type == NvmlApi::kRemoteGpu) return kNvlinkGpuClass;
    if (type == NvmlApi::kRemoteSwitch) return kNvlinkSwitchClass;
    if (type == NvmlApi::kRemoteIbmNpu) return kNvlinkCpuClass;
  }
  // Older drivers cannot say: GPUs are NVML devices, NVSwitches are not.
  if (std::find(gpuBusIds.begin(), gpuBusIds.end(), target) != gpuBusIds.end()) return kNvlinkGpuClass;
  NvmlDevice remote = nullptr;
  if (nvml.deviceGetHandleByPciBusId(target.c_str(), &remote) == 0) return kNvlinkGpuClass;
  return kNvlinkSwitchClass;
}

// The far end of one link, or an empty target when the link is down, not
// present (link indices past the GPU's count fail) or cannot carry P2P.
NvlinkInfo probeLink(NvmlApi& nvml, NvmlDevice dev, unsigned link, const std::vector<std::string>& gpuBusIds) {
  unsigned active = 0;
  if (nvml.deviceGetNvLinkState(dev, link, &active) != 0 || active != NvmlApi::kFeatureEnabled) return {};
  unsigned p2p = 1;
  if (nvml.deviceGetNvLinkCapability(dev, link, NvmlApi::kCapP2pSupported, &p2p) == 0 && p2p == 0) return {};
  NvmlPciInfo pci{};
  if (nvml.deviceGetNvLinkRemotePciInfo(dev, link, &pci) != 0) return {};
  pci.busId[sizeof(pci.busId) - 1] = '\0';
  NvlinkInfo info;
  info.target = normalizeBusId(pci.busId);
  if (info.target.empty()) return {};
  info.tclass = classOfRemote(nvml, dev, link, info.target, gpuBusIds);
  info.count = 1;
  return info;
}

int computeCapability(CudaDriverApi& cuda, int device) {
  int major = 0, minor = 0;
  if (cuda.deviceGetAttribute(&major, CudaDriverApi::kAttrComputeCapabilityMajor, device) != 0 ||
      cuda.deviceGetAttribute(&minor, CudaDriverApi::kAttrComputeCapabilityMinor, device) != 0)
    return 0;
  return major * 10 + minor;
}

}  // namespace

std::vector<NvlinkInfo> probeNvlinks(NvmlApi& nvml, const std::string& busId, const std::vector<std::string>& gpuBusIds,
                                     std::string* note) {
  std::vector<NvlinkInfo> out;
  NvmlDevice dev = nullptr;
  if (nvml.deviceGetHandleByPciBusId(busId.c_str(), &dev) != 0) {
    if (note) *note += "NVML does not know GPU " + busId + "; ";
    return out;
  }
  for (unsigned link = 0; link < NvmlApi::kMaxLinks; ++link) {
    NvlinkInfo l = probeLink(nvml, dev, link, gpuBusIds);
    if (l.target.empty()) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const NvlinkInfo& o) { return o.target == l.target; });
    if (same != out.end())
      ++same->count;
    else
      out.push_back(l);
  }
  return out;
}

GpuProbeResult probeGpus(CudaDriverApi& cuda, NvmlApi* nvml, const std::vector<int>& ordinals) {
  GpuProbeResult r;
  int status = cuda.init(0);
  if (status != 0) return (r.note = "cuInit failed with CUDA error " + std::to_string(status)), r;
  int count = 0;
  if ((status = cuda.deviceGetCount(&count)) != 0)
    return (r.note = "cuDeviceGetCount failed with CUDA error " + std::to_string(status)), r;
  std::vector<int> wanted = ordinals;
  if (wanted.empty())
    for (int i = 0; i < count; ++i) wanted.push_back(i);
  for (int ordinal : wanted) {
    int device = 0;
    char busId[32] = {};
    if (ordinal < 0 || ordinal >= count || cuda.deviceGet(&device, ordinal) != 0 ||
        cuda.deviceGetPciBusId(busId, sizeof(busId), device) != 0) {
      r.note += "CUDA device " + std::to_string(ordinal) + " not usable; ";
      continue;
    }
    GpuInfo gpu;
    gpu.ordinal = ordinal;
    gpu.busId = normalizeBusId(busId);
    gpu.sm = computeCapability(cuda, device);
    r.gpus.push_back(gpu);
  }
  std::vector<std::string> known;
  for (const GpuInfo& g : r.gpus) known.push_back(g.busId);
  if (nvml == nullptr) {
    if (!r.gpus.empty()) r.note += "NVML not available: no NVLinks; ";
    return r;
  }
  if ((status = nvml->init()) != 0) return (r.note += "nvmlInit failed with error " + std::to_string(status)), r;
  for (GpuInfo& g : r.gpus) g.nvlinks = probeNvlinks(*nvml, g.busId, known, &r.note);
  nvml->shutdown();  // NVML counts initialisations: leave its count as it was
  return r;
}

}  // namespace weft::graph
