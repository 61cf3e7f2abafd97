// Memory and registration entry points, and user reduction operations.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_set>

#include "common/shared_mem.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/enqueue.h"

using namespace weft::core;

namespace {

// ncclMemFree must reject pointers ncclMemAlloc did not return.
struct AllocationTable {
  std::mutex mutex;
  std::unordered_set<void*> live;        // private host memory
  std::unordered_set<void*> liveDevice;  // cudaMalloc'd on the cuda backend
};

AllocationTable& allocations() {
  static AllocationTable* table = new AllocationTable();
  return *table;
}

constexpr size_t kPageBytes = 4096;

}  // namespace

namespace weft::core {

// A registration handle: records what was registered so deregistration can
// be checked. On the host backend registration changes nothing on the data
// path: direct mode between processes finds ncclMemAlloc memory by address
// (the segment table) whether registered or not, and reaches other buffers
// by cross-memory attach where enabled, else through the FIFO
// (docs/fifo-protocol.md, "Direct mode between processes"). On the cuda
// backend a window is collective and makes the buffer reachable by the
// node's peers in other processes (cudaWindowRegister); ncclCommRegister
// stays bookkeeping there.
struct Registration {
  uint64_t magic;
  ncclComm_t comm;
  void* buff;
  size_t size;
  uint64_t windowId;  // cuda backend windows: the id cudaWindowRegister gave (0: none)
};
constexpr uint64_t kRegMagic = 0x5765667452656721ull;

}  // namespace weft::core

// Window handles are registrations too (ncclWindow is opaque to users).
struct ncclWindow : Registration {};

namespace {

// Device memory when communicators made now would run on the cuda backend
// (NCCL's behaviour); otherwise a shareable segment (common/shared_mem.h)
// that local peers in other processes can map, or page-aligned private
// memory where segments cannot be made.
weft::Status memAlloc(void** ptr, size_t size) {
  if (ptr == nullptr)
    return weft::errorStatus(ncclInvalidArgument, "ptr is NULL, expected a pointer to store the address");
  *ptr = nullptr;
  if (size == 0) return weft::errorStatus(ncclInvalidArgument, "size is 0, expected at least 1 byte");
  WEFT_ASSIGN_OR_RETURN(weftBackend_t backend, chooseBackend());
  if (backend == weftBackendCuda) {
    WEFT_ASSIGN_OR_RETURN(*ptr, weft::cuda::deviceAlloc(size));
    {
      std::lock_guard<std::mutex> lock(allocations().mutex);
      allocations().liveDevice.insert(*ptr);
    }
    WEFT_INFO(weft::log::kAlloc, "ncclMemAlloc: cudaMalloc Size %zu pointer %p", size, *ptr);
    return weft::okStatus();
  }
  weft::Result<void*> shared = weft::sharedAlloc(size);
  if (shared.ok()) {
    *ptr = shared.value();
    WEFT_INFO(weft::log::kAlloc, "ncclMemAlloc: shared host memory Size %zu pointer %p", size, *ptr);
    return weft::okStatus();
  }
  WEFT_INFO(weft::log::kAlloc, "ncclMemAlloc: no shareable segment (%s); private host memory",
            shared.status().message().c_str());
  void* p = nullptr;
  const size_t rounded = (size + kPageBytes - 1) / kPageBytes * kPageBytes;
  if (posix_memalign(&p, kPageBytes, rounded) != 0 || p == nullptr)
    return weft::errorStatus(ncclSystemError, "cannot allocate %zu bytes of host memory", rounded);
  std::lock_guard<std::mutex> lock(allocations().mutex);
  allocations().live.insert(p);
  *ptr = p;
  WEFT_INFO(weft::log::kAlloc, "ncclMemAlloc: host memory Size %zu pointer %p", rounded, p);
  return weft::okStatus();
}

weft::Status memFree(void* ptr) {
  if (ptr == nullptr) return weft::okStatus();
  if (weft::sharedFree(ptr)) return weft::okStatus();
  bool onDevice = false;
  {
    std::lock_guard<std::mutex> lock(allocations().mutex);
    if (allocations().live.erase(ptr) != 0) {
      std::free(ptr);
      return weft::okStatus();
    }
    onDevice = allocations().liveDevice.erase(ptr) != 0;
  }
  if (onDevice) {
    int device = -1;
    (void)weft::cuda::pointerKind(ptr, &device);
    weft::cuda::DeviceGuard guard(device);  // -1: leaves the device as it is
    return weft::cuda::deviceFreeChecked(ptr);
  }
  return weft::errorStatus(ncclInvalidArgument, "ptr %p was not returned by ncclMemAlloc (or was already freed)", ptr);
}

}  // namespace

WEFT_NCCL_API(ncclResult_t, ncclMemAlloc, void** ptr, size_t size) {
  return apiCall("ncclMemAlloc", nullptr, [&] { return memAlloc(ptr, size); });
}

WEFT_NCCL_API(ncclResult_t, ncclMemFree, void* ptr) {
  return apiCall("ncclMemFree", nullptr, [&] { return memFree(ptr); });
}

namespace {

weft::Status registerBuffer(ncclComm_t comm, void* buff, size_t size, Registration* out) {
  WEFT_RETURN_IF_ERROR(checkComm(comm));
  if (buff == nullptr && size > 0)
    return weft::errorStatus(ncclInvalidArgument, "buff is NULL with size %zu, expected a buffer", size);
  *out = Registration{kRegMagic, comm, buff, size, 0};
  return weft::okStatus();
}

weft::Status checkRegistration(ncclComm_t comm, const Registration* reg, const char* name) {
  WEFT_RETURN_IF_ERROR(checkComm(comm));
  if (reg == nullptr || reg->magic != kRegMagic)
    return weft::errorStatus(ncclInvalidArgument, "%s %p is not a registration handle", name,
                             static_cast<const void*>(reg));
  if (reg->comm != comm)
    return weft::errorStatus(ncclInvalidArgument, "%s %p was registered on comm %p, not on comm %p", name,
                             static_cast<const void*>(reg), static_cast<void*>(reg->comm), static_cast<void*>(comm));
  return weft::okStatus();
}

}  // namespace

WEFT_NCCL_API(ncclResult_t, ncclCommRegister, const ncclComm_t comm, void* buff, size_t size, void** handle) {
  return apiCall("ncclCommRegister", comm, [&]() -> weft::Status {
    if (handle == nullptr) return weft::errorStatus(ncclInvalidArgument, "handle is NULL, expected a pointer");
    auto reg = std::make_unique<Registration>();
    WEFT_RETURN_IF_ERROR(registerBuffer(comm, buff, size, reg.get()));
    *handle = reg.release();
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommDeregister, const ncclComm_t comm, void* handle) {
  return apiCall("ncclCommDeregister", comm, [&]() -> weft::Status {
    auto* reg = static_cast<Registration*>(handle);
    WEFT_RETURN_IF_ERROR(checkRegistration(comm, reg, "handle"));
    reg->magic = 0;
    delete reg;
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommWindowRegister, ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win,
              int winFlags) {
  return apiCall("ncclCommWindowRegister", comm, [&]() -> weft::Status {
    if (win == nullptr) return weft::errorStatus(ncclInvalidArgument, "win is NULL, expected a pointer");
    if (winFlags != NCCL_WIN_DEFAULT && winFlags != NCCL_WIN_COLL_SYMMETRIC)
      return weft::errorStatus(ncclInvalidArgument,
                               "winFlags is 0x%x, expected NCCL_WIN_DEFAULT or NCCL_WIN_COLL_SYMMETRIC", winFlags);
    auto reg = std::make_unique<ncclWindow>();
    WEFT_RETURN_IF_ERROR(registerBuffer(comm, buff, size, reg.get()));
    if (asComm(comm)->backend == weftBackendCuda) {
      WEFT_ASSIGN_OR_RETURN(reg->windowId, cudaWindowRegister(asComm(comm), buff, size));
    }
    *win = reg.release();
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommWindowDeregister, ncclComm_t comm, ncclWindow_t win) {
  return apiCall("ncclCommWindowDeregister", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkRegistration(comm, win, "win"));
    if (win->windowId != 0) WEFT_RETURN_IF_ERROR(cudaWindowDeregister(asComm(comm), win->windowId));
    win->magic = 0;
    delete win;
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum, ncclRedOp_t* op, void* scalar, ncclDataType_t datatype,
              ncclScalarResidence_t residence, ncclComm_t comm) {
  return apiCall("ncclRedOpCreatePreMulSum", comm, [&]() -> weft::Status {
    if (op == nullptr) return weft::errorStatus(ncclInvalidArgument, "op is NULL, expected a pointer");
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    WEFT_ASSIGN_OR_RETURN(*op, asComm(comm)->ops.createPreMulSum(scalar, datatype, residence));
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclRedOpDestroy, ncclRedOp_t op, ncclComm_t comm) {
  return apiCall("ncclRedOpDestroy", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    return asComm(comm)->ops.destroy(op);
  });
}
