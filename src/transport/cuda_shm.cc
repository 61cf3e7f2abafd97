// cuda shm transport: the FIFO lives in a POSIX shared-memory segment that
// both sides pin and map into their device's address space, for GPUs that
// cannot reach each other directly. The device pointer replaces the host one
// in the FifoEnd; the segment name is unlinked as soon as the sender maps it.
#include <cstring>

#include "common/log.h"
#include "common/shm.h"
#include "device/backend/cuda/runtime.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

struct CudaShmBlob {
  uint64_t bytes;
  char name[232];
};

// A mapped segment plus its registration with CUDA, released in order.
struct PinnedSegment {
  ShmSegment segment;
  void* devicePtr = nullptr;
  ~PinnedSegment() { cuda::hostUnregister(segment.data()); }
};

Result<std::shared_ptr<PinnedSegment>> pin(ShmSegment segment) {
  auto pinned = std::make_shared<PinnedSegment>();
  pinned->segment = std::move(segment);
  WEFT_ASSIGN_OR_RETURN(pinned->devicePtr, cuda::hostRegisterMapped(pinned->segment.data(), pinned->segment.size()));
  return pinned;
}

class CudaShmTransport final : public Transport {
 public:
  const char* name() const override { return "SHM/CUDA"; }
  TransportId id() const override { return TransportId::kCudaShm; }

  Status setupRecv(const LinkSpec& link, Connection* conn, ConnectBlob* blob) const override {
    cuda::DeviceGuard guard(link.cudaDev);
    const size_t bytes = FifoLayout::totalBytes(link.stepBytes);
    std::string segName = makeShmName(strFormat("g%d-%dto%d", link.channel, link.peer, link.rank));
    WEFT_ASSIGN_OR_RETURN(ShmSegment seg, ShmSegment::create(segName, bytes));
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<PinnedSegment> pinned, pin(std::move(seg)));
    CudaShmBlob payload{};
    payload.bytes = bytes;
    std::snprintf(payload.name, sizeof(payload.name), "%s", segName.c_str());
    blob->transportId = static_cast<uint32_t>(id());
    blob->bytes = sizeof(payload);
    std::memcpy(blob->data, &payload, sizeof(payload));
    FifoLayout::attach(pinned->devicePtr, link.stepBytes, link.peer, &conn->end);
    conn->keepAlive = std::move(pinned);
    conn->transport = this;
    return okStatus();
  }

  Status connectSend(const LinkSpec& link, const ConnectBlob& blob, Connection* conn) const override {
    CudaShmBlob payload;
    std::memcpy(&payload, blob.data, sizeof(payload));
    payload.name[sizeof(payload.name) - 1] = '\0';
    cuda::DeviceGuard guard(link.cudaDev);
    Result<ShmSegment> seg = ShmSegment::open(payload.name, payload.bytes);
    ShmSegment::unlinkName(payload.name);
    if (!seg.ok()) return seg.status();
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<PinnedSegment> pinned, pin(std::move(seg).value()));
    FifoLayout::attach(pinned->devicePtr, link.stepBytes, link.peer, &conn->end);
    conn->keepAlive = std::move(pinned);
    conn->transport = this;
    return okStatus();
  }
};

}  // namespace

const Transport& cudaShmTransport() {
  static const CudaShmTransport instance;
  return instance;
}

}  // namespace weft::transport
