// What the API layer logs, in NCCL's forms: the version banner, one COLL
// line per collective or point-to-point call (and its CALL line at TRACE),
// and the init timings of a communicator.
#pragma once

#include <cstddef>

#include "common/log.h"
#include "nccl.h"
#include "weft.h"

namespace weft::core {

struct Comm;

// Once per process, at the first communicator: Weft's version, the NCCL API
// version, the backend and the path of the library that was loaded.
// Written at NCCL_DEBUG=VERSION or WARN as a bare line, at INFO and above as
// an INFO line (NCCL's behaviour).
void showVersionOnce(weftBackend_t backend);

// The arguments of one collective or point-to-point call as NCCL logs them.
// `name` is NCCL's operation name ("AllReduce", "Send"); for Send and Recv
// `root` is the peer.
struct CallRecord {
  const char* name;
  const void* sendbuff;
  const void* recvbuff;
  size_t count;
  ncclDataType_t datatype;
  int op;
  int root;
  ncclComm_t comm;
  cudaStream_t stream;
};

// Whether calls are logged (COLL at INFO, CALL at TRACE). Inline, and the
// record is built only behind it: with logging off a call pays one load
// and a branch, e.g. `if (callLogging()) logCall({...});`.
inline bool callLogging() { return log::enabled(log::Level::kInfo, log::kColl | log::kCall); }

[[gnu::cold, gnu::noinline]] void logCall(const CallRecord& call);

// "Init timings - <api>: rank r nranks n total ... (kernels, alloc, ...)".
void logInitTimings(const Comm& comm);

}  // namespace weft::core
