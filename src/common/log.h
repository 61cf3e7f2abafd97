// Logging in NCCL's shape: `host:pid:tid [rank] NCCL INFO message`, driven by
// NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE. The level check is one
// relaxed atomic load, so disabled logging costs nothing measurable.
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

// Reads the environment on first use; reset() re-reads it (ncclResetDebugInit).
void reset();

Level level();
bool enabled(Level lvl, uint32_t subsys);

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

#define WEFT_LOG_(lvl, subsys, ...)                                                                          \
  do {                                                                                                       \
    if (::weft::log::enabled(lvl, subsys)) ::weft::log::write(lvl, subsys, __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#define WEFT_WARN(...) WEFT_LOG_(::weft::log::Level::kWarn, ::weft::log::kAll, __VA_ARGS__)
#define WEFT_INFO(subsys, ...) WEFT_LOG_(::weft::log::Level::kInfo, subsys, __VA_ARGS__)
#define WEFT_TRACE(subsys, ...) WEFT_LOG_(::weft::log::Level::kTrace, subsys, __VA_ARGS__)
