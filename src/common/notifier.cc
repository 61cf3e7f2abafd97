#include "common/notifier.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/backoff.h"

namespace weft {
namespace {

long futex(const std::atomic<uint32_t>* word, int op, uint32_t value, const timespec* timeout) {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex needs a plain 32-bit word");
  return syscall(SYS_futex, reinterpret_cast<const uint32_t*>(word), op, value, timeout, nullptr, 0);
}

}  // namespace

void Notifier::notify() {
  seq_.fetch_add(1, std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex(&seq_, FUTEX_WAKE_PRIVATE, INT32_MAX, nullptr);
}

void Notifier::waitChange(uint32_t seen, int spinCount, int timeoutMs) const {
  for (int i = 0; i < spinCount; ++i) {
    if (seq_.load(std::memory_order_acquire) != seen) return;
    cpuRelax();
  }
  for (int i = 0; i < 16; ++i) {
    if (seq_.load(std::memory_order_acquire) != seen) return;
    sched_yield();
  }
  timespec ts{timeoutMs / 1000, (timeoutMs % 1000) * 1000000L};
  sleepers_.fetch_add(1, std::memory_order_seq_cst);
  if (seq_.load(std::memory_order_seq_cst) == seen)
    futex(&seq_, FUTEX_WAIT_PRIVATE, seen, timeoutMs >= 0 ? &ts : nullptr);
  sleepers_.fetch_sub(1, std::memory_order_seq_cst);
}

}  // namespace weft
