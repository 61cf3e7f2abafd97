// The CUDA runtime interface in a build without CUDA: no device exists, and
// anything that would need one says so.
#include "device/backend/cuda/runtime.h"

namespace weft::cuda {
namespace {

Status noCuda(const char* what) {
  return errorStatus(ncclInvalidUsage,
                     "%s needs the cuda backend, and this Weft was built without CUDA "
                     "(configure with nvcc available, or -DWEFT_ENABLE_CUDA=ON)",
                     what);
}

}  // namespace

bool built() { return false; }
int deviceCount() { return 0; }
Result<int> currentDevice() { return noCuda("cudaGetDevice"); }
Status setDevice(int) { return noCuda("cudaSetDevice"); }
bool threadHasContext() { return false; }
Status reserveStack(size_t) { return okStatus(); }
DeviceGuard::DeviceGuard(int) {}
DeviceGuard::~DeviceGuard() = default;
Result<void*> deviceAlloc(size_t) { return noCuda("device memory"); }
void deviceFree(void*) {}
Status deviceFreeChecked(void*) { return noCuda("device memory"); }
Status hostAllocMapped(size_t, void**, void**) { return noCuda("mapped host memory"); }
void hostFree(void*) {}
Result<void*> hostRegisterMapped(void*, size_t) { return noCuda("host registration"); }
void hostUnregister(void*) {}
Status copyToDevice(void*, const void*, size_t) { return noCuda("a device copy"); }
Status copyAsync(void*, const void*, size_t, Stream) { return noCuda("an asynchronous copy"); }
MemoryKind pointerKind(const void*, int* device) {
  if (device) *device = -1;
  return MemoryKind::kHost;
}
const char* memoryKindName(MemoryKind) { return "host memory"; }
Status ipcGetHandle(void*, char*) { return noCuda("CUDA IPC"); }
Result<void*> ipcOpenHandle(const char*) { return noCuda("CUDA IPC"); }
void ipcCloseHandle(void*) {}
Result<DmaBuf> dmaBufExport(const void*, size_t) { return noCuda("dma-buf export of device memory"); }
Result<bool> dmaBufSupported(int) { return noCuda("dma-buf export of device memory"); }
Result<AllocationRange> allocationRange(const void*) { return noCuda("the range of a device allocation"); }
bool canAccessPeer(int, int) { return false; }
Status enablePeerAccess(int) { return noCuda("peer access"); }
std::string pciBusId(int) { return ""; }
int deviceByPciBusId(const std::string&) { return -1; }
bool mpsEnabled(int) { return false; }
Result<Stream> streamCreate() { return noCuda("a stream"); }
void streamDestroy(Stream) {}
bool streamIsLegacyDefault(Stream stream) { return stream == nullptr; }
bool streamIsBlocking(Stream) { return false; }
bool streamIsCapturing(Stream) { return false; }
Result<Event> eventCreate() { return noCuda("an event"); }
void eventDestroy(Event) {}
Status eventRecord(Event, Stream) { return noCuda("an event"); }
Status streamWaitEvent(Stream, Event) { return noCuda("an event"); }
Result<bool> eventDone(Event) { return noCuda("an event"); }
Status errorFromCode(int code, const char* call) {
  return code == 0 ? okStatus() : errorStatus(ncclUnhandledCudaError, "%s failed with code %d", call, code);
}

}  // namespace weft::cuda

#include "device/backend/cuda/launch.h"

namespace weft::device {

int launchKernel(const KernelKey&, const KernelArgs&, int, CUstream_st*) { return kKernelNotBuilt; }
size_t kernelStackBytes() { return 0; }
int residentBlocks(int) { return 0; }

}  // namespace weft::device
