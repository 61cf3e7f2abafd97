// Test tuner plugins (libnccl-tuner-wefttest-*.so): each build of this file
// exports the tables its WEFT_TUNER_* definitions name, and counters the
// tests read back (dlopen of the same file gives the same copy). Built
// against Weft's table header only, as a third party's plugin would be.
#include <cstring>

#include "tuning/tuner_tables.h"

// Each build exports some of the tables below; the others' functions go unused.
#pragma GCC diagnostic ignored "-Wunused-function"

namespace {

constexpr int kTree = 0;
constexpr int kRing = 1;
constexpr int kLL = 0;
constexpr int kSimple = 2;
constexpr int kAllReduce = 4;

struct Context {
  size_t ranks;
  size_t nodes;
};

ncclResult_t initPlugin(size_t nRanks, size_t nNodes, weftTunerLogger_t logFunction, void** context);
ncclResult_t destroyPlugin(void* context);

}  // namespace

extern "C" {
// What the plugin saw, for the tests. Ranks run as threads of one process
// call the plugin at once, so every write is atomic (a plain ++ lost counts).
__attribute__((visibility("default"))) int weftTestTunerInits = 0;
__attribute__((visibility("default"))) int weftTestTunerCalls = 0;
__attribute__((visibility("default"))) int weftTestTunerDestroys = 0;
__attribute__((visibility("default"))) size_t weftTestTunerRanks = 0;
__attribute__((visibility("default"))) size_t weftTestTunerNodes = 0;
__attribute__((visibility("default"))) int weftTestTunerLastColl = -1;
__attribute__((visibility("default"))) size_t weftTestTunerLastBytes = 0;
__attribute__((visibility("default"))) int weftTestTunerLastPipeOps = 0;
}

namespace {

ncclResult_t initPlugin(size_t nRanks, size_t nNodes, weftTunerLogger_t logFunction, void** context) {
  __atomic_fetch_add(&weftTestTunerInits, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&weftTestTunerRanks, nRanks, __ATOMIC_RELAXED);
  __atomic_store_n(&weftTestTunerNodes, nNodes, __ATOMIC_RELAXED);
  if (logFunction != nullptr) logFunction(3, 0, __FILE__, __LINE__, "wefttest tuner: %zu ranks", nRanks);
#ifdef WEFT_TUNER_FAIL_INIT
  return ncclInternalError;
#else
  *context = new Context{nRanks, nNodes};
  return ncclSuccess;
#endif
}

ncclResult_t destroyPlugin(void* context) {
  __atomic_fetch_add(&weftTestTunerDestroys, 1, __ATOMIC_RELAXED);
  delete static_cast<Context*>(context);
  return ncclSuccess;
}

void record(int collType, size_t nBytes, int numPipeOps) {
  __atomic_fetch_add(&weftTestTunerCalls, 1, __ATOMIC_RELAXED);
  __atomic_store_n(&weftTestTunerLastColl, collType, __ATOMIC_RELAXED);
  __atomic_store_n(&weftTestTunerLastBytes, nBytes, __ATOMIC_RELAXED);
  __atomic_store_n(&weftTestTunerLastPipeOps, numPipeOps, __ATOMIC_RELAXED);
}

// v2: Tree + Simple on one channel for AllReduce of 4 KiB or more.
ncclResult_t collInfoV2(void*, int collType, size_t nBytes, int, int, int numPipeOps, int* algorithm, int* protocol,
                        int* nChannels) {
  record(collType, nBytes, numPipeOps);
  if (collType != kAllReduce || nBytes < 4096) return ncclSuccess;
  *algorithm = kTree;
  *protocol = kSimple;
  *nChannels = 1;
  return ncclSuccess;
}

// v3: makes Tree + Simple the cheapest for AllReduce (where it can run), one
// channel; WEFT_TUNER_ERROR_CALL: fails every call.
ncclResult_t collInfoV3(void*, int collType, size_t nBytes, int numPipeOps, float** collCostTable, int numAlgo,
                        int numProto, int* nChannels) {
  record(collType, nBytes, numPipeOps);
#ifdef WEFT_TUNER_ERROR_CALL
  return ncclInternalError;
#endif
  auto table = reinterpret_cast<float(*)[3]>(collCostTable);
  if (collType != kAllReduce || numAlgo <= kTree || numProto != 3 || table[kTree][kSimple] < 0) return ncclSuccess;
  table[kTree][kSimple] = 0.0f;
  *nChannels = 1;
  return ncclSuccess;
}

// v4: makes Ring + LL the cheapest where it can run; leaves the channels.
ncclResult_t collInfoV4(void*, int collType, size_t nBytes, int numPipeOps, float** collCostTable, int numAlgo,
                        int numProto, int, int*) {
  record(collType, nBytes, numPipeOps);
  auto table = reinterpret_cast<float(*)[3]>(collCostTable);
  if (numAlgo <= kRing || numProto != 3 || table[kRing][kLL] < 0) return ncclSuccess;
  table[kRing][kLL] = 0.0f;
  return ncclSuccess;
}

}  // namespace

extern "C" {
#ifdef WEFT_TUNER_V2
__attribute__((visibility("default")))
weftTuner_v2_t ncclTunerPlugin_v2 = {"wefttest-v2", initPlugin, collInfoV2, destroyPlugin};
#endif
#ifdef WEFT_TUNER_V3
__attribute__((visibility("default")))
weftTuner_v3_t ncclTunerPlugin_v3 = {"wefttest-v3", initPlugin, collInfoV3, destroyPlugin};
#endif
#ifdef WEFT_TUNER_V4
__attribute__((visibility("default")))
weftTuner_v4_t ncclTunerPlugin_v4 = {"wefttest-v4", initPlugin, collInfoV4, destroyPlugin};
#endif
#ifdef WEFT_TUNER_V5_ONLY
// A table of a version newer than Weft loads (its layout is not Weft's concern).
__attribute__((visibility("default"))) struct { const char* name; } ncclTunerPlugin_v5 = {"wefttest-v5"};
#endif
}
