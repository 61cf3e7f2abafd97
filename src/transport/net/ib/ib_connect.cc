#include "transport/net/ib/ib_connect.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <thread>

#include "common/hash.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/net/ib/ib_comm.h"

namespace weft::transport::ib {
namespace {

constexpr uint64_t kHandleMagic = 0x5765667449426e31ull;  // "WeftIBn1"
constexpr uint8_t kReady = 0x52;
constexpr int kHelloTimeoutMs = 10000;  // a connection silent this long is a stranger

struct Handshake;

struct Handle {
  uint64_t magic;
  uint64_t cookie;
  int32_t nQps;    // the receiver's NCCL_IB_QPS_PER_CONNECTION
  int32_t nPorts;  // the receiver's network device's ports
  SocketAddress address;
  Handshake* pending;  // sender side only: its set-up in progress (null in what the receiver sends)
};
static_assert(sizeof(Handle) <= kNetHandleBytes, "IB handle exceeds the plugin handle size");

// One side's set-up in progress.
struct Handshake {
  Socket socket;
  std::unique_ptr<IbComm> comm;
  QpInfo peerInfo{};
  size_t got = 0;  // bytes of peerInfo (then of the ready byte) received
  uint8_t ready = 0;
  bool answered = false;  // receiver: its own info is sent
  Deadline deadline = Deadline::never();
};

struct ListenComm {
  IbNetDevice* device = nullptr;
  Socket listener;
  Handle handle{};
  std::unique_ptr<Handshake> pending;
};

Result<IbNetDevice*> deviceAt(int dev) {
  std::string why;
  const auto& devices = ibDevices(&why);
  if (dev < 0 || dev >= static_cast<int>(devices.size()))
    return errorStatus(ncclInvalidArgument, "IB: no network device %d (there are %zu)", dev, devices.size());
  return devices[static_cast<size_t>(dev)].get();
}

// The address the set-up socket listens on: the first interface
// NCCL_SOCKET_IFNAME / NCCL_SOCKET_FAMILY select, as for bootstrap.
Result<SocketAddress> setupAddress() {
  static std::once_flag once;
  static std::vector<NetInterface> found;
  std::call_once(once, [] { found = findInterfaces(param::socketIfname(), param::socketFamily(), 1); });
  if (found.empty())
    return errorStatus(ncclSystemError,
                       "IB: no interface for the connection set-up socket matches "
                       "NCCL_SOCKET_IFNAME=\"%s\"",
                       param::socketIfname().c_str());
  return found[0].address;
}

// Reads what has arrived of `bytes` bytes into `into` without waiting; true
// once all are in.
Result<bool> readSome(const Socket& s, void* into, size_t bytes, size_t* got) {
  while (*got < bytes) {
    WEFT_ASSIGN_OR_RETURN(size_t n, s.recvSome(static_cast<char*>(into) + *got, bytes - *got));
    if (n == 0) return false;
    *got += n;
  }
  return true;
}

int qpsPerConnection() { return static_cast<int>(std::clamp<int64_t>(param::ibQpsPerConnection(), 1, kMaxQps)); }

// The listener is there since before the handle: a refusal means its
// process is gone; other failures are retried until the deadline.
Result<Socket> connectToListener(const SocketAddress& address, Deadline deadline) {
  for (;;) {
    int err = 0;
    Result<Socket> s = Socket::connectOnce(address, 250, &err);
    if (s.ok() || err == ECONNREFUSED || deadline.expired())
      return s.ok() ? std::move(s) : s.status().withContext("IB: the peer's set-up listener is gone or unreachable");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

// The connection's queue pairs: the receiver's QPs per connection for every
// port of the side with more ports (so each port of either side carries
// some), at most kMaxQps. The sender decides; the receiver takes its count.
int connectionQps(const Handle& h, const IbNetDevice& sender) {
  return std::min(kMaxQps, h.nQps * std::max(h.nPorts, sender.portCount()));
}

Result<std::unique_ptr<Handshake>> startConnect(IbNetDevice* device, const Handle& h) {
  auto hs = std::make_unique<Handshake>();
  hs->deadline = Deadline::afterSec(param::bootstrapTimeoutSec());
  WEFT_ASSIGN_OR_RETURN(hs->socket, connectToListener(h.address, hs->deadline));
  hs->comm = std::make_unique<IbComm>(true, device, connectionQps(h, *device));
  hs->comm->peer = h.address.toString();
  WEFT_RETURN_IF_ERROR(hs->comm->createQueues());
  const QpInfo info = hs->comm->localInfo(h.cookie);
  WEFT_RETURN_IF_ERROR(hs->socket.sendAll(&info, sizeof(info), hs->deadline));
  return hs;
}

// Sender: true once the receiver answered and this side is ready.
Result<bool> finishConnect(Handshake* hs) {
  WEFT_ASSIGN_OR_RETURN(bool in, readSome(hs->socket, &hs->peerInfo, sizeof(hs->peerInfo), &hs->got));
  if (!in) {
    if (hs->deadline.expired())
      return errorStatus(ncclRemoteError, "IB: %s did not answer the connection set-up within WEFT_BOOTSTRAP_TIMEOUT",
                         hs->comm->peer.c_str());
    return false;
  }
  WEFT_RETURN_IF_ERROR(hs->comm->connectQps(hs->peerInfo));
  WEFT_RETURN_IF_ERROR(hs->socket.sendAll(&kReady, 1, hs->deadline));
  return true;
}

// Receiver: reads the sender's info, then answers; true once the ready
// byte arrived. A stranger without the cookie is dropped (false, reset).
Result<bool> progressAccept(ListenComm* lc) {
  Handshake* hs = lc->pending.get();
  if (!hs->answered) {
    WEFT_ASSIGN_OR_RETURN(bool in, readSome(hs->socket, &hs->peerInfo, sizeof(hs->peerInfo), &hs->got));
    if (!in && !hs->deadline.expired()) return false;
    if (!in || hs->peerInfo.cookie != lc->handle.cookie) {
      WEFT_WARN("IB network: dropped a connection from %s that did not present this connection's cookie in time",
                hs->socket.peerAddress().toString().c_str());
      lc->pending.reset();
      return false;
    }
    hs->comm = std::make_unique<IbComm>(false, lc->device, hs->peerInfo.nQps);
    hs->comm->peer = hs->socket.peerAddress().toString();
    if (hs->peerInfo.nQps < 1 || hs->peerInfo.nQps > kMaxQps)
      return errorStatus(ncclRemoteError, "IB: %s asked for %d queue pairs (1 to %d expected)",
                         hs->comm->peer.c_str(), hs->peerInfo.nQps, kMaxQps);
    WEFT_RETURN_IF_ERROR(hs->comm->createQueues());
    WEFT_RETURN_IF_ERROR(hs->comm->connectQps(hs->peerInfo));
    const QpInfo info = hs->comm->localInfo(lc->handle.cookie);
    WEFT_RETURN_IF_ERROR(hs->socket.sendAll(&info, sizeof(info), hs->deadline));
    hs->answered = true;
    hs->got = 0;
  }
  WEFT_ASSIGN_OR_RETURN(bool ready, readSome(hs->socket, &hs->ready, 1, &hs->got));
  if (ready && hs->ready != kReady)
    return errorStatus(ncclRemoteError, "IB: %s sent a malformed set-up message", hs->comm->peer.c_str());
  return ready;
}

}  // namespace

ncclResult_t listen(int dev, void* opaqueHandle, void** listenComm) {
  Result<IbNetDevice*> device = deviceAt(dev);
  if (!device.ok()) return report(device.status());
  Result<SocketAddress> address = setupAddress();
  if (!address.ok()) return report(address.status());
  Result<Socket> listener = Socket::listen(address.value());
  if (!listener.ok()) return report(listener.status().withContext("IB: set-up listener"));
  auto lc = std::make_unique<ListenComm>();
  lc->device = device.value();
  lc->listener = std::move(listener).value();
  lc->handle = Handle{kHandleMagic,         randomU64(), qpsPerConnection(), lc->device->portCount(),
                      lc->listener.localAddress(), nullptr};
  std::memset(opaqueHandle, 0, kNetHandleBytes);
  std::memcpy(opaqueHandle, &lc->handle, sizeof(Handle));
  *listenComm = lc.release();
  return ncclSuccess;
}

ncclResult_t connect(int dev, void* opaqueHandle, void** sendComm) {
  *sendComm = nullptr;
  Handle h;
  std::memcpy(&h, opaqueHandle, sizeof(h));
  if (h.magic != kHandleMagic || h.nQps < 1 || h.nQps > kMaxQps || h.nPorts < 1 || h.nPorts > kMaxPortsPerDevice)
    return report(errorStatus(ncclInternalError, "IB: not an IB network handle"));
  std::unique_ptr<Handshake> hs(h.pending);
  if (!hs) {
    Result<IbNetDevice*> device = deviceAt(dev);
    if (!device.ok()) return report(device.status());
    Result<std::unique_ptr<Handshake>> started = startConnect(device.value(), h);
    if (!started.ok()) return report(started.status().withContext("connecting to " + h.address.toString()));
    hs = std::move(started).value();
  }
  Result<bool> done = finishConnect(hs.get());
  h.pending = done.ok() && !done.value() ? hs.get() : nullptr;
  std::memcpy(opaqueHandle, &h, sizeof(h));
  if (!done.ok()) return report(done.status());  // the handshake is dropped, and the handle forgets it
  if (!done.value()) {
    (void)hs.release();  // kept in the handle until the next call
    return ncclSuccess;
  }
  hs->comm->control = std::move(hs->socket);
  *sendComm = hs->comm.release();
  return ncclSuccess;
}

ncclResult_t accept(void* opaqueListen, void** recvComm) {
  auto* lc = static_cast<ListenComm*>(opaqueListen);
  *recvComm = nullptr;
  if (!lc->pending) {
    Result<bool> readable = lc->listener.waitReadable(0);
    if (!readable.ok()) return report(readable.status());
    if (!readable.value()) return ncclSuccess;
    Result<Socket> s = lc->listener.accept(Deadline::afterMs(1000));
    if (!s.ok()) return report(s.status());
    lc->pending = std::make_unique<Handshake>();
    lc->pending->socket = std::move(s).value();
    lc->pending->deadline = Deadline::afterMs(kHelloTimeoutMs);
  }
  Result<bool> done = progressAccept(lc);
  if (!done.ok()) {
    lc->pending.reset();
    return report(done.status());
  }
  if (!done.value()) return ncclSuccess;
  Handshake* hs = lc->pending.get();
  hs->comm->control = std::move(hs->socket);
  *recvComm = hs->comm.release();
  lc->pending.reset();
  return ncclSuccess;
}

SocketAddress handleAddress(const void* opaqueHandle) {
  Handle h;
  std::memcpy(&h, opaqueHandle, sizeof(h));
  return h.address;
}

ncclResult_t closeListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return ncclSuccess;
}

}  // namespace weft::transport::ib
