// shm transport: the receiver creates a shared-memory segment holding the
// FIFO and sends its name; the sender maps it and immediately unlinks the
// name, so from then on the memory lives exactly as long as the two mappings
// and a crash leaks nothing in /dev/shm.
#include <cstring>

#include "common/log.h"
#include "common/shm.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

struct ShmBlob {
  uint64_t bytes;
  char name[232];
};

class ShmTransport final : public Transport {
 public:
  const char* name() const override { return "SHM"; }
  TransportId id() const override { return TransportId::kShm; }

  Status setupRecv(const LinkSpec& link, Connection* conn, ConnectBlob* blob) const override {
    size_t bytes = FifoLayout::totalBytes(link.stepBytes);
    std::string segName = makeShmName(strFormat("c%d-%dto%d", link.channel, link.peer, link.rank));
    Result<ShmSegment> seg = ShmSegment::create(segName, bytes);
    if (!seg.ok())
      return seg.status().withContext(strFormat("shm FIFO for channel %d from rank %d", link.channel, link.peer));
    ShmBlob payload{};
    payload.bytes = bytes;
    std::snprintf(payload.name, sizeof(payload.name), "%s", segName.c_str());
    blob->transportId = static_cast<uint32_t>(id());
    blob->bytes = sizeof(payload);
    std::memcpy(blob->data, &payload, sizeof(payload));
    auto owned = std::make_shared<ShmSegment>(std::move(seg).value());
    FifoLayout::attach(owned->data(), link.stepBytes, link.peer, &conn->end);
    conn->end.reach = device::kReachShared;  // both ends see the mailbox: direct mode between processes
    conn->keepAlive = std::move(owned);
    conn->transport = this;
    WEFT_TRACE(log::kShm, "channel %d: shm FIFO %s (%zu bytes) for data from rank %d", link.channel, segName.c_str(),
               bytes, link.peer);
    return okStatus();
  }

  Status connectSend(const LinkSpec& link, const ConnectBlob& blob, Connection* conn) const override {
    ShmBlob payload;
    std::memcpy(&payload, blob.data, sizeof(payload));
    payload.name[sizeof(payload.name) - 1] = '\0';
    Result<ShmSegment> seg = ShmSegment::open(payload.name, payload.bytes);
    ShmSegment::unlinkName(payload.name);  // mapped or not, the name has served its purpose
    if (!seg.ok())
      return seg.status().withContext(strFormat("shm FIFO for channel %d to rank %d", link.channel, link.peer));
    auto owned = std::make_shared<ShmSegment>(std::move(seg).value());
    FifoLayout::attach(owned->data(), link.stepBytes, link.peer, &conn->end);
    conn->end.reach = device::kReachShared;
    conn->keepAlive = std::move(owned);
    conn->transport = this;
    return okStatus();
  }
};

}  // namespace

const Transport& shmTransport() {
  static const ShmTransport instance;
  return instance;
}

}  // namespace weft::transport
