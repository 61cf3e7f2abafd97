// The few CUDA driver and NVML entry points GPU detection uses, behind small
// interfaces shaped like the C functions (return code, out-parameters), so
// the logic that interprets them (gpu_probe.cc) runs in unit tests against a
// fake. The real implementations load libcuda.so.1 and libnvidia-ml.so.1
// with dlopen at run time (gpu_dlopen.cc); no CUDA header is included: the
// types below are declared here, laid out as the libraries define them.
#pragma once

#include <memory>
#include <string>

namespace weft::graph {

// CUDA driver API (return 0 = CUDA_SUCCESS).
class CudaDriverApi {
 public:
  static constexpr int kAttrComputeCapabilityMajor = 75;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
  static constexpr int kAttrComputeCapabilityMinor = 76;  // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR

  virtual ~CudaDriverApi() = default;
  virtual int init(unsigned flags) = 0;                                       // cuInit
  virtual int deviceGetCount(int* count) = 0;                                 // cuDeviceGetCount
  virtual int deviceGet(int* device, int ordinal) = 0;                        // cuDeviceGet
  virtual int deviceGetPciBusId(char* busId, int len, int device) = 0;        // cuDeviceGetPCIBusId
  virtual int deviceGetAttribute(int* value, int attribute, int device) = 0;  // cuDeviceGetAttribute
};

// nvmlPciInfo_t as NVML lays it out.
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];  // "00000000:1B:00.0"
};

struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;

// NVML (return 0 = NVML_SUCCESS).
class NvmlApi {
 public:
  static constexpr int kErrorFunctionNotFound = 13;  // NVML_ERROR_FUNCTION_NOT_FOUND
  static constexpr unsigned kMaxLinks = 18;          // NVML_NVLINK_MAX_LINKS
  static constexpr unsigned kCapP2pSupported = 0;    // NVML_NVLINK_CAP_P2P_SUPPORTED
  static constexpr unsigned kFeatureEnabled = 1;     // NVML_FEATURE_ENABLED
  // nvmlIntNvLinkDeviceType_t
  static constexpr int kRemoteGpu = 0, kRemoteIbmNpu = 1, kRemoteSwitch = 2, kRemoteUnknown = 0xff;

  virtual ~NvmlApi() = default;
  virtual int init() = 0;                                                            // nvmlInit_v2
  virtual int shutdown() = 0;                                                        // nvmlShutdown
  virtual int deviceGetHandleByPciBusId(const char* busId, NvmlDevice* device) = 0;  // ..._v2
  virtual int deviceGetNvLinkState(NvmlDevice device, unsigned link, unsigned* isActive) = 0;
  virtual int deviceGetNvLinkCapability(NvmlDevice device, unsigned link, unsigned capability, unsigned* result) = 0;
  virtual int deviceGetNvLinkRemotePciInfo(NvmlDevice device, unsigned link, NvmlPciInfo* pci) = 0;  // ..._v2
  // Absent from older drivers: kErrorFunctionNotFound.
  virtual int deviceGetNvLinkRemoteDeviceType(NvmlDevice device, unsigned link, int* type) = 0;
  virtual int deviceGetCudaComputeCapability(NvmlDevice device, int* major, int* minor) = 0;
};

// The libraries of this machine, or nullptr when absent (no driver: no GPUs).
std::unique_ptr<CudaDriverApi> loadCudaDriver();
std::unique_ptr<NvmlApi> loadNvml();

}  // namespace weft::graph
