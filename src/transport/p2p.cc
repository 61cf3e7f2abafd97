// p2p transport, host flavour: both ranks live in one process, so the FIFO
// is ordinary heap memory and the blob carries a key into a process-wide
// table from which the sender takes its share of ownership.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "common/hash.h"
#include "common/log.h"
#include "transport/transport.h"

namespace weft::transport {
namespace {

class InProcessRegistry {
 public:
  uint64_t put(std::shared_ptr<void> memory) {
    std::lock_guard<std::mutex> lock(mutex_);
    uint64_t key = ++lastKey_ ^ (randomSalt_ << 32);
    table_[key] = std::move(memory);
    return key;
  }
  std::shared_ptr<void> take(uint64_t key) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = table_.find(key);
    if (it == table_.end()) return nullptr;
    std::shared_ptr<void> memory = std::move(it->second);
    table_.erase(it);
    return memory;
  }

 private:
  std::mutex mutex_;
  uint64_t lastKey_ = 0;
  uint64_t randomSalt_ = randomU64() & 0xffffffffu;
  std::map<uint64_t, std::shared_ptr<void>> table_;
};

InProcessRegistry& registry() {
  static InProcessRegistry* instance = new InProcessRegistry();  // outlives static destruction
  return *instance;
}

struct P2pBlob {
  uint64_t key;
  void* base;
};

class P2pTransport final : public Transport {
 public:
  const char* name() const override { return "P2P/direct"; }
  TransportId id() const override { return TransportId::kP2p; }

  Status setupRecv(const LinkSpec& link, Connection* conn, ConnectBlob* blob) const override {
    size_t bytes = FifoLayout::totalBytes(link.stepBytes);
    void* base = std::aligned_alloc(4096, bytes);
    if (base == nullptr)
      return errorStatus(ncclSystemError, "cannot allocate %zu bytes of FIFO memory for channel %d from rank %d", bytes,
                         link.channel, link.peer);
    std::memset(base, 0, bytes);
    WEFT_INFO(log::kAlloc, "channel %d: FIFO from rank %d, host memory Size %zu pointer %p", link.channel, link.peer,
              bytes, base);
    std::shared_ptr<void> memory(base, [](void* p) { std::free(p); });
    P2pBlob payload{registry().put(memory), base};
    blob->transportId = static_cast<uint32_t>(id());
    blob->bytes = sizeof(payload);
    std::memcpy(blob->data, &payload, sizeof(payload));
    FifoLayout::attach(base, link.stepBytes, link.peer, &conn->end);
    conn->end.reach = device::kReachAddress;  // user buffers of both ranks are addressable here: direct mode
    conn->keepAlive = std::move(memory);
    conn->transport = this;
    return okStatus();
  }

  Status connectSend(const LinkSpec& link, const ConnectBlob& blob, Connection* conn) const override {
    P2pBlob payload;
    std::memcpy(&payload, blob.data, sizeof(payload));
    std::shared_ptr<void> memory = registry().take(payload.key);
    if (memory == nullptr || memory.get() != payload.base)
      return errorStatus(ncclInternalError,
                         "p2p connect to rank %d on channel %d: the peer's FIFO is not in this process", link.peer,
                         link.channel);
    FifoLayout::attach(payload.base, link.stepBytes, link.peer, &conn->end);
    conn->end.reach = device::kReachAddress;
    conn->keepAlive = std::move(memory);
    conn->transport = this;
    return okStatus();
  }
};

}  // namespace

const Transport& p2pTransport() {
  static const P2pTransport instance;
  return instance;
}

}  // namespace weft::transport
