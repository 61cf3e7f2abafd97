// Fakes of the CUDA driver and NVML interfaces (graph/gpu_api.h), holding a
// machine as tables: GPUs with bus ids and compute capabilities, and per GPU
// its NVLinks. They answer the way the libraries do: NVML spells bus ids
// "00000000:1B:00.0", link indices past a GPU's links fail, and an older
// driver lacks nvmlDeviceGetNvLinkRemoteDeviceType.
#pragma once

#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "graph/gpu_api.h"
#include "graph/sysfs.h"

namespace weft::graph::test {

class FakeCuda : public CudaDriverApi {
 public:
  struct Gpu {
    std::string busId;  // as cuDeviceGetPCIBusId spells it: "0000:1B:00.0"
    int major = 8, minor = 0;
  };
  std::vector<Gpu> gpus;
  int initResult = 0;

  int init(unsigned) override { return initResult; }
  int deviceGetCount(int* count) override {
    *count = static_cast<int>(gpus.size());
    return 0;
  }
  // Device handles differ from ordinals so mixing them up shows.
  int deviceGet(int* device, int ordinal) override {
    *device = ordinal + kHandleBase;
    return 0;
  }
  int deviceGetPciBusId(char* busId, int len, int device) override {
    const Gpu* g = find(device);
    if (!g) return 101;  // CUDA_ERROR_INVALID_DEVICE
    std::snprintf(busId, static_cast<size_t>(len), "%s", g->busId.c_str());
    return 0;
  }
  int deviceGetAttribute(int* value, int attribute, int device) override {
    const Gpu* g = find(device);
    if (!g) return 101;
    if (attribute == kAttrComputeCapabilityMajor) return (*value = g->major), 0;
    if (attribute == kAttrComputeCapabilityMinor) return (*value = g->minor), 0;
    return 1;
  }

 private:
  static constexpr int kHandleBase = 100;
  const Gpu* find(int device) const {
    const int i = device - kHandleBase;
    return i >= 0 && i < static_cast<int>(gpus.size()) ? &gpus[static_cast<size_t>(i)] : nullptr;
  }
};

class FakeNvml : public NvmlApi {
 public:
  struct Link {
    std::string remote;  // normalised bus id of the far end
    int type = kRemoteGpu;
    bool active = true;
    bool p2p = true;
  };
  std::vector<std::string> devices;                // normalised bus ids NVML knows (GPUs only)
  std::map<std::string, std::vector<Link>> links;  // per GPU bus id: its links, by index
  bool hasRemoteType = true;                       // false: an older driver
  int initResult = 0;
  int initialised = 0;  // init calls not yet matched by shutdown

  int init() override {
    if (initResult == 0) ++initialised;
    return initResult;
  }
  int shutdown() override {
    if (initialised == 0) return 1;  // NVML_ERROR_UNINITIALIZED
    --initialised;
    return 0;
  }
  int deviceGetHandleByPciBusId(const char* busId, NvmlDevice* device) override {
    const std::string id = normalizeBusId(busId);
    for (size_t i = 0; i < devices.size(); ++i)
      if (devices[i] == id) return (*device = reinterpret_cast<NvmlDevice>(i + 1)), 0;
    return 6;  // NVML_ERROR_NOT_FOUND
  }
  int deviceGetNvLinkState(NvmlDevice d, unsigned link, unsigned* active) override {
    const Link* l = find(d, link);
    if (!l) return 2;  // NVML_ERROR_INVALID_ARGUMENT
    *active = l->active ? kFeatureEnabled : 0;
    return 0;
  }
  int deviceGetNvLinkCapability(NvmlDevice d, unsigned link, unsigned cap, unsigned* result) override {
    const Link* l = find(d, link);
    if (!l || cap != kCapP2pSupported) return 2;
    *result = l->p2p ? 1 : 0;
    return 0;
  }
  int deviceGetNvLinkRemotePciInfo(NvmlDevice d, unsigned link, NvmlPciInfo* pci) override {
    const Link* l = find(d, link);
    if (!l) return 2;
    std::memset(pci, 0, sizeof(*pci));
    unsigned domain = 0, bus = 0, dev = 0, fn = 0;
    std::sscanf(l->remote.c_str(), "%x:%x:%x.%x", &domain, &bus, &dev, &fn);
    std::snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.%X", domain, bus, dev, fn);
    return 0;
  }
  int deviceGetNvLinkRemoteDeviceType(NvmlDevice d, unsigned link, int* type) override {
    if (!hasRemoteType) return kErrorFunctionNotFound;
    const Link* l = find(d, link);
    if (!l) return 2;
    *type = l->type;
    return 0;
  }
  int deviceGetCudaComputeCapability(NvmlDevice, int*, int*) override { return kErrorFunctionNotFound; }

 private:
  const Link* find(NvmlDevice d, unsigned link) const {
    const size_t i = reinterpret_cast<size_t>(d) - 1;
    if (i >= devices.size()) return nullptr;
    auto it = links.find(devices[i]);
    if (it == links.end() || link >= it->second.size()) return nullptr;
    return &it->second[link];
  }
};

}  // namespace weft::graph::test
