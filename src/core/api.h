// The C ABI boundary. Every exported function is defined as pnccl<Name> with
// nccl<Name> a weak alias of it (a profiler or shim may define nccl<Name>
// itself and reach Weft through pnccl<Name>), and runs its
// body through apiCall: Status becomes ncclResult_t, the message becomes
// the thread's last error (ncclGetLastError) and a WARN line, and no
// exception ever crosses into C.
#pragma once

#include <exception>
#include <new>

#include "common/log.h"
#include "common/status.h"
#include "nccl.h"

#define WEFT_EXPORT extern "C" __attribute__((visibility("default")))

#define WEFT_NCCL_API(ret, name, ...)                                        \
  WEFT_EXPORT ret name(__VA_ARGS__) __attribute__((weak, alias("p" #name))); \
  WEFT_EXPORT ret p##name(__VA_ARGS__)

namespace weft::core {

// Records `status` (if failed) for ncclGetLastError and logs it; returns its code.
ncclResult_t finishApiCall(const char* api, ncclComm_t comm, const Status& status);

// Counts a call inside the library on a live communicator, so that
// destroy/abort (possibly from another thread) frees it only after the call
// has stopped touching it, error bookkeeping included.
class ApiCallScope {
 public:
  explicit ApiCallScope(ncclComm_t comm) noexcept;
  ~ApiCallScope();
  ApiCallScope(const ApiCallScope&) = delete;
  ApiCallScope& operator=(const ApiCallScope&) = delete;

 private:
  ncclComm_t counted_;  // null when the call is not on a live communicator
};

// The CALL line of an entry point (TRACE level, CALL subsystem): its name and
// communicator. Collective and point-to-point calls write their own, with
// every argument (core/api_log.h), and pass kTraceCall false.
void traceCall(const char* api, ncclComm_t comm);

template <bool kTraceCall = true, typename Body>
ncclResult_t apiCall(const char* api, ncclComm_t comm, Body&& body) noexcept {
  if (kTraceCall && log::enabled(log::Level::kTrace, log::kCall)) traceCall(api, comm);
  const ApiCallScope scope(comm);
  try {
    Status status = body();
    if (status.ok()) return ncclSuccess;
    return finishApiCall(api, comm, status);
  } catch (const std::bad_alloc&) {
    return finishApiCall(api, comm, Status(ncclSystemError, "out of host memory"));
  } catch (const std::exception& e) {
    return finishApiCall(api, comm, Status(ncclInternalError, std::string("internal error: ") + e.what()));
  } catch (...) {
    return finishApiCall(api, comm, Status(ncclInternalError, "internal error: unknown exception"));
  }
}

// The calling thread's last error message ("" if none).
const char* threadLastError();

// For entry points that exist for ABI completeness but are not implemented.
Status notSupported(const char* api, const char* why);

}  // namespace weft::core
