// A network plugin for tests: moves messages between comms of one process
// through memory, exporting the NCCL plugin tables the build asks for
// (WEFT_LOOP_EXPORT_V6 ... _V12, one library per variant), so tests can load
// every interface version through NCCL_NET_PLUGIN and check which one Weft
// chose and that data arrived.
//
// Its handshake is the strict kind (as NCCL's IB network and several
// third-party plugins): a connect finishes only once the receiver has called
// accept for it, so a caller that spins in one connect before accepting
// anything never finishes. Sends complete when a receive has taken their
// bytes; requests of a comm complete in posting order.
//
// Variants: WEFT_LOOP_FAIL_INIT (init fails), WEFT_LOOP_NO_DEVICES (zero
// devices), WEFT_LOOP_COLLNET (also exports a CollNet table symbol),
// WEFT_LOOP_BLOCKING_ACCEPT (the older handshake: see kBlockingAccept).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/net/net_v11.h"
#include "transport/net/net_v6.h"
#include "transport/net/net_v7.h"
#include "transport/net/net_v9.h"

// Each variant exports some tables only, and uses only their functions.
#pragma GCC diagnostic ignored "-Wunused-function"

namespace {

constexpr uint64_t kHandleMagic = 0x776566746c6f6f70ull;  // "weftloop"
constexpr int kDevices = 2;

struct Stats {
  std::mutex mutex;
  int64_t connects = 0;
  int64_t accepts = 0;
  int64_t bytesReceived = 0;
  int lastInitVersion = 0;
};
Stats& stats() {
  static Stats s;
  return s;
}

struct Request;

// Both ends of one connection.
struct Pipe {
  std::mutex mutex;
  bool accepted = false;
  std::deque<Request*> sends;  // posted, not yet taken by a receive
  std::deque<Request*> recvs;  // posted, not yet filled
  int closedEnds = 0;
};

struct Comm;

struct Request {
  Pipe* pipe;
  Comm* comm;  // whose in-flight count it holds until tested done
  bool isSend;
  char* data;
  size_t bytes;  // send: its size; receive: room, then what arrived
  bool done = false;
  bool failed = false;
};

struct Comm {
  Pipe* pipe;
  bool isSend;
  int inFlight = 0;
  // Requests posted and not yet tested done (under pipe->mutex): close frees
  // them, as a comm closed with requests in flight (an abort) must.
  std::vector<Request*> live;
};

struct Listener {
  int dev;
  std::deque<Pipe*> arrivals;  // connects not yet accepted
};

struct Handle {
  uint64_t magic;
  Listener* listener;
  const void* process;  // stats()'s address: a handle from another process is refused
  Pipe* connecting;     // the connect under way: progress lives in the handle, as NCCL allows
};
static_assert(sizeof(Handle) <= kNetHandleBytes, "handle too big");

std::mutex& listenersMutex() {
  static std::mutex m;
  return m;
}

#if defined(WEFT_LOOP_EXPORT_V6)
constexpr int kMaxInFlight = kNetMaxRequestsV6;
#else
constexpr int kMaxInFlight = kNetMaxRequests;
#endif

// WEFT_LOOP_BLOCKING_ACCEPT: the handshake of NCCL's plugins before 2.12
// (and of fast-socket): connect finishes at once, accept blocks until a
// connect arrives.
#if defined(WEFT_LOOP_BLOCKING_ACCEPT)
constexpr bool kBlockingAccept = true;
#else
constexpr bool kBlockingAccept = false;
#endif
constexpr int kBlockingAcceptMs = 10000;

weftNetLogger_t logger = nullptr;

ncclResult_t loopInit(weftNetLogger_t log, int version) {
  logger = log;
  std::lock_guard<std::mutex> lock(stats().mutex);
  stats().lastInitVersion = version;
#if defined(WEFT_LOOP_FAIL_INIT)
  return ncclSystemError;
#else
  return ncclSuccess;
#endif
}

ncclResult_t loopDevices(int* ndev) {
#if defined(WEFT_LOOP_NO_DEVICES)
  *ndev = 0;
#else
  *ndev = kDevices;
#endif
  return ncclSuccess;
}

// Fills the fields every version has; the caller adds the rest.
template <class Properties>
ncclResult_t loopProperties(int dev, Properties* props) {
  if (dev < 0 || dev >= kDevices) return ncclInvalidArgument;
  std::memset(props, 0, sizeof(*props));
  static char names[kDevices][8] = {"loop0", "loop1"};
  props->name = names[dev];
  props->guid = 0x1000 + static_cast<uint64_t>(dev);
  props->ptrSupport = kNetPtrHost;
  props->speed = 100000;
  props->latency = 1.0f;
  props->maxComms = 1 << 20;
  props->maxRecvs = 1;
  return ncclSuccess;
}

ncclResult_t loopListen(int dev, void* handle, void** listenComm) {
  auto* listener = new Listener{dev, {}};
  Handle h{kHandleMagic, listener, &stats(), nullptr};
  std::memset(handle, 0, kNetHandleBytes);
  std::memcpy(handle, &h, sizeof(h));
  *listenComm = listener;
  return ncclSuccess;
}

// First call: announces the connection to the listener. Later calls: done
// once the listener's accept took it.
ncclResult_t loopConnect(void* handle, void** sendComm) {
  *sendComm = nullptr;
  Handle h;
  std::memcpy(&h, handle, sizeof(h));
  if (h.magic != kHandleMagic || h.process != &stats()) return ncclSystemError;
  if (h.connecting == nullptr) {
    h.connecting = new Pipe;
    std::lock_guard<std::mutex> lock(listenersMutex());
    h.listener->arrivals.push_back(h.connecting);
    std::memcpy(handle, &h, sizeof(h));
    if (!kBlockingAccept) return ncclSuccess;
    *sendComm = new Comm{h.connecting, true, 0, {}};  // the old kind: connected at once
    return ncclSuccess;
  }
  std::lock_guard<std::mutex> lock(h.connecting->mutex);
  if (!h.connecting->accepted) return ncclSuccess;
  *sendComm = new Comm{h.connecting, true, 0, {}};
  std::lock_guard<std::mutex> statsLock(stats().mutex);
  stats().connects += 1;
  return ncclSuccess;
}

// The oldest connect not yet accepted, or null.
Pipe* takeArrival(Listener* listener) {
  std::lock_guard<std::mutex> lock(listenersMutex());
  if (listener->arrivals.empty()) return nullptr;
  Pipe* pipe = listener->arrivals.front();
  listener->arrivals.pop_front();
  return pipe;
}

ncclResult_t loopAccept(void* listenComm, void** recvComm) {
  *recvComm = nullptr;
  auto* listener = static_cast<Listener*>(listenComm);
  Pipe* pipe = takeArrival(listener);
  // The blocking kind waits (bounded, so a caller that never connects fails
  // instead of hanging the test).
  for (int waited = 0; kBlockingAccept && pipe == nullptr; ++waited) {
    if (waited == kBlockingAcceptMs) return ncclSystemError;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    pipe = takeArrival(listener);
  }
  if (pipe == nullptr) return ncclSuccess;
  {
    std::lock_guard<std::mutex> lock(pipe->mutex);
    pipe->accepted = true;
  }
  *recvComm = new Comm{pipe, false, 0, {}};
  std::lock_guard<std::mutex> statsLock(stats().mutex);
  stats().accepts += 1;
  return ncclSuccess;
}

// Registration: the handle is the region, checked on every post.
struct Region {
  char* begin;
  size_t bytes;
};
ncclResult_t loopRegMr(void*, void* data, size_t size, int type, void** mhandle) {
  if (type != kNetPtrHost) return ncclInvalidArgument;
  *mhandle = new Region{static_cast<char*>(data), size};
  return ncclSuccess;
}
ncclResult_t loopRegMrDmaBuf(void*, void*, size_t, int, uint64_t, int, void**) { return ncclInvalidUsage; }
ncclResult_t loopDeregMr(void*, void* mhandle) {
  delete static_cast<Region*>(mhandle);
  return ncclSuccess;
}
bool inside(void* mhandle, void* data, size_t size) {
  auto* r = static_cast<Region*>(mhandle);
  auto* p = static_cast<char*>(data);
  return r != nullptr && p >= r->begin && p + size <= r->begin + r->bytes;
}

ncclResult_t post(Comm* comm, char* data, size_t bytes, void** request) {
  *request = nullptr;
  std::lock_guard<std::mutex> lock(comm->pipe->mutex);
  if (comm->inFlight >= kMaxInFlight) return ncclSuccess;  // busy
  auto* r = new Request{comm->pipe, comm, comm->isSend, data, bytes};
  (comm->isSend ? comm->pipe->sends : comm->pipe->recvs).push_back(r);
  comm->live.push_back(r);
  comm->inFlight += 1;
  *request = r;
  return ncclSuccess;
}

ncclResult_t loopIsend(void* sendComm, void* data, size_t size, void* mhandle, void** request) {
  if (!inside(mhandle, data, size)) return ncclInvalidArgument;
  return post(static_cast<Comm*>(sendComm), static_cast<char*>(data), size, request);
}

ncclResult_t loopIrecv(void* recvComm, int n, void** data, size_t* sizes, void** mhandles, void** request) {
  if (n != 1 || !inside(mhandles[0], data[0], sizes[0])) return ncclInvalidArgument;
  return post(static_cast<Comm*>(recvComm), static_cast<char*>(data[0]), sizes[0], request);
}

ncclResult_t loopIflush(void*, int, void**, int*, void**, void** request) {
  *request = nullptr;  // host memory: nothing to flush
  return ncclSuccess;
}

// Pairs the oldest send with the oldest receive while both exist.
void match(Pipe* pipe) {
  while (!pipe->sends.empty() && !pipe->recvs.empty()) {
    Request* s = pipe->sends.front();
    Request* r = pipe->recvs.front();
    pipe->sends.pop_front();
    pipe->recvs.pop_front();
    r->failed = s->bytes > r->bytes;
    if (!r->failed) std::memcpy(r->data, s->data, s->bytes);
    r->bytes = s->bytes;
    s->done = r->done = true;
    std::lock_guard<std::mutex> lock(stats().mutex);
    stats().bytesReceived += static_cast<int64_t>(s->bytes);
  }
}

ncclResult_t loopTest(void* request, int* done, int* sizes) {
  auto* r = static_cast<Request*>(request);
  std::lock_guard<std::mutex> lock(r->pipe->mutex);
  match(r->pipe);
  *done = r->done ? 1 : 0;
  if (!r->done) return ncclSuccess;
  if (r->failed) return ncclInternalError;  // a message larger than the receive
  if (sizes) *sizes = static_cast<int>(r->bytes);
  r->comm->inFlight -= 1;
  std::vector<Request*>& live = r->comm->live;
  live.erase(std::find(live.begin(), live.end(), r));
  delete r;
  return ncclSuccess;
}

ncclResult_t loopClose(void* comm) {
  auto* c = static_cast<Comm*>(comm);
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(c->pipe->mutex);
    last = ++c->pipe->closedEnds == 2;
    // Requests still in flight: out of the pipe's queues, then freed.
    for (std::deque<Request*>* queue : {&c->pipe->sends, &c->pipe->recvs})
      queue->erase(std::remove_if(queue->begin(), queue->end(), [c](Request* r) { return r->comm == c; }),
                   queue->end());
    for (Request* r : c->live) delete r;
  }
  if (last) delete c->pipe;
  delete c;
  return ncclSuccess;
}

ncclResult_t loopCloseListen(void* listenComm) {
  delete static_cast<Listener*>(listenComm);
  return ncclSuccess;
}
ncclResult_t loopGetDeviceMr(void*, void*, void**) { return ncclInvalidUsage; }
ncclResult_t loopIrecvConsumed(void*, int, void*) { return ncclSuccess; }
ncclResult_t loopMakeVDevice(int*, void*) { return ncclInvalidUsage; }

}  // namespace

// What the tests read back (dlsym on the same library).
extern "C" __attribute__((visibility("default"))) void weftLoopStats(int64_t* connects, int64_t* accepts,
                                                                     int64_t* bytesReceived, int* initVersion) {
  std::lock_guard<std::mutex> lock(stats().mutex);
  *connects = stats().connects;
  *accepts = stats().accepts;
  *bytesReceived = stats().bytesReceived;
  *initVersion = stats().lastInitVersion;
}

// Each version's entry points, shaped as its table wants them.
namespace {

template <int Version>
ncclResult_t initOld(weftNetLogger_t log) {
  return loopInit(log, Version);
}
ncclResult_t initV10(weftNetLogger_t log, weftNetProfilerCallback_t) { return loopInit(log, 10); }
ncclResult_t connectV6(int, void* handle, void** sendComm) { return loopConnect(handle, sendComm); }
ncclResult_t connectV10(int, weftNetCommConfig_v10_t*, void* handle, void** sendComm,
                        weftNetDeviceHandle_v8_t** devComm) {
  *devComm = nullptr;
  return loopConnect(handle, sendComm);
}
ncclResult_t propertiesV7(int dev, weftNetProperties_v7_t* props) {
  ncclResult_t rc = loopProperties(dev, props);
  props->netDeviceType = WEFT_NET_DEVICE_HOST;
  return rc;
}
ncclResult_t propertiesV8(int dev, weftNetProperties_v8_t* props) {
  ncclResult_t rc = loopProperties(dev, props);
  props->regIsGlobal = 1;
  props->netDeviceType = WEFT_NET_DEVICE_HOST;
  return rc;
}

ncclResult_t irecvInt(void* comm, int n, void** data, int* sizes, int*, void** mhandles, void** request) {
  if (n != 1 || sizes[0] < 0) return ncclInvalidArgument;
  size_t wide = static_cast<size_t>(sizes[0]);
  return loopIrecv(comm, n, data, &wide, mhandles, request);
}
ncclResult_t isendInt(void* comm, void* data, int size, int, void* mhandle, void** request) {
  if (size < 0) return ncclInvalidArgument;
  return loopIsend(comm, data, static_cast<size_t>(size), mhandle, request);
}
ncclResult_t regMrInt(void* comm, void* data, int size, int type, void** mhandle) {
  if (size < 0) return ncclInvalidArgument;
  return loopRegMr(comm, data, static_cast<size_t>(size), type, mhandle);
}
ncclResult_t isendWide(void* comm, void* data, size_t size, int, void* mhandle, void** request) {
  return loopIsend(comm, data, size, mhandle, request);
}
ncclResult_t irecvWide(void* comm, int n, void** data, size_t* sizes, int*, void** mhandles, void** request) {
  return loopIrecv(comm, n, data, sizes, mhandles, request);
}
ncclResult_t connectV7(int, void* handle, void** sendComm, weftNetDeviceHandle_v8_t** devComm) {
  *devComm = nullptr;
  return loopConnect(handle, sendComm);
}
ncclResult_t acceptV7(void* listenComm, void** recvComm, weftNetDeviceHandle_v8_t** devComm) {
  *devComm = nullptr;
  return loopAccept(listenComm, recvComm);
}

// Version 9 to 12 properties share every field but the last ones.
template <class Properties>
ncclResult_t propertiesV9(int dev, Properties* props) {
  ncclResult_t rc = loopProperties(dev, props);
  if (rc != ncclSuccess) return rc;
  props->regIsGlobal = 1;
  props->netDeviceType = WEFT_NET_DEVICE_HOST;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = props->maxCollBytes = size_t{1} << 30;
  return ncclSuccess;
}

// Versions 11 and 12: one context per init, which listen and connect check.
int contextToken = 0;
template <class Properties, int Version>
ncclResult_t initV11(void** ctx, uint64_t, weftNetCommConfig_v11_t*, weftNetLogger_t log, weftNetProfilerCallback_t) {
  *ctx = &contextToken;
  return loopInit(log, Version);
}
ncclResult_t listenV11(void* ctx, int dev, void* handle, void** listenComm) {
  if (ctx != &contextToken) return ncclInvalidArgument;
  return loopListen(dev, handle, listenComm);
}
ncclResult_t connectV11(void* ctx, int, void* handle, void** sendComm, weftNetDeviceHandle_v8_t** devComm) {
  if (ctx != &contextToken) return ncclInvalidArgument;
  *devComm = nullptr;
  return loopConnect(handle, sendComm);
}
ncclResult_t isendV10(void* comm, void* data, size_t size, int, void* mhandle, void*, void** request) {
  return loopIsend(comm, data, size, mhandle, request);
}
ncclResult_t irecvV10(void* comm, int n, void** data, size_t* sizes, int*, void** mhandles, void**, void** request) {
  return loopIrecv(comm, n, data, sizes, mhandles, request);
}
ncclResult_t finalizeV11(void* ctx) { return ctx == &contextToken ? ncclSuccess : ncclInvalidArgument; }
template <class Attr>
ncclResult_t setNetAttrV11(void*, Attr*) {
  return ncclSuccess;
}
template <class VProps>
ncclResult_t makeVDevice(int* d, VProps* props) {
  return loopMakeVDevice(d, props);
}

}  // namespace

#define WEFT_LOOP_EXPORT extern "C" __attribute__((visibility("default")))

#if defined(WEFT_LOOP_EXPORT_V6)
WEFT_LOOP_EXPORT const weftNet_v6_t ncclNetPlugin_v6 = {
    "WeftLoop",      initOld<6>,  loopDevices, loopProperties<weftNetProperties_v6_t>,
    loopListen,      connectV6,   loopAccept,  regMrInt,
    loopRegMrDmaBuf, loopDeregMr, isendInt,    irecvInt,
    loopIflush,      loopTest,    loopClose,   loopClose,
    loopCloseListen};
#endif

#if defined(WEFT_LOOP_EXPORT_V7)
WEFT_LOOP_EXPORT const weftNet_v7_t ncclNetPlugin_v7 = {
    "WeftLoop", initOld<7>,      loopDevices,     propertiesV7,    loopListen,       connectV7,  acceptV7,
    regMrInt,   loopRegMrDmaBuf, loopDeregMr,     isendInt,        irecvInt,         loopIflush, loopTest,
    loopClose,  loopClose,       loopCloseListen, loopGetDeviceMr, loopIrecvConsumed};
#endif

#if defined(WEFT_LOOP_EXPORT_V8)
WEFT_LOOP_EXPORT const weftNet_v8_t ncclNetPlugin_v8 = {
    "WeftLoop", initOld<8>,      loopDevices,     propertiesV8,    loopListen,       connectV7,  acceptV7,
    loopRegMr,  loopRegMrDmaBuf, loopDeregMr,     isendInt,        irecvInt,         loopIflush, loopTest,
    loopClose,  loopClose,       loopCloseListen, loopGetDeviceMr, loopIrecvConsumed};
#endif

#if defined(WEFT_LOOP_EXPORT_V9)
WEFT_LOOP_EXPORT const weftNet_v9_t ncclNetPlugin_v9 = {
    "WeftLoop",      initOld<9>,      loopDevices,       propertiesV9<weftNetProperties_v9_t>,
    loopListen,      connectV7,       acceptV7,          loopRegMr,
    loopRegMrDmaBuf, loopDeregMr,     isendWide,         irecvWide,
    loopIflush,      loopTest,        loopClose,         loopClose,
    loopCloseListen, loopGetDeviceMr, loopIrecvConsumed, makeVDevice<weftNetVDeviceProps_v9_t>};
#endif

#if defined(WEFT_LOOP_EXPORT_V10)
WEFT_LOOP_EXPORT const weftNet_v10_t ncclNetPlugin_v10 = {
    "WeftLoop",      initV10,         loopDevices,       propertiesV9<weftNetProperties_v10_t>,
    loopListen,      connectV10,      acceptV7,          loopRegMr,
    loopRegMrDmaBuf, loopDeregMr,     isendV10,          irecvV10,
    loopIflush,      loopTest,        loopClose,         loopClose,
    loopCloseListen, loopGetDeviceMr, loopIrecvConsumed, makeVDevice<weftNetVDeviceProps_v9_t>};
#endif

#if defined(WEFT_LOOP_EXPORT_V11)
WEFT_LOOP_EXPORT const weftNet_v11_t ncclNetPlugin_v11 = {"WeftLoop",        initV11<weftNetProperties_v11_t, 11>,
                                                          loopDevices,       propertiesV9<weftNetProperties_v11_t>,
                                                          listenV11,         connectV11,
                                                          acceptV7,          loopRegMr,
                                                          loopRegMrDmaBuf,   loopDeregMr,
                                                          isendV10,          irecvV10,
                                                          loopIflush,        loopTest,
                                                          loopClose,         loopClose,
                                                          loopCloseListen,   loopGetDeviceMr,
                                                          loopIrecvConsumed, makeVDevice<weftNetVDeviceProps_v11_t>,
                                                          finalizeV11,       setNetAttrV11<weftNetAttr_v11_t>};
#endif

#if defined(WEFT_LOOP_EXPORT_V12)
WEFT_LOOP_EXPORT const weftNet_v12_t ncclNetPlugin_v12 = {"WeftLoop",        initV11<weftNetProperties_v12_t, 12>,
                                                          loopDevices,       propertiesV9<weftNetProperties_v12_t>,
                                                          listenV11,         connectV11,
                                                          acceptV7,          loopRegMr,
                                                          loopRegMrDmaBuf,   loopDeregMr,
                                                          isendV10,          irecvV10,
                                                          loopIflush,        loopTest,
                                                          loopClose,         loopClose,
                                                          loopCloseListen,   loopGetDeviceMr,
                                                          loopIrecvConsumed, makeVDevice<weftNetVDeviceProps_v12_t>,
                                                          finalizeV11,       setNetAttrV11<weftNetAttr_v12_t>};
#endif

// Only the symbol matters: Weft must refuse it by name, never call it.
#if defined(WEFT_LOOP_COLLNET)
WEFT_LOOP_EXPORT const void* const ncclCollNetPlugin_v8 = nullptr;
#endif
#if defined(WEFT_LOOP_EXPORT_V13)
WEFT_LOOP_EXPORT const void* const ncclNetPlugin_v13 = nullptr;
#endif
