#include "device/backend/cuda/runtime.h"

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <cstring>
#include <mutex>

#include "common/log.h"

namespace weft::cuda {

bool built() { return true; }

Status errorFromCode(int code, const char* call) {
  if (code == 0) return okStatus();
  auto err = static_cast<cudaError_t>(code);
  return errorStatus(ncclUnhandledCudaError, "%s failed: %s (%s)", call, cudaGetErrorString(err),
                     cudaGetErrorName(err));
}

#define WEFT_CUDA_RETURN(call)                                            \
  do {                                                                    \
    cudaError_t weft_err_ = (call);                                       \
    if (weft_err_ != cudaSuccess) return errorFromCode(weft_err_, #call); \
  } while (0)

namespace {

bool driverInstalled() {
  void* lib = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib == nullptr) return false;
  dlclose(lib);
  return true;
}

}  // namespace

int deviceCount() {
  static int count = [] {
    int n = 0;
    const cudaError_t err = cudaGetDeviceCount(&n);
    if (err != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no device" error
      // No device, or no driver at all, is the host backend's ordinary
      // case; a driver that is there but refused (older than this runtime, a
      // broken installation) would quietly run every GPU program on the host
      // backend: say why.
      if (err != cudaErrorNoDevice && driverInstalled())
        WEFT_WARN(
            "CUDA reports no usable device: cudaGetDeviceCount failed with %s (%s); communicators use the "
            "host backend",
            cudaGetErrorName(err), cudaGetErrorString(err));
      return 0;
    }
    return n;
  }();
  return count;
}

Result<int> currentDevice() {
  int device = -1;
  WEFT_CUDA_RETURN(cudaGetDevice(&device));
  return device;
}

Status setDevice(int device) {
  WEFT_CUDA_RETURN(cudaSetDevice(device));
  return okStatus();
}

DeviceGuard::DeviceGuard(int device) {
  if (device < 0) return;  // host backend: no device, and no CUDA call at all
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (device == previous_) {  // the common case (every launch): nothing to set or restore
    previous_ = -1;
    return;
  }
  // A thread with no context yet (one Weft started: a non-blocking init, a
  // group's) reports device 0 without using it; setting 0 back would make a
  // context on GPU 0 for nothing (memory, and a failure where GPU 0 is in
  // exclusive-process mode). Such a thread keeps `device`.
  if (previous_ >= 0 && !threadHasContext()) previous_ = -1;
  cudaSetDevice(device);
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

namespace {

// Set-up work (connections made at the first send to a new peer, mirrors of
// FIFO ends) runs beside the user's work, never behind it, and in relaxed
// capture mode: inside a thread capturing a graph, cudaMalloc would otherwise
// break the capture. Its copies and fills go on a stream of its own, made
// non-blocking for the occasion (SideStream): the legacy default stream, or
// a thread's per-thread default stream (which waits for the legacy one),
// would wait for work on the user's blocking streams. That is a deadlock
// when the work is a kernel of another rank on this GPU spinning for this
// very rank, and a broken capture (cudaErrorStreamCaptureImplicit) when one
// of those streams is capturing a graph.
class SideWork {
 public:
  SideWork() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~SideWork() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  SideWork(const SideWork&) = delete;
  SideWork& operator=(const SideWork&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

// A non-blocking stream for one piece of side work, on the current device:
// made and destroyed around it (set-up is rare; a stream kept per thread
// would outlive threads that never come back).
class SideStream {
 public:
  SideStream() { err_ = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking); }
  ~SideStream() {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  cudaError_t error() const { return err_; }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
  cudaError_t err_ = cudaSuccess;
};

}  // namespace

Result<void*> deviceAlloc(size_t bytes) {
  SideWork side;
  void* ptr = nullptr;
  WEFT_CUDA_RETURN(cudaMalloc(&ptr, bytes));
  const SideStream stream;
  cudaError_t err = stream.error();
  if (err == cudaSuccess) err = cudaMemsetAsync(ptr, 0, bytes, stream.get());
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream.get());
  if (err != cudaSuccess) {
    cudaFree(ptr);
    return errorFromCode(err, "zero-filling new device memory on a side stream");
  }
  WEFT_INFO(log::kAlloc, "cudaMalloc Size %zu pointer %p", bytes, ptr);
  return ptr;
}

void deviceFree(void* ptr) { (void)deviceFreeChecked(ptr); }

Status deviceFreeChecked(void* ptr) {
  SideWork side;
  if (ptr != nullptr) WEFT_CUDA_RETURN(cudaFree(ptr));
  return okStatus();
}

Status hostAllocMapped(size_t bytes, void** host, void** device) {
  SideWork side;
  WEFT_CUDA_RETURN(cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
  std::memset(*host, 0, bytes);
  const cudaError_t err = cudaHostGetDevicePointer(device, *host, 0);
  if (err != cudaSuccess) {
    cudaFreeHost(*host);
    *host = nullptr;
    return errorFromCode(err, "cudaHostGetDevicePointer");
  }
  WEFT_INFO(log::kAlloc, "cudaHostAlloc (mapped) Size %zu pointer %p", bytes, *host);
  return okStatus();
}

void hostFree(void* host) {
  SideWork side;
  if (host != nullptr) cudaFreeHost(host);
}

Result<void*> hostRegisterMapped(void* host, size_t bytes) {
  SideWork side;
  WEFT_CUDA_RETURN(cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable));
  void* device = nullptr;
  const cudaError_t err = cudaHostGetDevicePointer(&device, host, 0);
  if (err != cudaSuccess) {
    cudaHostUnregister(host);
    return errorFromCode(err, "cudaHostGetDevicePointer");
  }
  return device;
}

void hostUnregister(void* host) {
  SideWork side;
  if (host != nullptr) cudaHostUnregister(host);
}

Status copyToDevice(void* dst, const void* src, size_t bytes) {
  SideWork side;
  const SideStream stream;
  WEFT_CUDA_RETURN(stream.error());
  WEFT_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream.get()));
  WEFT_CUDA_RETURN(cudaStreamSynchronize(stream.get()));
  return okStatus();
}

Status copyAsync(void* dst, const void* src, size_t bytes, Stream stream) {
  WEFT_CUDA_RETURN(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream));
  return okStatus();
}

MemoryKind pointerKind(const void* ptr, int* device) {
  if (device) *device = -1;
  if (ptr == nullptr || deviceCount() == 0) return MemoryKind::kHost;
  cudaPointerAttributes attr{};
  if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
    cudaGetLastError();
    return MemoryKind::kUnknown;
  }
  if (device) *device = attr.device;
  switch (attr.type) {
    case cudaMemoryTypeDevice: return MemoryKind::kDevice;
    case cudaMemoryTypeManaged: return MemoryKind::kManaged;
    case cudaMemoryTypeHost: return attr.devicePointer != nullptr ? MemoryKind::kHostMapped : MemoryKind::kHost;
    default: return MemoryKind::kHost;
  }
}

const char* memoryKindName(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::kHost: return "host memory";
    case MemoryKind::kDevice: return "device memory";
    case MemoryKind::kManaged: return "managed memory";
    case MemoryKind::kHostMapped: return "pinned, mapped host memory";
    default: return "memory of unknown kind";
  }
}

Status ipcGetHandle(void* ptr, char handle[kIpcHandleBytes]) {
  static_assert(sizeof(cudaIpcMemHandle_t) == kIpcHandleBytes, "IPC handle size");
  cudaIpcMemHandle_t h;
  WEFT_CUDA_RETURN(cudaIpcGetMemHandle(&h, ptr));
  std::memcpy(handle, &h, sizeof(h));
  return okStatus();
}

Result<void*> ipcOpenHandle(const char handle[kIpcHandleBytes]) {
  SideWork side;
  cudaIpcMemHandle_t h;
  std::memcpy(&h, handle, sizeof(h));
  void* ptr = nullptr;
  WEFT_CUDA_RETURN(cudaIpcOpenMemHandle(&ptr, h, cudaIpcMemLazyEnablePeerAccess));
  return ptr;
}

void ipcCloseHandle(void* ptr) {
  SideWork side;
  if (ptr != nullptr) cudaIpcCloseMemHandle(ptr);
}

bool canAccessPeer(int device, int peerDevice) {
  if (device == peerDevice) return true;
  int can = 0;
  return cudaDeviceCanAccessPeer(&can, device, peerDevice) == cudaSuccess && can != 0;
}

Status enablePeerAccess(int peerDevice) {
  SideWork side;
  cudaError_t err = cudaDeviceEnablePeerAccess(peerDevice, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return okStatus();
  }
  WEFT_CUDA_RETURN(err);
  return okStatus();
}

std::string pciBusId(int device) {
  char id[32] = {0};
  if (cudaDeviceGetPCIBusId(id, sizeof(id), device) != cudaSuccess) return "";
  return id;
}

int deviceByPciBusId(const std::string& busId) {
  int device = -1;
  if (busId.empty() || cudaDeviceGetByPCIBusId(&device, busId.c_str()) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  return device;
}

bool mpsEnabled(int device) {
  int value = 0;
  if (cudaDeviceGetAttribute(&value, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return value != 0;
}

Result<Stream> streamCreate() {
  SideWork side;
  cudaStream_t stream = nullptr;
  WEFT_CUDA_RETURN(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  return stream;
}

void streamDestroy(Stream stream) {
  if (stream != nullptr) cudaStreamDestroy(stream);
}

bool streamIsLegacyDefault(Stream stream) { return stream == nullptr || stream == cudaStreamLegacy; }

bool streamIsBlocking(Stream stream) {
  if (streamIsLegacyDefault(stream) || stream == cudaStreamPerThread) return false;
  unsigned flags = cudaStreamNonBlocking;
  if (cudaStreamGetFlags(stream, &flags) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return (flags & cudaStreamNonBlocking) == 0;
}

bool streamIsCapturing(Stream stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &status) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return status == cudaStreamCaptureStatusActive;
}

Result<Event> eventCreate() {
  cudaEvent_t event = nullptr;
  WEFT_CUDA_RETURN(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
  return event;
}

void eventDestroy(Event event) {
  if (event != nullptr) cudaEventDestroy(event);
}

Status eventRecord(Event event, Stream stream) {
  WEFT_CUDA_RETURN(cudaEventRecord(event, stream));
  return okStatus();
}

Status streamWaitEvent(Stream stream, Event event) {
  WEFT_CUDA_RETURN(cudaStreamWaitEvent(stream, event, 0));
  return okStatus();
}

Result<bool> eventDone(Event event) {
  SideWork side;  // a query is among the calls a global-mode capture on another thread forbids
  cudaError_t err = cudaEventQuery(event);
  if (err == cudaSuccess) return true;
  if (err == cudaErrorNotReady) {
    cudaGetLastError();
    return false;
  }
  return errorFromCode(err, "cudaEventQuery");
}

Status reserveStack(size_t bytesPerThread) {
  if (bytesPerThread == 0) return okStatus();
  size_t current = 0;
  WEFT_CUDA_RETURN(cudaDeviceGetLimit(&current, cudaLimitStackSize));
  if (current >= bytesPerThread) return okStatus();
  WEFT_CUDA_RETURN(cudaDeviceSetLimit(cudaLimitStackSize, bytesPerThread));
  WEFT_INFO(log::kInit, "kernel stack raised from %zu to %zu bytes per thread", current, bytesPerThread);
  return okStatus();
}

}  // namespace weft::cuda
