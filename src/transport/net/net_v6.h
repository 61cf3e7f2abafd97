// The network plugin interface, version 6 (NCCL 2.12 to 2.18 plugins export
// ncclNetPlugin_v6): the layout of NCCL's ncclNet_v6_t. Compared with
// version 8: no device handles on connect/accept, no regIsGlobal or device
// type in the properties, int sizes for regMr, no getDeviceMr and
// irecvConsumed, and at most 8 requests in flight per comm.
#pragma once

#include "transport/net/net_v8.h"

extern "C" {

constexpr int kNetMaxRequestsV6 = 8;

typedef struct {
  char* name;
  char* pciPath;
  uint64_t guid;
  int ptrSupport;
  int speed;  // Mb/s
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
} weftNetProperties_v6_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(weftNetLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, weftNetProperties_v6_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm);
  ncclResult_t (*regMr)(void* comm, void* data, int size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd, void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
} weftNet_v6_t;

}  // extern "C"
