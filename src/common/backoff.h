// How a host thread waits for something another thread or process will do:
// spin (cheapest when the other side is running on another core), then yield
// the core (when ranks outnumber cores, the thread we wait for may need ours),
// then sleep in growing steps so a long wait costs almost no CPU.
#pragma once

#include <sched.h>
#include <time.h>

#include <cstdint>

namespace weft {

inline void cpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

class Backoff {
 public:
  explicit Backoff(int spinLimit) : spinLimit_(spinLimit) {}

  void pause() {
    if (spins_ < spinLimit_) {
      ++spins_;
      cpuRelax();
    } else if (yields_ < kYieldLimit) {
      ++yields_;
      sched_yield();
    } else {
      timespec ts{0, sleepNs_};
      nanosleep(&ts, nullptr);
      if (sleepNs_ < kMaxSleepNs) sleepNs_ *= 2;
    }
  }

  // True once the waiter has stopped spinning (cheap checks may run each pause).
  bool pastSpinning() const { return spins_ >= spinLimit_; }
  // Yields so far (after spinning, before sleeping).
  int yields() const { return yields_; }

 private:
  static constexpr int kYieldLimit = 2000;
  // Sleeps stay short: a waiter asleep when its data arrives holds up the
  // whole pipeline behind it. With 1 ms, 4 ranks on 2 cores broadcast
  // 16 MiB at 0.5-0.8 GB/s; with 100 us, at 3-4 GB/s.
  static constexpr long kMaxSleepNs = 100000;  // 100 us
  int spinLimit_;
  int spins_ = 0;
  int yields_ = 0;
  long sleepNs_ = 20000;
};

// Spin count when nothing else is known: long enough to cover a peer's step
// on another core, short enough to give the core away quickly otherwise.
// A pause is about 50 ns here, so 100 polls are ~5 us; past them a wait
// polls between sched_yield calls, which return at once when nothing else
// wants the core. Measured on 2 cores, 2 ranks (weft-perf, 5 rounds):
// with the machine quiet, 100 and 1000 give the same medians from 8 B to
// 2 MiB (AllReduce and Broadcast); with two busy processes competing for
// the cores, 1000 made every hand-off cost the whole spin (8 B AllReduce
// 57.6 us, 256 KiB 107 us) where 100 costs 4.9 and 58 us. (20000 polls,
// ~1 ms, once made 4 KiB AllReduce take 1.1 ms in 2 runs out of 10.)
constexpr int kDefaultSpinCount = 100;
// When ranks outnumber cores the peer we wait for may need our core: give it
// away at once (measured, 4 ranks on 2 cores, 8-byte AllReduce: 5 us with no
// spinning, 15 us after 200 pauses, 112 us after 2000).
constexpr int kOversubscribedSpinCount = 0;

}  // namespace weft
