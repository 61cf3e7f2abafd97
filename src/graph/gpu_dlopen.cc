// The CUDA driver and NVML loaded with dlopen: function-pointer tables
// behind CudaDriverApi and NvmlApi. A library that is missing, or lacks a
// required symbol, counts as absent. Nothing here runs in unit tests (the
// development machine has neither library); gpu_probe.cc holds the logic.
#include <dlfcn.h>

#include "graph/gpu_api.h"

namespace weft::graph {
namespace {

// A loaded library, never closed: the CUDA runtime shares libcuda with us,
// and unloading NVML while it is initialised is not supported. dlopen counts
// references, so loading again at the next communicator costs nothing.
class Library {
 public:
  explicit Library(const char* name) : handle_(dlopen(name, RTLD_NOW | RTLD_LOCAL)) {}
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;

  bool loaded() const { return handle_ != nullptr; }
  // Binds `fn` to `symbol`; false when missing.
  template <typename Fn>
  bool bind(Fn*& fn, const char* symbol) const {
    fn = handle_ ? reinterpret_cast<Fn*>(dlsym(handle_, symbol)) : nullptr;
    return fn != nullptr;
  }

 private:
  void* handle_;
};

class DlopenCuda : public CudaDriverApi {
 public:
  DlopenCuda() : lib_("libcuda.so.1") {
    ok_ = lib_.bind(init_, "cuInit") && lib_.bind(count_, "cuDeviceGetCount") && lib_.bind(get_, "cuDeviceGet") &&
          lib_.bind(busId_, "cuDeviceGetPCIBusId") && lib_.bind(attr_, "cuDeviceGetAttribute");
  }
  bool ok() const { return ok_; }

  int init(unsigned flags) override { return init_(flags); }
  int deviceGetCount(int* count) override { return count_(count); }
  int deviceGet(int* device, int ordinal) override { return get_(device, ordinal); }
  int deviceGetPciBusId(char* busId, int len, int device) override { return busId_(busId, len, device); }
  int deviceGetAttribute(int* value, int attribute, int device) override { return attr_(value, attribute, device); }

 private:
  Library lib_;
  bool ok_ = false;
  int (*init_)(unsigned) = nullptr;
  int (*count_)(int*) = nullptr;
  int (*get_)(int*, int) = nullptr;
  int (*busId_)(char*, int, int) = nullptr;
  int (*attr_)(int*, int, int) = nullptr;
};

class DlopenNvml : public NvmlApi {
 public:
  DlopenNvml() : lib_("libnvidia-ml.so.1") {
    ok_ = lib_.bind(init_, "nvmlInit_v2") && lib_.bind(shutdown_, "nvmlShutdown") &&
          lib_.bind(byBusId_, "nvmlDeviceGetHandleByPciBusId_v2") && lib_.bind(state_, "nvmlDeviceGetNvLinkState") &&
          lib_.bind(cap_, "nvmlDeviceGetNvLinkCapability") &&
          lib_.bind(remotePci_, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    // Optional: newer drivers only.
    lib_.bind(remoteType_, "nvmlDeviceGetNvLinkRemoteDeviceType");
    lib_.bind(cc_, "nvmlDeviceGetCudaComputeCapability");
  }
  bool ok() const { return ok_; }

  int init() override { return init_(); }
  int shutdown() override { return shutdown_(); }
  int deviceGetHandleByPciBusId(const char* busId, NvmlDevice* device) override { return byBusId_(busId, device); }
  int deviceGetNvLinkState(NvmlDevice d, unsigned link, unsigned* active) override { return state_(d, link, active); }
  int deviceGetNvLinkCapability(NvmlDevice d, unsigned link, unsigned cap, unsigned* result) override {
    return cap_(d, link, cap, result);
  }
  int deviceGetNvLinkRemotePciInfo(NvmlDevice d, unsigned link, NvmlPciInfo* pci) override {
    return remotePci_(d, link, pci);
  }
  int deviceGetNvLinkRemoteDeviceType(NvmlDevice d, unsigned link, int* type) override {
    return remoteType_ ? remoteType_(d, link, type) : kErrorFunctionNotFound;
  }
  int deviceGetCudaComputeCapability(NvmlDevice d, int* major, int* minor) override {
    return cc_ ? cc_(d, major, minor) : kErrorFunctionNotFound;
  }

 private:
  Library lib_;
  bool ok_ = false;
  int (*init_)() = nullptr;
  int (*shutdown_)() = nullptr;
  int (*byBusId_)(const char*, NvmlDevice*) = nullptr;
  int (*state_)(NvmlDevice, unsigned, unsigned*) = nullptr;
  int (*cap_)(NvmlDevice, unsigned, unsigned, unsigned*) = nullptr;
  int (*remotePci_)(NvmlDevice, unsigned, NvmlPciInfo*) = nullptr;
  int (*remoteType_)(NvmlDevice, unsigned, int*) = nullptr;
  int (*cc_)(NvmlDevice, int*, int*) = nullptr;
};

}  // namespace

std::unique_ptr<CudaDriverApi> loadCudaDriver() {
  auto api = std::make_unique<DlopenCuda>();
  if (!api->ok()) return nullptr;
  return api;
}

std::unique_ptr<NvmlApi> loadNvml() {
  auto api = std::make_unique<DlopenNvml>();
  if (!api->ok()) return nullptr;
  return api;
}

}  // namespace weft::graph
