#include "common/core_share.h"

#include <sched.h>

#include <algorithm>

#include "common/clock.h"
#include "common/log.h"

namespace weft {

// Eight waits: short enough that a benchmark of 5 warm-up and 20 timed calls
// (nccl-tests' defaults) is past the move before its timed calls; a time
// slice given to another program (milliseconds) never counts.
const int CoreShare::kMaxYields = 2;
const int64_t CoreShare::kMaxYieldNs = 200000;  // 200 us
const int CoreShare::kStreak = 8;
const int64_t CoreShare::kMinGapNs = 20000000;   // 20 ms
const int64_t CoreShare::kMaxGapNs = 2000000000;  // 2 s
const int CoreShare::kDeferredStreaks = 3;

namespace {

struct ShareState {
  int streak = 0;
  int deferred = 0;
  int moves = 0;
  int64_t lastAttemptNs = 0;
  int64_t gapNs = CoreShare::kMinGapNs;
};

thread_local ShareState tState;

}  // namespace

void CoreShare::noteSpinWait() { tState.streak = 0; }

bool CoreShare::noteYieldWait(int yields, int64_t yieldNs) {
  ShareState& s = tState;
  if (yields < 1 || yields > kMaxYields || yieldNs > kMaxYieldNs) {
    s.streak = 0;
    return false;
  }
  if (++s.streak < kStreak) return false;
  s.streak = 0;
  return true;
}

void CoreShare::streakComplete(bool firstChoice) {
  ShareState& s = tState;
  const int64_t now = nowNs();
  if (s.lastAttemptNs != 0) {
    if (now - s.lastAttemptNs < s.gapNs) return;
    s.gapNs = now - s.lastAttemptNs < 2 * s.gapNs ? std::min(2 * s.gapNs, kMaxGapNs) : kMinGapNs;
  }
  s.lastAttemptNs = now;
  if (!firstChoice && ++s.deferred < kDeferredStreaks) return;
  s.deferred = 0;
  const int from = sched_getcpu();
  if (moveOffCurrentCpu()) {
    WEFT_INFO(log::kColl, "waits were handed off on one core (cpu %d) %d times in a row: moved this thread to cpu %d", from,
              kStreak, sched_getcpu());
  }
}

bool CoreShare::moveOffCurrentCpu() {
  cpu_set_t mask;
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0 || CPU_COUNT(&mask) < 2) return false;
  const int cpu = sched_getcpu();
  if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &mask)) return false;
  cpu_set_t others = mask;
  CPU_CLR(cpu, &others);
  // Narrowing the mask moves the thread before the call returns; the
  // original mask back leaves it where it now runs.
  const bool moved = sched_setaffinity(0, sizeof(others), &others) == 0;
  sched_setaffinity(0, sizeof(mask), &mask);
  if (moved) tState.moves += 1;
  return moved;
}

int CoreShare::moves() { return tState.moves; }

void CoreShare::resetForTest() {
  const int moves = tState.moves;
  tState = ShareState{};
  tState.moves = moves;
}

}  // namespace weft
