#include <string>

#include "common/log.h"
#include "core/api.h"
#include "core/comm.h"

namespace weft::core {
namespace {

thread_local std::string tlsLastError;

}  // namespace

ncclResult_t finishApiCall(const char* api, ncclComm_t comm, const Status& status) {
  if (status.code() == ncclInProgress) return ncclInProgress;
  std::string message = std::string(api) + ": " + status.message();
  tlsLastError = message;
  int rank = log::currentRank();
  if (comm != nullptr && checkComm(comm).ok()) {
    Comm* c = asComm(comm);
    std::lock_guard<std::mutex> lock(c->errorMutex);
    c->lastError = message;
    rank = c->rank;
  }
  const log::ScopedRank scoped(rank);
  // The line names where the failure arose, not this function.
  WEFT_LOG_AT_(log::Level::kWarn, log::kAll, status.file(), status.line(), "%s", message.c_str());
  return status.code();
}

ApiCallScope::ApiCallScope(ncclComm_t comm) noexcept : counted_(nullptr) {
  if (comm == nullptr || !checkComm(comm).ok()) return;
  asComm(comm)->apiCalls.fetch_add(1, std::memory_order_acq_rel);
  counted_ = comm;
}

ApiCallScope::~ApiCallScope() {
  if (counted_ != nullptr) asComm(counted_)->apiCalls.fetch_sub(1, std::memory_order_acq_rel);
}

void traceCall(const char* api, ncclComm_t comm) {
  log::write(log::Level::kTrace, log::kCall, __FILE__, __LINE__, "%s(comm %p)", api, static_cast<void*>(comm));
}

const char* threadLastError() { return tlsLastError.c_str(); }

Status notSupported(const char* api, const char* why) {
  return errorStatus(ncclInvalidUsage, "%s is not supported by Weft yet: %s", api, why);
}

}  // namespace weft::core
