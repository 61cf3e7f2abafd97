// Two ranks that hand data back and forth while sharing one core.
//
// A waiting host thread spins first (common/backoff.h): cheap when the peer
// runs on another core. When both ranks of a pair happen to run on the same
// core (the scheduler put them there while they blocked in set-up, and wakes
// a sleeper on its waker's core), each hand-off costs a whole spin: the
// waiter spins out, yields, the peer runs, posts, spins out in turn and
// yields back. Both stay runnable, yet the kernel's balancer can take tens of
// milliseconds to notice, and a benchmark's first thousands of calls run at
// ~10 us instead of ~0.2 us.
//
// The sign is unmistakable: wait after wait spins out and is then satisfied
// by the first or second yield, within microseconds (the peer ran on our
// core during it). A peer on another core that is merely late satisfies a
// wait while we spin or after many yields, not at the first one, wait after
// wait; and when the yield gives the core to some other program (a loaded
// machine), it comes back after a time slice (milliseconds), which does not
// count either: moving would not help there. After a streak
// of such waits the thread moves itself once to another of its allowed CPUs
// (narrowing its affinity for a moment, then restoring the caller's mask
// exactly; the kernel does not move it back). Both ends of a pair see the
// same streak; had both moved they could land together again, so the one
// waiting on a lower rank moves first, and the other only when streaks go on
// (the pair is not a simple ping-pong). Only when local ranks do not
// outnumber cores (then sharing a core is expected) and WEFT_SPREAD_RANKS is
// not 0.
#pragma once

#include <cstdint>

namespace weft {

class CoreShare {
 public:
  // The thresholds (defined in core_share.cc, so that tuning them does not
  // rebuild every kernel that includes this header):
  // waits satisfied within kMaxYields yields after a full spin, and within
  // kMaxYieldNs of the first yield, count as hand-offs on our core;
  static const int kMaxYields;
  static const int64_t kMaxYieldNs;
  // kStreak of them in a row make a streak;
  static const int kStreak;
  // at most one move attempt per thread in a gap of kMinGapNs, doubled
  // after each attempt made within twice the gap of the one before (moving
  // did not end the sharing), up to kMaxGapNs, so a machine where it keeps
  // coming back sees few moves;
  static const int64_t kMinGapNs;
  static const int64_t kMaxGapNs;
  // a thread that is not the first choice lets kDeferredStreaks - 1
  // attempts pass before moving.
  static const int kDeferredStreaks;

  // Called when a wait that went past spinning ends, with the number of
  // yields it took and the time since spinning ended; true when a streak
  // has just completed: the caller then calls streakComplete. A wait
  // satisfied while spinning calls noteSpinWait.
  static bool noteYieldWait(int yields, int64_t yieldNs);
  static void noteSpinWait();
  // `firstChoice`: this thread should move rather than its peer (it waited on
  // a lower rank). Moves now, or after kDeferredStreaks when not first.
  static void streakComplete(bool firstChoice);

  // Moves this thread off its current CPU to another allowed one, keeping
  // its affinity mask as it was. False when it could not (one allowed CPU,
  // or the kernel refused).
  static bool moveOffCurrentCpu();

  // This thread's moves so far (tests, logs).
  static int moves();

  // Tests: forget this thread's streaks and gaps.
  static void resetForTest();
};

}  // namespace weft
