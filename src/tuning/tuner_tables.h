// The C tables of NCCL's tuner plugin interface, as NCCL 2.27 defines them
// (ncclTunerPlugin_v2 to _v4): layouts and numbering only, written from the
// interface's published description. A tuner plugin exports one symbol per
// version it supports, pointing at its table.
#pragma once

#include <cstddef>

#include "nccl.h"

extern "C" {

// ncclDebugLogger_t: level as ncclDebugLogLevel, flags as NCCL's subsystems.
typedef void (*weftTunerLogger_t)(int level, unsigned long flags, const char* file, int line, const char* fmt, ...);

// collType is ncclFunc_t: Broadcast 0, Reduce 1, AllGather 2, ReduceScatter 3, AllReduce 4.

// v2: the plugin answers with an algorithm and a protocol (NCCL's numbers;
// -1 leaves them to the library) and a channel count (0: the library's).
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, weftTunerLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, int collType, size_t nBytes, int collNetSupport, int nvlsSupport,
                              int numPipeOps, int* algorithm, int* protocol, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} weftTuner_v2_t;

// v3: the library passes its cost table, numAlgo x numProto floats in
// microseconds laid out row by row (one row per algorithm), -1 where a
// combination cannot run; the plugin edits it and the cheapest entry wins.
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, weftTunerLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} weftTuner_v3_t;

// v4: v3 plus regBuff (whether the user buffer can be registered).
typedef struct {
  const char* name;
  ncclResult_t (*init)(size_t nRanks, size_t nNodes, weftTunerLogger_t logFunction, void** context);
  ncclResult_t (*getCollInfo)(void* context, int collType, size_t nBytes, int numPipeOps, float** collCostTable,
                              int numAlgo, int numProto, int regBuff, int* nChannels);
  ncclResult_t (*destroy)(void* context);
} weftTuner_v4_t;

}  // extern "C"
