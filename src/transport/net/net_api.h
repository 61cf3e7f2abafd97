// Weft's view of a network, whichever version of NCCL's plugin interface is
// behind it (net_v6.h to net_v11.h; Weft's own networks are version 8
// tables). The proxy and the net transport call only this; an adapter per
// version (net_adapter.cc) turns each call into the table's, hiding the
// differences: contexts (v11+), comm configs (v10), profiler handles (v10+),
// int or size_t sizes, device handles (v7+).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "transport/net/net_v8.h"

namespace weft::transport {

// The properties of one network device, as every version can describe them.
struct NetProperties {
  std::string name;
  std::string pciPath;
  uint64_t guid = 0;
  int ptrSupport = 0;  // kNetPtr* bits
  bool regIsGlobal = false;
  bool forceFlush = false;  // v9+: receives need iflush
  int speedMbps = 0;
  int port = 0;
  float latencyUs = 0;
  int maxComms = 0;
  int maxRecvs = 1;
  weftNetDeviceType_t deviceType = WEFT_NET_DEVICE_HOST;
  size_t maxMessageBytes = 0;  // v9+: maxP2pBytes; 0: no limit stated
};

class NetApi {
 public:
  virtual ~NetApi() = default;
  virtual const char* name() const = 0;
  virtual int version() const = 0;  // of the plugin interface behind it
  // Once per process, before anything else.
  virtual ncclResult_t init(weftNetLogger_t logger) = 0;
  virtual ncclResult_t devices(int* ndev) const = 0;
  virtual ncclResult_t getProperties(int dev, NetProperties* props) const = 0;
  virtual ncclResult_t listen(int dev, void* handle, void** listenComm) const = 0;
  // May return a null comm while the handshake is under way (call again).
  virtual ncclResult_t connect(int dev, void* handle, void** sendComm) const = 0;
  virtual ncclResult_t accept(void* listenComm, void** recvComm) const = 0;
  virtual ncclResult_t regMr(void* comm, void* data, size_t size, int type, void** mhandle) const = 0;
  virtual ncclResult_t deregMr(void* comm, void* mhandle) const = 0;
  // A null request means "busy, try later".
  virtual ncclResult_t isend(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request) const = 0;
  virtual ncclResult_t irecv(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles,
                             void** request) const = 0;
  virtual ncclResult_t iflush(void* recvComm, int n, void** data, int* sizes, void** mhandles,
                              void** request) const = 0;
  virtual ncclResult_t test(void* request, int* done, int* sizes) const = 0;
  virtual ncclResult_t closeSend(void* sendComm) const = 0;
  virtual ncclResult_t closeRecv(void* recvComm) const = 0;
  virtual ncclResult_t closeListen(void* listenComm) const = 0;
};

// The newest plugin interface Weft knows, and the oldest it loads.
constexpr int kNetNewestVersion = 12;
constexpr int kNetOldestVersion = 6;

// Weft's view of `table`, a plugin table of `version` (kNetOldestVersion to
// kNetNewestVersion); null for any other version. The table must outlive it.
std::unique_ptr<NetApi> adaptNetTable(int version, const void* table);

}  // namespace weft::transport
