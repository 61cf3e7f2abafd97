// The socket network's plugin table. Connection set-up: the receiver listens
// on its interface and puts {address, cookie, socket counts} in the handle;
// the sender opens the control socket and the data sockets and says hello on
// each ({cookie, index}); the receiver's accept collects them by index and
// drops connections that do not know the cookie.
#include "transport/net/socket_net.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/hash.h"
#include "common/log.h"
#include "common/params.h"
#include "transport/net/socket_comm.h"

namespace weft::transport {

// Threads and sockets per connection: the product is at most 64. By default
// helper threads only where there are cores to run them: on small machines
// every hand-off to a helper costs more than the copy it saves (measured on
// 2 cores: 0 helpers moved 2 MiB 3.6x faster than 2 helpers; see
// docs/performance.md), while one TCP stream cannot fill a fast NIC.
int socketDefaultThreads(unsigned cores) { return cores >= 16 ? 4 : cores >= 8 ? 2 : 0; }

namespace {

using socknet::kMaxDataSockets;
using socknet::Request;
using socknet::SocketComm;

constexpr uint64_t kHandleMagic = 0x5765667453636b31ull;  // "WeftSck1"
constexpr int kHelloTimeoutMs = 10000;

struct Handle {
  uint64_t magic;
  uint64_t cookie;
  int32_t nThreads;
  int32_t nSockets;  // data sockets
  SocketAddress address;
};
static_assert(sizeof(Handle) <= kNetHandleBytes, "socket handle exceeds the plugin handle size");

struct Hello {
  uint64_t cookie;
  int32_t index;  // 0: control; 1..n: data socket index-1
  int32_t pad;
};

// An accepted connection whose hello has not all arrived yet.
struct PendingHello {
  Socket socket;
  Hello hello{};
  size_t received = 0;  // bytes of hello
  Deadline deadline = Deadline::never();
};

struct ListenComm {
  Socket listener;
  Handle handle;
  std::vector<Socket> got;  // by hello index
  int have = 0;
  std::vector<PendingHello> pending;
};

thread_local std::string tlsLastError;

ncclResult_t fail(const Status& s) {
  tlsLastError = s.message();
  WEFT_INFO(log::kNet, "socket network: %s", s.message().c_str());
  return s.code();
}

std::vector<NetInterface>& interfaces() {
  static std::vector<NetInterface> list;
  return list;
}

// The /sys directory of each interface's device, resolved once (the
// properties point into it; virtual interfaces have none).
std::vector<std::string>& pciPaths() {
  static std::vector<std::string> paths;
  return paths;
}

void socketCounts(int32_t* nThreads, int32_t* nSockets) {
  int64_t threads = param::socketNThreads();
  int64_t perThread = param::nsocksPerThread();
  if (threads < 0) threads = socketDefaultThreads(std::thread::hardware_concurrency());
  if (perThread < 0) perThread = 1;
  threads = std::clamp<int64_t>(threads, 0, kMaxDataSockets);
  perThread = std::clamp<int64_t>(perThread, 1, kMaxDataSockets);
  *nThreads = static_cast<int32_t>(threads);
  *nSockets = static_cast<int32_t>(std::min<int64_t>(threads * perThread, kMaxDataSockets));
}

ncclResult_t netInit(weftNetLogger_t) {
  static std::once_flag once;
  std::call_once(once, [] {
    interfaces() = findInterfaces(param::socketIfname(), param::socketFamily());
    for (const NetInterface& itf : interfaces()) {
      char* path = realpath(("/sys/class/net/" + itf.name + "/device").c_str(), nullptr);
      pciPaths().push_back(path ? path : "");
      std::free(path);
    }
  });
  return interfaces().empty()
             ? fail(errorStatus(ncclSystemError, "no network interface matches NCCL_SOCKET_IFNAME=\"%s\"",
                                param::socketIfname().c_str()))
             : ncclSuccess;
}

ncclResult_t netDevices(int* ndev) {
  *ndev = static_cast<int>(interfaces().size());
  return ncclSuccess;
}

// Speed from sysfs (Mb/s); virtual interfaces report nothing or -1.
int interfaceSpeed(const std::string& name) {
  FILE* f = std::fopen(("/sys/class/net/" + name + "/speed").c_str(), "r");
  int speed = -1;
  if (f) {
    if (std::fscanf(f, "%d", &speed) != 1) speed = -1;
    std::fclose(f);
  }
  return speed > 0 ? speed : 10000;
}

ncclResult_t netGetProperties(int dev, weftNetProperties_v8_t* props) {
  if (dev < 0 || dev >= static_cast<int>(interfaces().size()))
    return fail(errorStatus(ncclInvalidArgument, "no socket device %d", dev));
  const NetInterface& itf = interfaces()[static_cast<size_t>(dev)];
  std::memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(itf.name.c_str());
  const std::string& pci = pciPaths()[static_cast<size_t>(dev)];
  props->pciPath = pci.empty() ? nullptr : const_cast<char*>(pci.c_str());
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = kNetPtrHost;
  props->speed = interfaceSpeed(itf.name);
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = 1;
  props->netDeviceType = WEFT_NET_DEVICE_HOST;
  return ncclSuccess;
}

ncclResult_t netListen(int dev, void* opaqueHandle, void** listenComm) {
  if (dev < 0 || dev >= static_cast<int>(interfaces().size()))
    return fail(errorStatus(ncclInvalidArgument, "no socket device %d", dev));
  Result<Socket> listener = Socket::listen(interfaces()[static_cast<size_t>(dev)].address);
  if (!listener.ok()) return fail(listener.status());
  auto comm = std::make_unique<ListenComm>();
  comm->listener = std::move(listener).value();
  Handle& h = comm->handle;
  h.magic = kHandleMagic;
  h.cookie = randomU64();
  socketCounts(&h.nThreads, &h.nSockets);
  h.address = comm->listener.localAddress();
  comm->got.resize(static_cast<size_t>(h.nSockets) + 1);
  std::memset(opaqueHandle, 0, kNetHandleBytes);
  std::memcpy(opaqueHandle, &h, sizeof(h));
  *listenComm = comm.release();
  return ncclSuccess;
}

// The handle names a listener that existed before the handle was made: a
// refusal means its process is gone, and retrying would only wait out the
// deadline. Other failures (no answer yet) are retried until it.
Result<Socket> connectToListener(const SocketAddress& address, Deadline deadline) {
  for (;;) {
    int err = 0;
    Result<Socket> s = Socket::connectOnce(address, 250, &err);
    if (s.ok() || err == ECONNREFUSED || deadline.expired())
      return s.ok() ? std::move(s) : s.status().withContext("the peer's network listener is gone or unreachable");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

ncclResult_t netConnect(int, void* opaqueHandle, void** sendComm, weftNetDeviceHandle_v8_t**) {
  Handle h;
  std::memcpy(&h, opaqueHandle, sizeof(h));
  if (h.magic != kHandleMagic || h.nSockets < 0 || h.nSockets > kMaxDataSockets)
    return fail(errorStatus(ncclInternalError, "not a socket network handle"));
  const Deadline deadline = Deadline::afterSec(param::bootstrapTimeoutSec());
  std::vector<Socket> sockets;
  for (int32_t i = 0; i <= h.nSockets; ++i) {
    Result<Socket> s = connectToListener(h.address, deadline);
    if (!s.ok()) return fail(s.status());
    const Hello hello{h.cookie, i, 0};
    Status sent = s.value().sendAll(&hello, sizeof(hello), deadline);
    if (!sent.ok()) return fail(sent.withContext("hello to " + h.address.toString()));
    sockets.push_back(std::move(s).value());
  }
  Socket control = std::move(sockets[0]);
  sockets.erase(sockets.begin());
  *sendComm = new SocketComm(true, std::move(control), std::move(sockets), h.nThreads, h.address.toString());
  return ncclSuccess;
}

// Reads what has arrived of a pending connection's hello, without waiting.
// True once the connection is settled: filed under its index, or dropped
// (closed, silent past kHelloTimeoutMs, or without this listener's cookie).
bool settleHello(ListenComm* lc, PendingHello* p) {
  while (p->received < sizeof(p->hello)) {
    Result<size_t> n =
        p->socket.recvSome(reinterpret_cast<char*>(&p->hello) + p->received, sizeof(p->hello) - p->received);
    if (!n.ok()) break;
    if (n.value() == 0) {
      if (!p->deadline.expired()) return false;
      break;
    }
    p->received += n.value();
  }
  const size_t index = static_cast<size_t>(p->hello.index);
  if (p->received < sizeof(p->hello) || p->hello.cookie != lc->handle.cookie || p->hello.index < 0 ||
      index >= lc->got.size() || lc->got[index].valid()) {
    WEFT_WARN("socket network: dropped a connection to %s that did not present this connection's cookie",
              lc->handle.address.toString().c_str());
    return true;
  }
  lc->got[index] = std::move(p->socket);
  lc->have += 1;
  return true;
}

// Takes whatever connections are waiting and whatever of their hellos has
// arrived; returns the comm once all are in. Never waits for a hello: when
// hellos were read with a blocking receive, a stranger that connected and
// said nothing (a port scan) held an accept call for kHelloTimeoutMs.
ncclResult_t netAccept(void* opaqueListen, void** recvComm, weftNetDeviceHandle_v8_t**) {
  auto* lc = static_cast<ListenComm*>(opaqueListen);
  *recvComm = nullptr;
  for (;;) {
    Result<bool> readable = lc->listener.waitReadable(0);
    if (!readable.ok()) return fail(readable.status());
    if (!readable.value()) break;
    Result<Socket> s = lc->listener.accept(Deadline::afterMs(kHelloTimeoutMs));
    if (!s.ok()) return fail(s.status());
    lc->pending.push_back({std::move(s).value(), {}, 0, Deadline::afterMs(kHelloTimeoutMs)});
  }
  for (size_t i = 0; i < lc->pending.size();) {
    if (settleHello(lc, &lc->pending[i]))
      lc->pending.erase(lc->pending.begin() + static_cast<std::ptrdiff_t>(i));
    else
      ++i;
  }
  if (lc->have < static_cast<int>(lc->got.size())) return ncclSuccess;
  Socket control = std::move(lc->got[0]);
  std::vector<Socket> data;
  for (size_t i = 1; i < lc->got.size(); ++i) data.push_back(std::move(lc->got[i]));
  lc->got.clear();
  const std::string peer = control.peerAddress().toString();
  *recvComm = new SocketComm(false, std::move(control), std::move(data), lc->handle.nThreads, peer);
  return ncclSuccess;
}

// Sockets need no registration; the handle only has to be non-null.
ncclResult_t netRegMr(void* comm, void*, size_t, int type, void** mhandle) {
  if (type != kNetPtrHost) return fail(errorStatus(ncclInternalError, "socket network: only host memory"));
  *mhandle = comm;
  return ncclSuccess;
}

ncclResult_t netRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) {
  return fail(errorStatus(ncclInternalError, "socket network: no DMA-BUF support"));
}

ncclResult_t netDeregMr(void*, void*) { return ncclSuccess; }

ncclResult_t netIsend(void* sendComm, void* data, int size, int, void*, void** request) {
  *request = static_cast<SocketComm*>(sendComm)->post(data, size);
  return ncclSuccess;
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, int* sizes, int*, void**, void** request) {
  if (n != 1) return fail(errorStatus(ncclInternalError, "socket network: %d buffers in one receive (max 1)", n));
  *request = static_cast<SocketComm*>(recvComm)->post(data[0], sizes[0]);
  return ncclSuccess;
}

ncclResult_t netIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

ncclResult_t netTest(void* opaqueRequest, int* done, int* size) {
  auto* r = static_cast<Request*>(opaqueRequest);
  bool finished = false;
  int64_t bytes = 0;
  Status s = r->comm->test(r, &finished, &bytes);
  if (!s.ok())
    return fail(s.withContext(std::string(r->comm->isSend() ? "sending to " : "receiving from ") + r->comm->peer()));
  *done = finished ? 1 : 0;
  if (finished && size) *size = static_cast<int>(bytes);
  return ncclSuccess;
}

ncclResult_t netCloseComm(void* comm) {
  delete static_cast<SocketComm*>(comm);
  return ncclSuccess;
}

ncclResult_t netCloseListen(void* listenComm) {
  delete static_cast<ListenComm*>(listenComm);
  return ncclSuccess;
}

ncclResult_t netGetDeviceMr(void*, void*, void**) {
  return fail(errorStatus(ncclInternalError, "socket network: no device-side memory handles"));
}

ncclResult_t netIrecvConsumed(void*, int, void*) { return ncclSuccess; }

const weftNet_v8_t kSocketNet = {"Socket",     netInit,        netDevices,     netGetProperties, netListen,
                                 netConnect,   netAccept,      netRegMr,       netRegMrDmaBuf,   netDeregMr,
                                 netIsend,     netIrecv,       netIflush,      netTest,          netCloseComm,
                                 netCloseComm, netCloseListen, netGetDeviceMr, netIrecvConsumed};

}  // namespace

const weftNet_v8_t& socketNet() { return kSocketNet; }

std::string socketNetLastError() { return tlsLastError; }

}  // namespace weft::transport
