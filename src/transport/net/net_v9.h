// The network plugin interfaces of versions 9 and 10 (ncclNetPlugin_v9,
// NCCL 2.23; ncclNetPlugin_v10, NCCL 2.24 to 2.27): the layouts of NCCL's
// ncclNet_v9_t and ncclNet_v10_t. Version 9 adds to version 8 virtual
// devices (makeVDevice), forceFlush, size limits, and size_t message sizes;
// version 10 adds a profiler callback to init, a per-comm config
// (traffic class) to connect, and profiler handles to isend and irecv. The
// properties of the two are the same.
#pragma once

#include "transport/net/net_v8.h"

extern "C" {

constexpr int kNetMaxDevsPerNicV9 = 4;

typedef struct {
  int ndevs;
  int devs[kNetMaxDevsPerNicV9];
} weftNetVDeviceProps_v9_t;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;  // receives need iflush even for host memory
  int speed;       // Mb/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  weftNetDeviceType_t netDeviceType;
  int netDeviceVersion;
  weftNetVDeviceProps_v9_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
} weftNetProperties_v9_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(weftNetLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, weftNetProperties_v9_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, weftNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, weftNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, size_t size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, size_t* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
  ncclResult_t (*makeVDevice)(int* d, weftNetVDeviceProps_v9_t* props);
} weftNet_v9_t;

// NCCL's profiler callback as a version 10+ plugin calls it.
typedef ncclResult_t (*weftNetProfilerCallback_t)(void** eHandle, int type, void* pHandle, int64_t pluginId,
                                                  void* extData);

constexpr int kNetTrafficClassUndef = -1;

typedef struct {
  int trafficClass;
} weftNetCommConfig_v10_t;

typedef weftNetProperties_v9_t weftNetProperties_v10_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(weftNetLogger_t logFunction, weftNetProfilerCallback_t profFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, weftNetProperties_v10_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, weftNetCommConfig_v10_t* config, void* handle, void** sendComm,
                          weftNetDeviceHandle_v8_t** sendDevComm);
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
  ncclResult_t (*makeVDevice)(int* d, weftNetVDeviceProps_v9_t* props);
} weftNet_v10_t;

}  // extern "C"
