// Status and Result: how every layer reports failure. No exceptions cross a
// layer or the C ABI; a failed Status carries an ncclResult_t and a message
// that names what went wrong, where, and what the user can do.
#pragma once

#include <cstdarg>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "nccl.h"

#ifndef WEFT_NCCL_H
#error "src/ must see Weft's include/nccl.h, not another nccl.h on the include path"
#endif

namespace weft {

// A result code together with the source line that produced it. Converted
// implicitly from ncclResult_t at the call site, so that every failed Status
// knows where it arose (a WARN line names that place, not the logger's).
struct CodeAt {
  CodeAt(ncclResult_t c, const char* f = __builtin_FILE(), int l = __builtin_LINE()) noexcept  // NOLINT: implicit
      : code(c), file(f), line(l) {}
  ncclResult_t code;
  const char* file;
  int line;
};

class [[nodiscard]] Status {
 public:
  Status() noexcept = default;
  Status(CodeAt code, std::string message);

  bool ok() const noexcept { return rep_ == nullptr; }
  ncclResult_t code() const noexcept { return rep_ ? rep_->code : ncclSuccess; }
  const std::string& message() const noexcept;
  // Where the failure was created (file as the compiler named it; "" and 0 when ok).
  const char* file() const noexcept { return rep_ ? rep_->file : ""; }
  int line() const noexcept { return rep_ ? rep_->line : 0; }

  // Returns a copy whose message starts with `context: `.
  Status withContext(const std::string& context) const;

 private:
  struct Rep {
    ncclResult_t code;
    std::string message;
    const char* file;
    int line;
  };
  // Shared so a Status is cheap to copy into async-error slots; null means ok.
  std::shared_ptr<const Rep> rep_;
};

std::string strFormat(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
std::string strFormatV(const char* fmt, va_list args);

// Builds a failed Status with a printf-style message.
Status errorStatus(CodeAt code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

inline Status okStatus() { return Status(); }

// The enumerator's name ("ncclRemoteError"), for messages about codes that
// came from elsewhere (a network plugin).
const char* resultName(ncclResult_t code);

// A value or a failed Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}          // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design
  bool ok() const noexcept { return status_.ok(); }
  const Status& status() const noexcept { return status_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& value() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace weft

// Returns the Status of `expr` from the enclosing function when it failed.
#define WEFT_RETURN_IF_ERROR(expr)               \
  do {                                           \
    ::weft::Status weft_status_ = (expr);        \
    if (!weft_status_.ok()) return weft_status_; \
  } while (0)

// Declares `lhs` from a Result, returning its Status when it failed.
#define WEFT_ASSIGN_OR_RETURN(lhs, expr)                                                                \
  auto WEFT_CONCAT_(weft_result_, __LINE__) = (expr);                                                   \
  if (!WEFT_CONCAT_(weft_result_, __LINE__).ok()) return WEFT_CONCAT_(weft_result_, __LINE__).status(); \
  lhs = std::move(WEFT_CONCAT_(weft_result_, __LINE__)).value()

#define WEFT_CONCAT_INNER_(a, b) a##b
#define WEFT_CONCAT_(a, b) WEFT_CONCAT_INNER_(a, b)
