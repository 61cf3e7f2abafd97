// net transport: each side keeps a FIFO in its own memory, and the network
// joins them. The receiver listens and sends the handle in the blob; then the
// sender's connect and the receiver's accept are polled (progressSetup) until
// both return a comm: some networks finish a connect only once the peer
// accepted, so neither side may wait on one call alone. From then on the
// communicator's proxy moves the FIFO slots (src/proxy/).
//
// cuda backend: the FIFO is pinned host memory mapped into the rank's device
// (the proxy's host-side staging buffer). The kernel's FifoEnd holds the
// device mapping; core mirrors it into device memory like any other
// connection's (cudaMirrorConnection). See net_link.h.
#include <cstdlib>
#include <cstring>

#include "common/log.h"
#include "common/params.h"
#include "device/backend/cuda/runtime.h"
#include "transport/net/net_link.h"
#include "transport/net/net_rails.h"
#include "transport/net/net_wire.h"
#include "transport/transport.h"

namespace weft::transport {

void NetLink::closeNetwork() {
  if (net == nullptr) return;
  if (comm && mhandle) (void)net->api->deregMr(comm, mhandle);
  if (comm) (void)(isSend ? net->api->closeSend(comm) : net->api->closeRecv(comm));
  if (listenComm) (void)net->api->closeListen(listenComm);
  comm = mhandle = listenComm = nullptr;
}

namespace {

// Host backend: the worker and the proxy share plain host memory.
Result<NetFifoMemory> allocateHostFifo(const LinkSpec& link, size_t bytes) {
  void* base = std::aligned_alloc(4096, bytes);
  if (base == nullptr)
    return errorStatus(ncclSystemError, "cannot allocate %zu bytes of network FIFO memory for channel %d", bytes,
                       link.channel);
  std::memset(base, 0, bytes);
  WEFT_INFO(log::kAlloc, "channel %d: network FIFO, host memory Size %zu pointer %p", link.channel, bytes, base);
  NetFifoMemory memory;
  memory.owner = std::shared_ptr<void>(base, [](void* p) { std::free(p); });
  memory.proxyBase = memory.dataPathBase = base;
  return memory;
}

// cuda backend: pinned (so the device can reach it and the network can DMA
// from it) and mapped into the rank's device (so the kernel can address it).
// Portable pinning (runtime.cc) keeps it usable whichever device is current.
Result<NetFifoMemory> allocateMappedFifo(const LinkSpec& link, size_t bytes) {
  cuda::DeviceGuard guard(link.cudaDev);
  void* host = nullptr;
  void* mapped = nullptr;
  Status pinned = cuda::hostAllocMapped(bytes, &host, &mapped);
  if (!pinned.ok()) {
    cuda::hostFree(host);
    return pinned.withContext(strFormat("allocating %zu bytes of pinned network FIFO memory for channel %d on GPU %d",
                                        bytes, link.channel, link.cudaDev));
  }
  NetFifoMemory memory;
  memory.owner = std::shared_ptr<void>(host, [](void* p) { cuda::hostFree(p); });
  memory.proxyBase = host;
  memory.dataPathBase = mapped;
  return memory;
}

Status netError(const NetLink& l, const char* what, ncclResult_t code) {
  const std::string detail = networkLastError(*l.net);
  return errorStatus(code == ncclSuccess ? ncclSystemError : code, "%s %s %s on channel %d over %s: %s%s", what,
                     l.isSend ? "to" : "from", l.peerName.c_str(), l.channel, l.net->api->name(), resultName(code),
                     detail.empty() ? "" : (" (" + detail + ")").c_str());
}

Result<std::shared_ptr<NetLink>> makeLink(const LinkSpec& spec, bool isSend, Connection* conn) {
  WEFT_ASSIGN_OR_RETURN(const Network* net, network());
  auto link = std::make_shared<NetLink>();
  link->isSend = isSend;
  link->channel = spec.channel;
  link->rank = spec.rank;
  link->peer = spec.peer;
  link->peerName = spec.peerName;
  link->net = net;
  const RailChoice rail = chooseNetDevice(spec, netDeviceIdentities(*net), net->api->name());
  link->dev = rail.dev;
  // NCCL's form, with the device's name and where its choice came from.
  WEFT_INFO(log::kInit | log::kNet, "Channel %02d/0 : %d -> %d [%s] via NET/%s/%d(%s) %s", spec.channel,
            isSend ? spec.rank : spec.peer, isSend ? spec.peer : spec.rank, isSend ? "send" : "receive",
            net->api->name(), rail.dev, rail.name.c_str(), rail.planned ? spec.nicReason : "spread by channel");
  WEFT_ASSIGN_OR_RETURN(NetFifoMemory memory, allocateNetFifo(spec));
  attachNetFifo(memory, spec.stepBytes, spec.peer, &link->fifo, &conn->end);
  link->memory = std::move(memory.owner);
  return link;
}

// The proxy's host view, as host memory, on both backends: every slot with
// its gap (the trailer is sent from and received into it).
Status registerSlots(NetLink* l) {
  const size_t bytes = static_cast<size_t>(l->fifo.stepBytes + l->fifo.slotGap) * device::kFifoSteps;
  ncclResult_t rc = l->net->api->regMr(l->comm, l->fifo.slots, bytes, kNetPtrHost, &l->mhandle);
  return rc == ncclSuccess ? okStatus() : netError(*l, "registering FIFO memory for traffic", rc);
}

void adopt(std::shared_ptr<NetLink> link, const Transport* transport, Connection* conn) {
  conn->netLink = link.get();
  conn->keepAlive = std::move(link);
  conn->transport = transport;
}

class NetTransport final : public Transport {
 public:
  const char* name() const override { return "NET"; }
  TransportId id() const override { return TransportId::kNet; }

  Status setupRecv(const LinkSpec& spec, Connection* conn, ConnectBlob* blob) const override {
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<NetLink> link, makeLink(spec, false, conn));
    static_assert(kNetHandleBytes <= sizeof(blob->data), "network handle does not fit the connect blob");
    ncclResult_t rc = link->net->api->listen(link->dev, blob->data, &link->listenComm);
    if (rc != ncclSuccess) return netError(*link, "listening for a connection", rc);
    blob->transportId = static_cast<uint32_t>(id());
    blob->bytes = kNetHandleBytes;
    adopt(std::move(link), this, conn);
    return okStatus();
  }

  // The handshake may need the peer's accept, which it runs in its own
  // progressSetup: only keep the handle here.
  Status connectSend(const LinkSpec& spec, const ConnectBlob& blob, Connection* conn) const override {
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<NetLink> link, makeLink(spec, true, conn));
    static_assert(sizeof(link->peerHandle) <= sizeof(blob.data), "network handle does not fit the connect blob");
    std::memcpy(link->peerHandle, blob.data, sizeof(link->peerHandle));
    adopt(std::move(link), this, conn);
    return okStatus();
  }

  // One connect (sender) or accept (receiver) call; a null comm means the
  // handshake is still under way.
  Status progressSetup(const LinkSpec& /*spec*/, Connection* conn, bool* done) const override {
    NetLink* link = conn->netLink;
    *done = link->comm != nullptr;
    if (*done) return okStatus();
    ncclResult_t rc = link->isSend ? link->net->api->connect(link->dev, link->peerHandle, &link->comm)
                                   : link->net->api->accept(link->listenComm, &link->comm);
    if (rc != ncclSuccess) return netError(*link, link->isSend ? "connecting" : "accepting a connection", rc);
    if (link->comm == nullptr) return okStatus();
    if (!link->isSend) {
      (void)link->net->api->closeListen(link->listenComm);
      link->listenComm = nullptr;
    }
    WEFT_RETURN_IF_ERROR(registerSlots(link));
    *done = true;
    return okStatus();
  }
};

}  // namespace

// Laid out as a FIFO of (stepBytes + kNetSlotGap)-byte slots, so whatever
// FifoLayout places after the slots stays clear of the gaps.
size_t netFifoBytes(int64_t stepBytes) { return FifoLayout::totalBytes(stepBytes + kNetSlotGap); }

Result<NetFifoMemory> allocateNetFifo(const LinkSpec& spec) {
  const size_t bytes = netFifoBytes(spec.stepBytes);
  return spec.cudaDev >= 0 ? allocateMappedFifo(spec, bytes) : allocateHostFifo(spec, bytes);
}

void attachNetFifo(const NetFifoMemory& memory, int64_t stepBytes, int peer, device::FifoEnd* proxyView,
                   device::FifoEnd* dataPathView) {
  auto attach = [&](void* base, device::FifoEnd* view) {
    FifoLayout::attach(base, stepBytes + kNetSlotGap, peer, view);
    view->stepBytes = stepBytes;  // what the data path may fill; the gap is the trailer's
    view->slotGap = kNetSlotGap;
  };
  attach(memory.proxyBase, proxyView);
  attach(memory.dataPathBase, dataPathView);
}

const Transport& netTransport() {
  static const NetTransport instance;
  return instance;
}

}  // namespace weft::transport
