#include "common/status.h"

#include <cstdio>
#include <vector>

namespace weft {

Status::Status(CodeAt code, std::string message) {
  if (code.code != ncclSuccess)
    rep_ = std::make_shared<const Rep>(Rep{code.code, std::move(message), code.file, code.line});
}

const std::string& Status::message() const noexcept {
  static const std::string kEmpty;
  return rep_ ? rep_->message : kEmpty;
}

Status Status::withContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(CodeAt(code(), file(), line()), context + ": " + message());
}

std::string strFormatV(const char* fmt, va_list args) {
  char small[256];
  va_list copy;
  va_copy(copy, args);
  int needed = std::vsnprintf(small, sizeof(small), fmt, copy);
  va_end(copy);
  if (needed < 0) return std::string(fmt);
  if (static_cast<size_t>(needed) < sizeof(small)) return std::string(small, static_cast<size_t>(needed));
  std::vector<char> big(static_cast<size_t>(needed) + 1);
  std::vsnprintf(big.data(), big.size(), fmt, args);
  return std::string(big.data(), static_cast<size_t>(needed));
}

std::string strFormat(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string out = strFormatV(fmt, args);
  va_end(args);
  return out;
}

Status errorStatus(CodeAt code, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::string message = strFormatV(fmt, args);
  va_end(args);
  return Status(code, std::move(message));
}

const char* resultName(ncclResult_t code) {
  switch (code) {
    case ncclSuccess: return "ncclSuccess";
    case ncclUnhandledCudaError: return "ncclUnhandledCudaError";
    case ncclSystemError: return "ncclSystemError";
    case ncclInternalError: return "ncclInternalError";
    case ncclInvalidArgument: return "ncclInvalidArgument";
    case ncclInvalidUsage: return "ncclInvalidUsage";
    case ncclRemoteError: return "ncclRemoteError";
    case ncclInProgress: return "ncclInProgress";
    default: return "an unknown result code";
  }
}

}  // namespace weft
