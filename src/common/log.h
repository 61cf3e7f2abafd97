// Logging in NCCL's shape, driven by NCCL_DEBUG, NCCL_DEBUG_SUBSYS and
// NCCL_DEBUG_FILE:
//   VERSION  the message alone (the version banner)
//   WARN     host:pid:tid [rank] file.cc:line NCCL WARN message
//   INFO     host:pid:tid [rank] NCCL INFO message
//   TRACE    host:pid:tid [rank] ms file.cc:line NCCL TRACE message
//   CALL     host:pid:tid NCCL CALL message (TRACE level, CALL subsystem)
// [rank] is the communicator rank the thread works for ("-" when none).
// The check is inline (two relaxed loads once initialised), so disabled
// logging costs nothing measurable, also on the per-call paths.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft::log {

enum class Level : int { kNone = 0, kVersion = 1, kWarn = 2, kInfo = 3, kTrace = 4 };

// Subsystem bits, as NCCL_DEBUG_SUBSYS names them.
enum Subsys : uint32_t {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kShm = 1u << 3,
  kNet = 1u << 4,
  kGraph = 1u << 5,
  kTuning = 1u << 6,
  kEnv = 1u << 7,
  kAlloc = 1u << 8,
  kCall = 1u << 9,
  kProxy = 1u << 10,
  kBootstrap = 1u << 11,
  kAll = ~0u
};

namespace detail {
// -1 until the environment has been read; then a Level.
extern std::atomic<int> gLevel;
extern std::atomic<uint32_t> gSubsys;
bool enabledSlow(Level lvl, uint32_t subsys);
}  // namespace detail

// Reads the environment on first use; reset() re-reads it (ncclResetDebugInit).
void reset();

Level level();

// Whether a line of this level and subsystem would be written. VERSION and
// WARN lines ignore the subsystem mask, as NCCL's do.
inline bool enabled(Level lvl, uint32_t subsys) {
  const int current = detail::gLevel.load(std::memory_order_acquire);
  if (current < 0) return detail::enabledSlow(lvl, subsys);
  if (static_cast<int>(lvl) > current) return false;
  return lvl <= Level::kWarn || (detail::gSubsys.load(std::memory_order_relaxed) & subsys) != 0;
}

// Parses NCCL_DEBUG_SUBSYS syntax (comma list, leading ^ inverts, ALL);
// unknown names are ignored, as NCCL does.
uint32_t parseSubsys(const char* text);

void write(Level lvl, uint32_t subsys, const char* file, int line, const char* fmt, ...)
    __attribute__((format(printf, 5, 6)));

// The rank printed in log lines written by this thread (-1: unknown).
int currentRank();
void setCurrentRank(int rank);

// Sets the thread's log rank for a scope.
class ScopedRank {
 public:
  explicit ScopedRank(int rank) : saved_(currentRank()) { setCurrentRank(rank); }
  ~ScopedRank() { setCurrentRank(saved_); }
  ScopedRank(const ScopedRank&) = delete;
  ScopedRank& operator=(const ScopedRank&) = delete;

 private:
  int saved_;
};

}  // namespace weft::log

#define WEFT_LOG_AT_(lvl, subsys, file, line, ...)                                                   \
  do {                                                                                               \
    if (::weft::log::enabled(lvl, subsys)) ::weft::log::write(lvl, subsys, file, line, __VA_ARGS__); \
  } while (0)
#define WEFT_LOG_(lvl, subsys, ...) WEFT_LOG_AT_(lvl, subsys, __FILE__, __LINE__, __VA_ARGS__)

#define WEFT_WARN(...) WEFT_LOG_(::weft::log::Level::kWarn, ::weft::log::kAll, __VA_ARGS__)
#define WEFT_INFO(subsys, ...) WEFT_LOG_(::weft::log::Level::kInfo, subsys, __VA_ARGS__)
#define WEFT_TRACE(subsys, ...) WEFT_LOG_(::weft::log::Level::kTrace, subsys, __VA_ARGS__)
// A WARN line naming the place where a failed Status was created.
#define WEFT_WARN_STATUS(status)                                                                     \
  WEFT_LOG_AT_(::weft::log::Level::kWarn, ::weft::log::kAll, (status).file(), (status).line(), "%s", \
               (status).message().c_str())
