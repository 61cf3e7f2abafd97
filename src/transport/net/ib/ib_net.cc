// The IB network's plugin table (version 8, like the socket network's).
#include "transport/net/ib/ib_net.h"

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "common/params.h"
#include "transport/net/ib/ib_comm.h"
#include "transport/net/ib/ib_connect.h"
#include "transport/net/ib/ib_gdr.h"

namespace weft::transport {
namespace {

using ib::IbComm;
using ib::report;

ncclResult_t netInit(weftNetLogger_t) {
  std::string why;
  if (ib::ibDevices(&why).empty()) return report(errorStatus(ncclSystemError, "%s", why.c_str()));
  return ncclSuccess;
}

ncclResult_t netDevices(int* ndev) {
  *ndev = static_cast<int>(ib::ibDevices(nullptr).size());
  return ncclSuccess;
}

ncclResult_t netGetProperties(int dev, weftNetProperties_v8_t* props) {
  const auto& devices = ib::ibDevices(nullptr);
  if (dev < 0 || dev >= static_cast<int>(devices.size()))
    return report(errorStatus(ncclInvalidArgument, "IB: no network device %d (there are %zu)", dev, devices.size()));
  // A merged device (NCCL_IB_MERGE_NICS) is described by its first port,
  // with the ports' speeds summed, GPU memory only if every port takes it,
  // and the fewest queue pairs any port allows.
  const ib::IbNetDevice& d = *devices[static_cast<size_t>(dev)];
  const ib::IbDevice& first = *d.ports[0];
  std::memset(props, 0, sizeof(*props));
  props->name = const_cast<char*>(d.name.c_str());
  props->pciPath = first.pciPath.empty() ? nullptr : const_cast<char*>(first.pciPath.c_str());
  props->guid = first.guid;
  props->ptrSupport = ib::gdrPtrSupport(first);  // GPU memory only where GPUDirect RDMA works (ib_gdr.h)
  props->maxComms = first.maxQp;
  for (const ib::IbDevice* port : d.ports) {
    props->ptrSupport &= ib::gdrPtrSupport(*port);
    props->maxComms = std::min(props->maxComms, port->maxQp);
  }
  props->regIsGlobal = 1;  // the registration caches are per port
  props->speed = d.speedMbps;
  props->port = first.port;
  props->latency = 0;
  props->maxRecvs = 1;
  props->netDeviceType = WEFT_NET_DEVICE_HOST;
  return ncclSuccess;
}

ncclResult_t netConnect(int dev, void* handle, void** sendComm, weftNetDeviceHandle_v8_t**) {
  return ib::connect(dev, handle, sendComm);
}

ncclResult_t netAccept(void* listenComm, void** recvComm, weftNetDeviceHandle_v8_t**) {
  return ib::accept(listenComm, recvComm);
}

ncclResult_t netRegMr(void* comm, void* data, size_t size, int type, void** mhandle) {
  ib::IbNetDevice* device = static_cast<IbComm*>(comm)->device();
  Result<ib::MrHandle*> mr =
      errorStatus(ncclInvalidArgument, "IB: regMr type %d is neither host (%d) nor CUDA (%d) memory", type, kNetPtrHost,
                  kNetPtrCuda);
  if (type == kNetPtrHost) mr = device->registerHost(data, size);
  if (type == kNetPtrCuda) mr = device->registerCuda(data, size);
  if (!mr.ok()) return report(mr.status());
  *mhandle = mr.value();
  return ncclSuccess;
}

ncclResult_t netRegMrDmaBuf(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle) {
  if (type != kNetPtrCuda && type != kNetPtrDmaBuf && type != (kNetPtrCuda | kNetPtrDmaBuf))
    return report(errorStatus(ncclInvalidArgument, "IB: regMrDmaBuf type %d; expected CUDA (%d) or dma-buf (%d) memory",
                              type, kNetPtrCuda, kNetPtrDmaBuf));
  if (fd < 0)
    return report(errorStatus(ncclInvalidArgument, "IB: regMrDmaBuf fd %d; expected a dma-buf file descriptor", fd));
  Result<ib::MrHandle*> mr = static_cast<IbComm*>(comm)->device()->registerDmaBuf(data, size, offset, fd);
  if (!mr.ok()) return report(mr.status());
  *mhandle = mr.value();
  return ncclSuccess;
}

ncclResult_t netDeregMr(void* comm, void* mhandle) {
  static_cast<IbComm*>(comm)->device()->deregister(static_cast<ib::MrHandle*>(mhandle));
  return ncclSuccess;
}

ncclResult_t netIsend(void* sendComm, void* data, int size, int, void* mhandle, void** request) {
  Result<ib::Request*> r =
      static_cast<IbComm*>(sendComm)->postSend(data, static_cast<size_t>(size), static_cast<ib::MrHandle*>(mhandle));
  if (!r.ok()) return report(r.status());
  *request = r.value();
  return ncclSuccess;
}

ncclResult_t netIrecv(void* recvComm, int n, void** data, int* sizes, int*, void** mhandles, void** request) {
  if (n != 1) return report(errorStatus(ncclInternalError, "IB: %d buffers in one receive (at most 1)", n));
  Result<ib::Request*> r = static_cast<IbComm*>(recvComm)->postRecv(data[0], static_cast<size_t>(sizes[0]),
                                                                    static_cast<ib::MrHandle*>(mhandles[0]));
  if (!r.ok()) return report(r.status());
  *request = r.value();
  return ncclSuccess;
}

// Only a receive into GPU memory needs a flush, and only its last non-empty
// buffer: the read orders every earlier write of the HCA (ib_flush.cc).
ncclResult_t netIflush(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request) {
  *request = nullptr;  // host memory: a completed receive is already visible to the CPU
  if (param::gdrFlushDisable() != 0) return ncclSuccess;
  int last = -1;
  for (int i = 0; i < n; ++i)
    if (sizes[i] > 0 && mhandles[i] != nullptr && static_cast<ib::MrHandle*>(mhandles[i])->dmaBuf) last = i;
  if (last < 0) return ncclSuccess;
  Result<ib::Request*> r =
      static_cast<IbComm*>(recvComm)->postFlush(data[last], static_cast<ib::MrHandle*>(mhandles[last]));
  if (!r.ok()) return report(r.status());
  *request = r.value();
  return ncclSuccess;
}

ncclResult_t netTest(void* opaqueRequest, int* done, int* size) {
  auto* r = static_cast<ib::Request*>(opaqueRequest);
  bool finished = false;
  Status s = r->comm->test(r, &finished, size);
  if (!s.ok()) return report(s);
  *done = finished ? 1 : 0;
  return ncclSuccess;
}

ncclResult_t netCloseComm(void* comm) {
  delete static_cast<IbComm*>(comm);
  return ncclSuccess;
}

ncclResult_t netGetDeviceMr(void*, void*, void**) {
  return report(errorStatus(ncclInvalidUsage, "IB: no device-side memory handles"));
}

ncclResult_t netIrecvConsumed(void*, int, void*) { return ncclSuccess; }

const weftNet_v8_t kIbNet = {"IB",         netInit,         netDevices,     netGetProperties, ib::listen,
                             netConnect,   netAccept,       netRegMr,       netRegMrDmaBuf,   netDeregMr,
                             netIsend,     netIrecv,        netIflush,      netTest,          netCloseComm,
                             netCloseComm, ib::closeListen, netGetDeviceMr, netIrecvConsumed};

}  // namespace

const weftNet_v8_t& ibNet() { return kIbNet; }

std::string ibNetLastError() { return ib::lastError(); }

}  // namespace weft::transport
