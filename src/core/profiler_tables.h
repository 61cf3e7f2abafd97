// The C tables of NCCL's profiler plugin interface as NCCL 2.27 defines them
// (ncclProfiler_v3 and _v4): layouts and numbering only, written from the
// interface's published description (ext-profiler/README.md). A profiler
// plugin exports one symbol per version it supports, pointing at its table.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>

#include "nccl.h"

extern "C" {

// Event types: the bits of the activation mask a plugin's init sets.
enum {
  weftProfileGroup = 1 << 0,
  weftProfileColl = 1 << 1,
  weftProfileP2p = 1 << 2,
  weftProfileProxyOp = 1 << 3,
  weftProfileProxyStep = 1 << 4,
  weftProfileProxyCtrl = 1 << 5,
  weftProfileKernelCh = 1 << 6,
  weftProfileNetPlugin = 1 << 7,
};

// ncclDebugLogger_t: level as ncclDebugLogLevel, flags as NCCL's subsystems.
typedef void (*weftProfilerLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// v4's event descriptor: type, the parent's handle, the rank, and per type
// its fields (Weft fills group, coll and p2p; see core/profiler.h).
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
      uint8_t nChannels;
    } p2p;
    struct {
      pid_t pid;
      uint8_t channelId;
      int peer;
      int nSteps;
      int chunkSize;
      int isSend;
    } proxyOp;
    struct {
      int step;
    } proxyStep;
    struct {
      uint8_t channelId;
      uint64_t pTimer;
    } kernelCh;
    struct {
      int64_t id;
      void* data;
    } netPlugin;
  };
} weftProfilerDescr_v4_t;

// State updates of the updatable events (none of which Weft emits yet).
typedef union {
  struct {
    size_t transSize;
  } proxyStep;
  struct {
    int appendedProxyOps;
  } proxyCtrl;
  struct {
    void* data;
  } netPlugin;
  struct {
    uint64_t pTimer;
  } kernelCh;
} weftProfilerStateArgs_v4_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask, const char* commName, uint64_t commHash, int nNodes,
                       int nranks, int rank, weftProfilerLogger_t logfn);
  ncclResult_t (*startEvent)(void* context, void** eHandle, weftProfilerDescr_v4_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, weftProfilerStateArgs_v4_t* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} weftProfiler_v4_t;

// v3: the collective and point-to-point descriptors also carry the
// communicator's name and hash, the collective's channels are its most,
// a point-to-point has no channel count; init takes no communicator facts.
typedef struct {
  uint8_t type;
  void* parentObj;
  int rank;
  union {
    struct {
      const char* name;
      uint64_t commHash;
      uint64_t seqNumber;
      const char* func;
      const void* sendBuff;
      void* recvBuff;
      size_t count;
      int root;
      const char* datatype;
      uint8_t nMaxChannels;
      uint8_t nWarps;
      const char* algo;
      const char* proto;
    } coll;
    struct {
      const char* name;
      uint64_t commHash;
      const char* func;
      void* buff;
      const char* datatype;
      size_t count;
      int peer;
    } p2p;
    // proxyOp, proxyStep, kernelCh and netPlugin as in v4 (kernelCh without
    // its timer): Weft emits none of them.
  };
} weftProfilerDescr_v3_t;

typedef struct {
  const char* name;
  ncclResult_t (*init)(void** context, int* eActivationMask);
  ncclResult_t (*startEvent)(void* context, void** eHandle, weftProfilerDescr_v3_t* eDescr);
  ncclResult_t (*stopEvent)(void* eHandle);
  ncclResult_t (*recordEventState)(void* eHandle, int eState, void* eStateArgs);
  ncclResult_t (*finalize)(void* context);
} weftProfiler_v3_t;

}  // extern "C"
