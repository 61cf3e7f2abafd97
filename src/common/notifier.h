// A sequence number one thread bumps and others wait on: spin briefly, then
// sleep in the kernel (futex) so idle workers cost nothing. notify() makes a
// system call only when somebody is actually asleep.
#pragma once

#include <atomic>
#include <cstdint>

namespace weft {

class Notifier {
 public:
  uint32_t current() const { return seq_.load(std::memory_order_acquire); }

  // Publishes everything written before it to threads that see the new value.
  void notify();

  // Returns once current() != seen; spins spinCount polls before sleeping.
  // Returns early (with current() possibly == seen) after timeoutMs if >= 0.
  void waitChange(uint32_t seen, int spinCount, int timeoutMs = -1) const;

 private:
  std::atomic<uint32_t> seq_{0};
  // seq_cst on seq_ and sleepers_ (see notify/waitChange) rules out the lost
  // wake-up: either the notifier sees the sleeper, or the sleeper's futex
  // call sees the new sequence number and does not sleep.
  mutable std::atomic<int32_t> sleepers_{0};
};

}  // namespace weft
