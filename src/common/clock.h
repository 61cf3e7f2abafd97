// Monotonic time and deadlines.
#pragma once

#include <time.h>

#include <cstdint>
#include <limits>

namespace weft {

inline int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

// A point in monotonic time after which a wait gives up.
class Deadline {
 public:
  static Deadline never() { return Deadline(std::numeric_limits<int64_t>::max()); }
  static Deadline afterMs(int64_t ms) { return ms <= 0 ? never() : Deadline(nowNs() + ms * 1000000ll); }
  static Deadline afterSec(int64_t sec) { return sec <= 0 ? never() : Deadline(nowNs() + sec * 1000000000ll); }

  bool expired() const { return atNs_ != std::numeric_limits<int64_t>::max() && nowNs() >= atNs_; }
  bool isNever() const { return atNs_ == std::numeric_limits<int64_t>::max(); }
  // Milliseconds left, clamped to [0, INT32_MAX]; -1 for never (poll's convention).
  int remainingMsForPoll() const {
    if (isNever()) return -1;
    int64_t left = (atNs_ - nowNs()) / 1000000ll;
    if (left < 0) return 0;
    return left > 0x7fffffff ? 0x7fffffff : static_cast<int>(left);
  }

 private:
  explicit Deadline(int64_t atNs) : atNs_(atNs) {}
  int64_t atNs_;
};

}  // namespace weft
