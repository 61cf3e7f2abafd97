// cuda p2p transport: the receiver allocates the FIFO in its own device
// memory. A sender in the same process uses the pointer directly (enabling
// peer access when the devices differ); a sender in another process maps it
// through a CUDA IPC handle. Several ranks on one GPU take the same path.
//
// Ranks of one process on one GPU may use direct mode (reach kReachAddress):
// any user buffer of one is a pointer the other's kernel can write, device
// memory or mapped host memory alike. Across GPUs, even in one process, the
// links stay on the slots: peer access covers cudaMalloc memory but not a
// stream-ordered pool's (cudaMallocAsync) unless the pool grants it. Between
// processes (reach kReachShared, only where direct mode is allowed) only
// outputs in registered windows are written directly, through the writer's
// IPC mapping of the window (device/windows.h); other outputs go through the
// slots.
#include <unistd.h>

#include <cstring>
#include <map>
#include <mutex>

#include "common/hash.h"
#include "common/log.h"
#include "device/backend/cuda/runtime.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

struct CudaP2pBlob {
  int32_t pid;
  int32_t device;
  void* base;  // valid in the receiver's process
  char ipc[cuda::kIpcHandleBytes];
  char busId[32];
};

std::shared_ptr<void> ownDeviceMemory(void* ptr, int device) {
  return std::shared_ptr<void>(ptr, [device](void* p) {
    cuda::DeviceGuard guard(device);
    cuda::deviceFree(p);
  });
}

std::shared_ptr<void> ownIpcMapping(void* ptr, int device) {
  return std::shared_ptr<void>(ptr, [device](void* p) {
    cuda::DeviceGuard guard(device);
    cuda::ipcCloseHandle(p);
  });
}

// Same-process senders take shared ownership from here, so the memory
// outlives whichever rank is destroyed first.
std::mutex registryMutex;
std::map<void*, std::shared_ptr<void>>& registry() {
  static auto* table = new std::map<void*, std::shared_ptr<void>>();
  return *table;
}

// Both ends decide alike from the same facts (one process, one device,
// direct mode allowed on the communicator).
int32_t directReach(const LinkSpec& link) {
  if (!link.peerInProcess) return link.directAllowed ? device::kReachShared : device::kReachNone;
  return link.peerCudaDev == link.cudaDev ? device::kReachAddress : device::kReachNone;
}

class CudaP2pTransport final : public Transport {
 public:
  const char* name() const override { return "P2P/CUDA"; }
  TransportId id() const override { return TransportId::kCudaP2p; }

  Status setupRecv(const LinkSpec& link, Connection* conn, ConnectBlob* blob) const override {
    cuda::DeviceGuard guard(link.cudaDev);
    const size_t bytes = FifoLayout::totalBytes(link.stepBytes);
    WEFT_ASSIGN_OR_RETURN(void* base, cuda::deviceAlloc(bytes));
    std::shared_ptr<void> memory = ownDeviceMemory(base, link.cudaDev);
    CudaP2pBlob payload{};
    payload.pid = static_cast<int32_t>(getpid());
    payload.device = link.cudaDev;
    payload.base = base;
    std::snprintf(payload.busId, sizeof(payload.busId), "%s", cuda::pciBusId(link.cudaDev).c_str());
    if (link.peerInProcess) {
      std::lock_guard<std::mutex> lock(registryMutex);
      registry()[base] = memory;
    } else {
      WEFT_RETURN_IF_ERROR(cuda::ipcGetHandle(base, payload.ipc));
    }
    blob->transportId = static_cast<uint32_t>(id());
    blob->bytes = sizeof(payload);
    std::memcpy(blob->data, &payload, sizeof(payload));
    FifoLayout::attach(base, link.stepBytes, link.peer, &conn->end);
    conn->end.reach = directReach(link);
    conn->keepAlive = std::move(memory);
    conn->transport = this;
    return okStatus();
  }

  Status connectSend(const LinkSpec& link, const ConnectBlob& blob, Connection* conn) const override {
    CudaP2pBlob payload;
    std::memcpy(&payload, blob.data, sizeof(payload));
    cuda::DeviceGuard guard(link.cudaDev);
    std::shared_ptr<void> memory;
    // The same test setupRecv made (process hashes, not pids: ranks in
    // separate pid namespaces can share a pid).
    if (link.peerInProcess) {
      std::lock_guard<std::mutex> lock(registryMutex);
      auto it = registry().find(payload.base);
      if (it == registry().end())
        return errorStatus(ncclInternalError, "cuda p2p to rank %d: its FIFO is not registered in this process",
                           link.peer);
      memory = std::move(it->second);
      registry().erase(it);
      if (payload.device != link.cudaDev) WEFT_RETURN_IF_ERROR(cuda::enablePeerAccess(payload.device));
    } else {
      WEFT_ASSIGN_OR_RETURN(void* mapped, cuda::ipcOpenHandle(payload.ipc));
      memory = ownIpcMapping(mapped, link.cudaDev);
    }
    FifoLayout::attach(memory.get(), link.stepBytes, link.peer, &conn->end);
    conn->end.reach = directReach(link);
    conn->keepAlive = std::move(memory);
    conn->transport = this;
    return okStatus();
  }
};

}  // namespace

const Transport& cudaP2pTransport() {
  static const CudaP2pTransport instance;
  return instance;
}

}  // namespace weft::transport
