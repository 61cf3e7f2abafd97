// Device memory as a dma-buf, for GPUDirect RDMA, and the allocation a
// pointer lies in (registered windows): the CUDA driver entry points they
// need (cuMemGetHandleForAddressRange, CUDA 11.7 and later, the device
// attribute saying whether export works, cuMemGetAddressRange) are loaded from
// libcuda.so.1 at run time, as GPU detection loads the driver
// (src/graph/gpu_dlopen.cc): a driver that lacks them is reported, not
// linked against. Also whether the calling thread has a context
// (cuCtxGetCurrent, for DeviceGuard in runtime.cc).
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <mutex>

#include "device/backend/cuda/runtime.h"

namespace weft::cuda {
namespace {

struct DriverDmaBuf {
  CUresult (*handleForRange)(void* handle, CUdeviceptr ptr, size_t size, CUmemRangeHandleType type,
                             unsigned long long flags) = nullptr;
  CUresult (*addressRange)(CUdeviceptr* base, size_t* size, CUdeviceptr ptr) = nullptr;
  CUresult (*deviceGet)(CUdevice* device, int ordinal) = nullptr;
  CUresult (*attribute)(int* value, CUdevice_attribute attribute, CUdevice device) = nullptr;
  std::string missing;  // why the entry points are not all there
};

template <typename Fn>
void bind(void* lib, const char* symbol, Fn* slot, std::string* missing) {
  *slot = lib ? reinterpret_cast<Fn>(dlsym(lib, symbol)) : nullptr;
  if (*slot == nullptr && missing->empty()) *missing = std::string("libcuda.so.1 lacks ") + symbol;
}

const DriverDmaBuf& driver() {
  static std::once_flag once;
  static DriverDmaBuf d;
  std::call_once(once, [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // never closed: the runtime shares it
    if (lib == nullptr) {
      d.missing = "cannot load libcuda.so.1";
      return;
    }
    bind(lib, "cuMemGetHandleForAddressRange", &d.handleForRange, &d.missing);
    bind(lib, "cuMemGetAddressRange_v2", &d.addressRange, &d.missing);
    bind(lib, "cuDeviceGet", &d.deviceGet, &d.missing);
    bind(lib, "cuDeviceGetAttribute", &d.attribute, &d.missing);
  });
  return d;
}

Status driverError(CUresult rc, const char* call) {
  return errorStatus(ncclUnhandledCudaError, "%s failed with CUDA driver error %d", call, static_cast<int>(rc));
}

}  // namespace

bool threadHasContext() {
  using CtxGetCurrent = CUresult (*)(CUcontext* ctx);
  static const CtxGetCurrent get = [] {
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);  // never closed, as above
    return lib ? reinterpret_cast<CtxGetCurrent>(dlsym(lib, "cuCtxGetCurrent")) : nullptr;
  }();
  if (get == nullptr) return true;
  CUcontext ctx = nullptr;
  return get(&ctx) != CUDA_SUCCESS || ctx != nullptr;
}

Result<bool> dmaBufSupported(int device) {
  const DriverDmaBuf& d = driver();
  if (!d.missing.empty())
    return errorStatus(ncclInvalidUsage, "dma-buf export needs the CUDA driver's entry points: %s", d.missing.c_str());
  CUdevice handle = 0;
  if (CUresult rc = d.deviceGet(&handle, device)) return driverError(rc, "cuDeviceGet");
  int value = 0;
  if (CUresult rc = d.attribute(&value, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, handle))
    return driverError(rc, "cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED)");
  return value != 0;
}

Result<AllocationRange> allocationRange(const void* ptr) {
  const DriverDmaBuf& d = driver();
  if (d.addressRange == nullptr)
    return errorStatus(ncclInvalidUsage, "the range of a device allocation needs cuMemGetAddressRange: %s",
                       d.missing.c_str());
  int device = -1;
  if (pointerKind(ptr, &device) != MemoryKind::kDevice)
    return errorStatus(ncclInvalidArgument, "%p is not device memory (it is %s)", ptr,
                       memoryKindName(pointerKind(ptr, nullptr)));
  DeviceGuard guard(device);
  CUdeviceptr base = 0;
  size_t bytes = 0;
  if (CUresult rc = d.addressRange(&base, &bytes, reinterpret_cast<CUdeviceptr>(ptr)))
    return driverError(rc, "cuMemGetAddressRange");
  return AllocationRange{reinterpret_cast<void*>(base), bytes};
}

Result<DmaBuf> dmaBufExport(const void* ptr, size_t bytes) {
  const DriverDmaBuf& d = driver();
  if (!d.missing.empty())
    return errorStatus(ncclInvalidUsage, "dma-buf export needs the CUDA driver's entry points: %s", d.missing.c_str());
  Result<AllocationRange> range = allocationRange(ptr);
  if (!range.ok()) return range.status().withContext("dma-buf export");
  int device = -1;
  (void)pointerKind(ptr, &device);
  DeviceGuard guard(device);
  const auto base = reinterpret_cast<uintptr_t>(range.value().base);
  const size_t allocation = range.value().bytes;
  const uintptr_t at = reinterpret_cast<uintptr_t>(ptr);
  if (at + bytes > base + allocation)
    return errorStatus(ncclInvalidArgument, "dma-buf export: %zu bytes at %p run past the allocation's end", bytes,
                       ptr);
  // The driver wants the range aligned to the host page size: export the
  // whole allocation, its length rounded up, and name the range by offset.
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t length = (allocation + page - 1) / page * page;
  int fd = -1;
  if (CUresult rc = d.handleForRange(&fd, base, length, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0))
    return driverError(rc, "cuMemGetHandleForAddressRange(CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)");
  DmaBuf out;
  out.fd = fd;
  out.offset = at - base;
  return out;
}

}  // namespace weft::cuda
