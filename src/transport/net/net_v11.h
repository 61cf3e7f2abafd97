// The network plugin interfaces of versions 11 and 12 (ncclNetPlugin_v11,
// NCCL 2.28; ncclNetPlugin_v12, the newest NCCL has published): the layouts
// of NCCL's ncclNet_v11_t and ncclNet_v12_t. Version 11 makes init return a
// context (per communicator in NCCL; one per process in Weft) that listen,
// connect, finalize and setNetAttr take, moves the comm config from connect
// to init, and adds maxMultiRequestSize to the properties. Version 12 widens
// the virtual device list to 8 and adds rail and plane ids to the
// properties; its table is version 11's.
#pragma once

#include "transport/net/net_v9.h"

extern "C" {

constexpr int kNetMaxDevsPerNicV12 = 8;

typedef weftNetVDeviceProps_v9_t weftNetVDeviceProps_v11_t;
typedef weftNetCommConfig_v10_t weftNetCommConfig_v11_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;  // Mb/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  weftNetDeviceType_t netDeviceType;
  int netDeviceVersion;
  weftNetVDeviceProps_v11_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
} weftNetProperties_v11_t;

typedef struct {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} weftNetCommAttr_v11_t;

// Hints about the traffic to come (NCCL_NET_ATTR_UNDEF, -1, where unknown).
typedef struct {
  weftNetCommAttr_v11_t sendCommAttr;
  weftNetCommAttr_v11_t recvCommAttr;
  uint32_t op;
  uint32_t algo;
  uint32_t proto;
} weftNetAttr_v11_t;

typedef struct {
  int ndevs;
  int devs[kNetMaxDevsPerNicV12];
} weftNetVDeviceProps_v12_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;  // Mb/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  weftNetDeviceType_t netDeviceType;
  int netDeviceVersion;
  weftNetVDeviceProps_v12_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;
  int16_t planeId;
} weftNetProperties_v12_t;

typedef weftNetAttr_v11_t weftNetAttr_v12_t;

}  // extern "C"

namespace weft::transport {

// The tables of versions 11 and 12 differ only in the types they point at.
template <class Properties, class VDeviceProps, class Attr>
struct NetTableV11 {
  const char* name;
  ncclResult_t (*init)(void** ctx, uint64_t commId, weftNetCommConfig_v11_t* config, weftNetLogger_t logFunction,
                       weftNetProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, Properties* props);
  ncclResult_t (*listen)(void* ctx, int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(void* ctx, int dev, void* handle, void** sendComm, weftNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, weftNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void* phandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** phandles,
                        void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, VDeviceProps* props);
  ncclResult_t (*finalize)(void* ctx);
  ncclResult_t (*setNetAttr)(void* ctx, Attr* netAttr);
};

}  // namespace weft::transport

using weftNet_v11_t =
    weft::transport::NetTableV11<weftNetProperties_v11_t, weftNetVDeviceProps_v11_t, weftNetAttr_v11_t>;
using weftNet_v12_t =
    weft::transport::NetTableV11<weftNetProperties_v12_t, weftNetVDeviceProps_v12_t, weftNetAttr_v12_t>;
