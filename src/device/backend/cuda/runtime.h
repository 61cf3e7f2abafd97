// The CUDA runtime as the rest of Weft sees it: a narrow set of calls with
// Status results and no CUDA types beyond opaque handles. Built against the
// CUDA runtime when the toolkit is present (runtime.cc), else as stubs that
// report no device (runtime_stub.cc), so callers never need #ifdefs.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

struct CUstream_st;
struct CUevent_st;

namespace weft::cuda {

using Stream = CUstream_st*;
using Event = CUevent_st*;

// True when this build contains the cuda backend.
bool built();
// Usable devices (0 without a driver or device; cached after the first call).
int deviceCount();

Result<int> currentDevice();
Status setDevice(int device);
// Whether the calling thread has a current CUDA context (true when the
// driver cannot say).
bool threadHasContext();
// Raises the current device's per-thread kernel stack to at least
// `bytesPerThread` (device/backend/cuda/launch.h kernelStackBytes).
Status reserveStack(size_t bytesPerThread);

// Sets a device for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// Device memory on the current device, zero-filled.
Result<void*> deviceAlloc(size_t bytes);
void deviceFree(void* ptr);
// deviceFree with its result (ncclMemFree reports it).
Status deviceFreeChecked(void* ptr);
// Pinned host memory mapped into every device's address space.
Status hostAllocMapped(size_t bytes, void** host, void** device);
void hostFree(void* host);
// Pins and maps existing host memory (a shared-memory segment).
Result<void*> hostRegisterMapped(void* host, size_t bytes);
void hostUnregister(void* host);

Status copyToDevice(void* dst, const void* src, size_t bytes);
// The same copy the other way (it runs with cudaMemcpyDefault).
inline Status copyFromDevice(void* dst, const void* src, size_t bytes) { return copyToDevice(dst, src, bytes); }
Status copyAsync(void* dst, const void* src, size_t bytes, Stream stream);

enum class MemoryKind { kHost, kDevice, kManaged, kHostMapped, kUnknown };
// What `ptr` is; `device` receives the owning device for device memory.
MemoryKind pointerKind(const void* ptr, int* device);
const char* memoryKindName(MemoryKind kind);

constexpr size_t kIpcHandleBytes = 64;
Status ipcGetHandle(void* ptr, char handle[kIpcHandleBytes]);
Result<void*> ipcOpenHandle(const char handle[kIpcHandleBytes]);
void ipcCloseHandle(void* ptr);

// Device memory exported as a dma-buf for an RDMA adapter to register
// (GPUDirect RDMA): `fd` covers the allocation holding the range, `offset`
// is where the range starts in it. The caller closes `fd` once registered.
struct DmaBuf {
  int fd = -1;
  unsigned long long offset = 0;
};
// Exports [ptr, ptr+bytes) of device memory through the driver's
// cuMemGetHandleForAddressRange (loaded from libcuda.so.1 at run time).
Result<DmaBuf> dmaBufExport(const void* ptr, size_t bytes);
// The allocation holding `ptr` (cuMemGetAddressRange, loaded from
// libcuda.so.1 at run time): where it starts and how long it is. What a
// CUDA IPC handle of the allocation maps, and where a buffer lies in it.
struct AllocationRange {
  void* base = nullptr;
  size_t bytes = 0;
};
Result<AllocationRange> allocationRange(const void* ptr);
// Whether the driver can export `device`'s memory as a dma-buf
// (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED); an error when it cannot say.
Result<bool> dmaBufSupported(int device);

bool canAccessPeer(int device, int peerDevice);
// Lets the current device reach peerDevice's memory (already enabled is fine).
Status enablePeerAccess(int peerDevice);
// "0000:1b:00.0" style id; empty on failure.
std::string pciBusId(int device);
// The local index of the device with this bus id, or -1 if not visible.
int deviceByPciBusId(const std::string& busId);
bool mpsEnabled(int device);

Result<Stream> streamCreate();
void streamDestroy(Stream stream);
bool streamIsLegacyDefault(Stream stream);
// A stream that synchronizes with the legacy default stream (made without
// cudaStreamNonBlocking; the per-thread default stream is not one).
bool streamIsBlocking(Stream stream);
// True while `stream` is being captured into a CUDA graph.
bool streamIsCapturing(Stream stream);
Result<Event> eventCreate();
void eventDestroy(Event event);
Status eventRecord(Event event, Stream stream);
Status streamWaitEvent(Stream stream, Event event);
// True when everything recorded before the event has finished.
Result<bool> eventDone(Event event);

// A CUDA error code as a Status naming the call that returned it.
Status errorFromCode(int code, const char* call);

}  // namespace weft::cuda
