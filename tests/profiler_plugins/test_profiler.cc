// Test profiler plugins (libnccl-profiler-wefttest-*.so): each build exports
// the tables its WEFT_PROFILER_* definitions name, writes every call it gets
// as a line of text, and exports that log for the tests (dlopen of the same
// file gives the same copy). Built against Weft's table header only, as a
// third party's plugin would be. WEFT_TEST_PROFILER_MASK (read at init)
// sets the activation mask; by default every event.
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>

#include "core/profiler_tables.h"

#pragma GCC diagnostic ignored "-Wunused-function"

namespace {

std::mutex gMutex;
std::string gLog;
std::set<void*> gGroups;  // group handles given out and not stopped

struct Event {
  int type;
  int rank;
};

void logLine(const std::string& line) {
  const std::lock_guard<std::mutex> lock(gMutex);
  gLog += line + "\n";
}

std::string format(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string format(const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, args);
  va_end(args);
  return buf;
}

int maskFromEnv() {
  const char* env = std::getenv("WEFT_TEST_PROFILER_MASK");
  return env ? static_cast<int>(std::strtol(env, nullptr, 0)) : 0xff;
}

const char* parentKind(void* parent) {
  const std::lock_guard<std::mutex> lock(gMutex);
  return parent == nullptr ? "none" : gGroups.count(parent) ? "group" : "unknown";
}

void* newEvent(int type, int rank) {
  Event* e = new Event{type, rank};
  if (type == weftProfileGroup) {
    const std::lock_guard<std::mutex> lock(gMutex);
    gGroups.insert(e);
  }
  return e;
}

ncclResult_t stopEvent(void* handle) {
  Event* e = static_cast<Event*>(handle);
  logLine(format("stop rank=%d type=%d", e->rank, e->type));
  {
    const std::lock_guard<std::mutex> lock(gMutex);
    gGroups.erase(e);
  }
  delete e;
  return ncclSuccess;
}

ncclResult_t recordState(void*, int, void*) { return ncclSuccess; }

ncclResult_t finalize(void* context) {
  logLine(format("finalize rank=%d of its context", *static_cast<int*>(context)));
  delete static_cast<int*>(context);
  return ncclSuccess;
}

ncclResult_t initV4(void** context, int* mask, const char* commName, uint64_t commHash, int nNodes, int nranks,
                    int rank, weftProfilerLogger_t logfn) {
  if (logfn != nullptr) logfn(3, 0, __FILE__, __LINE__, "wefttest profiler: rank %d of %d", rank, nranks);
#ifdef WEFT_PROFILER_FAIL_INIT
  (void)context, (void)mask, (void)commName, (void)commHash, (void)nNodes;
  logLine(format("init-refused rank=%d", rank));
  return ncclInternalError;
#else
  *mask = maskFromEnv();
  *context = new int(rank);
  logLine(format("init v4 rank=%d nranks=%d nNodes=%d name=%s hash=%s", rank, nranks, nNodes,
                 commName ? commName : "(null)", commHash ? "set" : "zero"));
  return ncclSuccess;
#endif
}

ncclResult_t startV4(void* context, void** handle, weftProfilerDescr_v4_t* d) {
  const int rank = *static_cast<int*>(context);
  if (d->type == weftProfileGroup) {
    logLine(format("start rank=%d group", rank));
  } else if (d->type == weftProfileColl) {
    logLine(
        format("start rank=%d coll parent=%s seq=%llu func=%s count=%zu root=%d datatype=%s nch=%d algo=%s "
               "proto=%s",
               d->rank, parentKind(d->parentObj), static_cast<unsigned long long>(d->coll.seqNumber), d->coll.func,
               d->coll.count, d->coll.root, d->coll.datatype, d->coll.nChannels, d->coll.algo, d->coll.proto));
  } else if (d->type == weftProfileP2p) {
    logLine(format("start rank=%d p2p parent=%s func=%s peer=%d count=%zu datatype=%s", d->rank,
                   parentKind(d->parentObj), d->p2p.func, d->p2p.peer, d->p2p.count, d->p2p.datatype));
  } else {
    logLine(format("start rank=%d type=%d", d->rank, d->type));
  }
  *handle = newEvent(d->type, rank);
  return ncclSuccess;
}

ncclResult_t initV3(void** context, int* mask) {
  *mask = maskFromEnv();
  *context = new int(-1);
  logLine("init v3");
  return ncclSuccess;
}

ncclResult_t startV3(void* context, void** handle, weftProfilerDescr_v3_t* d) {
  (void)context;
  if (d->type == weftProfileColl)
    logLine(format("start rank=%d coll parent=%s seq=%llu func=%s count=%zu name=%s hash=%s", d->rank,
                   parentKind(d->parentObj), static_cast<unsigned long long>(d->coll.seqNumber), d->coll.func,
                   d->coll.count, d->coll.name ? d->coll.name : "(null)", d->coll.commHash ? "set" : "zero"));
  else if (d->type == weftProfileP2p)
    logLine(format("start rank=%d p2p func=%s peer=%d", d->rank, d->p2p.func, d->p2p.peer));
  else
    logLine(format("start rank=%d type=%d", d->rank, d->type));
  *handle = newEvent(d->type, d->rank);
  return ncclSuccess;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* weftTestProfilerLog() {
  static std::string copy;
  const std::lock_guard<std::mutex> lock(gMutex);
  copy = gLog;
  return copy.c_str();
}

__attribute__((visibility("default"))) void weftTestProfilerClear() {
  const std::lock_guard<std::mutex> lock(gMutex);
  gLog.clear();
}

#ifdef WEFT_PROFILER_V4
__attribute__((visibility("default"))) weftProfiler_v4_t ncclProfiler_v4 = {
    "wefttest-v4",
    initV4,
    startV4,
    stopEvent,
    [](void* h, int s, weftProfilerStateArgs_v4_t*) { return recordState(h, s, nullptr); },
    finalize};
#endif
#if defined(WEFT_PROFILER_V3) || defined(WEFT_PROFILER_V4)
__attribute__((visibility("default")))
weftProfiler_v3_t ncclProfiler_v3 = {"wefttest-v3", initV3, startV3, stopEvent, recordState, finalize};
#endif
#ifdef WEFT_PROFILER_V2_ONLY
// Only a table older than Weft loads: the loader must say so, and go on.
__attribute__((visibility("default"))) int ncclProfiler_v2 = 0;
#endif
}
