// Queries, error strings, logging control and Weft's own extensions.
#include <cstdio>

#include "common/log.h"
#include "core/api.h"
#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/direct_peers.h"
#include "transport/transport.h"
#include "weft.h"

using namespace weft::core;

namespace {

weft::Status checkQuery(ncclComm_t comm, const void* out, const char* outName) {
  WEFT_RETURN_IF_ERROR(checkComm(comm));
  if (out == nullptr) return weft::errorStatus(ncclInvalidArgument, "%s is NULL, expected a pointer", outName);
  return weft::okStatus();
}

// One counter of the FIFO ends this rank sends on, summed over channels and peers.
uint64_t sumOverSendEnds(const Comm& c, uint64_t weft::device::FifoEnd::*counter) {
  uint64_t sum = 0;
  for (const Channel& ch : c.channels)
    for (const auto& conn : ch.send)
      if (conn) sum += conn->end.*counter;
  return sum;
}

}  // namespace

WEFT_NCCL_API(ncclResult_t, ncclCommCount, const ncclComm_t comm, int* count) {
  return apiCall("ncclCommCount", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkQuery(comm, count, "count"));
    *count = asComm(comm)->nranks;
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommUserRank, const ncclComm_t comm, int* rank) {
  return apiCall("ncclCommUserRank", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkQuery(comm, rank, "rank"));
    *rank = asComm(comm)->rank;
    return weft::okStatus();
  });
}

// Host-backend communicators have no CUDA device: -1.
WEFT_NCCL_API(ncclResult_t, ncclCommCuDevice, const ncclComm_t comm, int* device) {
  return apiCall("ncclCommCuDevice", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkQuery(comm, device, "device"));
    *device = asComm(comm)->cudaDev;
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommGetAsyncError, ncclComm_t comm, ncclResult_t* asyncError) {
  return apiCall("ncclCommGetAsyncError", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkQuery(comm, asyncError, "asyncError"));
    const Comm* c = asComm(comm);
    *asyncError = c->asyncError.load(std::memory_order_acquire);
    // cuda: kernels stop on a failure without any host call (the proxy or
    // a timed-out block raises their abort flag), and this is where a peer
    // that exited under a kernel's wait is noticed; report it at once, not
    // only at the next call. An atomic load and a clock read while nothing failed.
    if (*asyncError == ncclSuccess && c->backend == weftBackendCuda) {
      const weft::Status failed = cudaKernelFailure(*c);
      if (!failed.ok()) *asyncError = failed.code();
    }
    return weft::okStatus();
  });
}

WEFT_NCCL_API(const char*, ncclGetErrorString, ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=WARN for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=WARN for details)";
    case ncclInternalError: return "internal error - please report this issue to the Weft developers";
    case ncclInvalidArgument: return "invalid argument (ncclGetLastError or NCCL_DEBUG=WARN says which)";
    case ncclInvalidUsage: return "invalid usage (ncclGetLastError or NCCL_DEBUG=WARN says why)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
  }
}

WEFT_NCCL_API(const char*, ncclGetLastError, ncclComm_t comm) {
  const char* mine = threadLastError();
  if (mine[0] != '\0' || comm == nullptr || !checkComm(comm).ok()) return mine;
  Comm* c = asComm(comm);
  std::lock_guard<std::mutex> lock(c->errorMutex);
  return c->lastError.c_str();
}

WEFT_NCCL_API(void, ncclResetDebugInit) { weft::log::reset(); }

WEFT_EXPORT ncclResult_t weftCommGetBackend(ncclComm_t comm, weftBackend_t* backend) {
  return apiCall("weftCommGetBackend", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkQuery(comm, backend, "backend"));
    *backend = asComm(comm)->backend;
    return weft::okStatus();
  });
}

WEFT_EXPORT ncclResult_t weftCommDescribe(ncclComm_t comm, char* buf, size_t len) {
  return apiCall("weftCommDescribe", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkQuery(comm, buf, "buf"));
    if (len == 0) return weft::errorStatus(ncclInvalidArgument, "len is 0, expected room for at least a NUL byte");
    const Comm* c = asComm(comm);
    std::string text =
        weft::strFormat("rank %d of %d, backend %s, %zu channels (min %d), step %lld bytes", c->rank, c->nranks,
                        c->backend == weftBackendCuda ? "cuda" : "host", c->channels.size(), c->minChannels,
                        static_cast<long long>(c->stepBytes));
    for (const Channel& ch : c->channels) {
      text += weft::strFormat("; channel %d ring", ch.id);
      for (int r : ch.ringOrder) text += " " + std::to_string(r);
      if (c->nranks > 1) {
        const auto& next = ch.send[static_cast<size_t>(ch.ring.next)];
        text += weft::strFormat(" (to %d via %s)", ch.ring.next, next ? next->transport->name() : "?");
      }
    }
    // Steps the next ranks read from this rank's inputs in place (direct
    // reads, FifoEnd::directReads), on the host backend's FIFO ends.
    if (c->backend == weftBackendHost && c->nranks > 1) {
      text += weft::strFormat("; direct reads: %llu steps of this rank's input read in place",
                              static_cast<unsigned long long>(sumOverSendEnds(*c, &weft::device::FifoEnd::directReads)));
    }
    if (c->directPeers) {
      const DirectCounts d = c->directPeers->counts();
      // The data path's own count of the same thing (FifoEnd::directMapped,
      // the counter the cuda backend reports): link-calls written by pointer.
      const uint64_t byPointer = sumOverSendEnds(*c, &weft::device::FifoEnd::directMapped);
      text += weft::strFormat(
          "; direct between processes: %llu link-calls mapped, %llu by cross-memory attach, %llu through the FIFO, "
          "%llu refused steps, %zu peer segments mapped, %llu link-calls by pointer on the FIFO ends",
          static_cast<unsigned long long>(d.mapped), static_cast<unsigned long long>(d.crossMemory),
          static_cast<unsigned long long>(d.slots), static_cast<unsigned long long>(d.refusedSteps),
          c->directPeers->mappedSegments(), static_cast<unsigned long long>(byPointer));
      // Direct reads of peers' inputs (the consumer's side of the count above).
      text += weft::strFormat("; reads between processes: %llu link-calls through a mapped segment, %llu out of reach",
                              static_cast<unsigned long long>(d.readsMapped),
                              static_cast<unsigned long long>(d.readsRefused));
    }
    if (c->backend == weftBackendCuda && c->cuda) {
      uint64_t mapped = 0;
      const weft::Result<bool> settled = cudaDirectMappedCalls(*c, &mapped);
      if (settled.ok() && settled.value())
        text += weft::strFormat("; direct between processes: %llu link-calls into mapped windows, %zu windows",
                                static_cast<unsigned long long>(mapped), c->cuda->windows.size());
      else
        text += weft::strFormat("; direct between processes: counts unread (%s), %zu windows",
                                settled.ok() ? "kernels running" : settled.status().message().c_str(),
                                c->cuda->windows.size());
    }
    std::snprintf(buf, len, "%s", text.c_str());
    return weft::okStatus();
  });
}
