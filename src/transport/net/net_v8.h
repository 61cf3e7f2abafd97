// The network plugin interface, version 8: a C table of function pointers
// with the same layout, values and calling conventions as NCCL's ncclNet_v8_t.
// Weft's own networks (sockets today) are version 8 tables; plugins of every
// version from 6 to 12 load through net_api.h's adapters.
//
// Contract, as the proxy uses it (see src/proxy/proxy.cc):
//   listen    receiver side: a handle (<= kNetHandleBytes) for the sender
//   connect   sender side: may return a null comm; called again until not
//   accept    receiver side: may return a null comm; called again until not
//   regMr     registers a buffer the comm will send from / receive into
//   isend / irecv  post one message; a null request means "busy, try later"
//   test      completes a request (frees it) and reports the bytes moved
//   iflush    makes received data visible to a GPU (host memory: no-op)
// Requests of one comm complete in the order they were posted.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "nccl.h"

extern "C" {

constexpr int kNetHandleBytes = 128;  // NCCL_NET_HANDLE_MAXSIZE
constexpr int kNetMaxRequests = 32;   // NCCL_NET_MAX_REQUESTS: in flight per comm

// Where a buffer lives (NCCL_PTR_*).
constexpr int kNetPtrHost = 0x1;
constexpr int kNetPtrCuda = 0x2;
constexpr int kNetPtrDmaBuf = 0x4;

// NCCL's log levels and subsystems as a plugin sees them.
typedef enum {
  WEFT_NET_LOG_NONE = 0,
  WEFT_NET_LOG_VERSION = 1,
  WEFT_NET_LOG_WARN = 2,
  WEFT_NET_LOG_INFO = 3,
  WEFT_NET_LOG_ABORT = 4,
  WEFT_NET_LOG_TRACE = 5
} weftNetLogLevel_t;

typedef void (*weftNetLogger_t)(weftNetLogLevel_t level, unsigned long flags, const char* file, int line,
                                const char* fmt, ...);

// Device-side offload (NCCL_NET_DEVICE_*); Weft uses host only.
typedef enum { WEFT_NET_DEVICE_HOST = 0, WEFT_NET_DEVICE_UNPACK = 1 } weftNetDeviceType_t;

typedef struct {
  weftNetDeviceType_t netDeviceType;
  int netDeviceVersion;
  void* handle;
  size_t size;
  int needsProxyProgress;
} weftNetDeviceHandle_v8_t;

typedef struct {
  char* name;     // for logs
  char* pciPath;  // the device's directory in /sys, or null
  uint64_t guid;
  int ptrSupport;   // kNetPtr* bits
  int regIsGlobal;  // registrations are not tied to one comm
  int speed;        // Mb/s
  int port;
  float latency;  // us
  int maxComms;
  int maxRecvs;  // most buffers one irecv may carry
  weftNetDeviceType_t netDeviceType;
  int netDeviceVersion;
} weftNetProperties_v8_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(weftNetLogger_t logFunction);
  ncclResult_t (*devices)(int* ndev);
  ncclResult_t (*getProperties)(int dev, weftNetProperties_v8_t* props);
  ncclResult_t (*listen)(int dev, void* handle, void** listenComm);
  ncclResult_t (*connect)(int dev, void* handle, void** sendComm, weftNetDeviceHandle_v8_t** sendDevComm);
  ncclResult_t (*accept)(void* listenComm, void** recvComm, weftNetDeviceHandle_v8_t** recvDevComm);
  ncclResult_t (*regMr)(void* comm, void* data, size_t size, int type, void** mhandle);
  ncclResult_t (*regMrDmaBuf)(void* comm, void* data, size_t size, int type, uint64_t offset, int fd,
                              void** mhandle);
  ncclResult_t (*deregMr)(void* comm, void* mhandle);
  ncclResult_t (*isend)(void* sendComm, void* data, int size, int tag, void* mhandle, void** request);
  ncclResult_t (*irecv)(void* recvComm, int n, void** data, int* sizes, int* tags, void** mhandles, void** request);
  ncclResult_t (*iflush)(void* recvComm, int n, void** data, int* sizes, void** mhandles, void** request);
  ncclResult_t (*test)(void* request, int* done, int* sizes);
  ncclResult_t (*closeSend)(void* sendComm);
  ncclResult_t (*closeRecv)(void* recvComm);
  ncclResult_t (*closeListen)(void* listenComm);
  ncclResult_t (*getDeviceMr)(void* comm, void* mhandle, void** dptrMhandle);
  ncclResult_t (*irecvConsumed)(void* recvComm, int n, void* request);
} weftNet_v8_t;

}  // extern "C"
