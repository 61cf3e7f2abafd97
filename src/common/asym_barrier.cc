#include "common/asym_barrier.h"

#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <thread>

#include "common/log.h"

namespace weft {
namespace {

long membarrier(int cmd) { return syscall(__NR_membarrier, cmd, 0, 0); }

// 0 unknown, 1 ready, 2 unavailable. A forked child keeps the parent's
// registration (the kernel copies it with the address space).
std::atomic<int> state{0};

}  // namespace

bool asymmetricBarrierReady() noexcept {
  int s = state.load(std::memory_order_acquire);
  if (s != 0) return s == 1;
  const long cmds = membarrier(MEMBARRIER_CMD_QUERY);
  const bool ok = cmds >= 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0 &&
                  membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
  if (!ok) WEFT_INFO(log::kInit, "membarrier (private expedited) is not available: calls take the locked path");
  state.store(ok ? 1 : 2, std::memory_order_release);
  return ok;
}

void asymmetricBarrier() noexcept {
  for (;;) {
    if (membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0) return;
    if (errno == EINTR || errno == EAGAIN) continue;
    // Registered, so this should not happen. Without the barrier the other
    // side's last store may still sit in its core's store buffer, which
    // drains within microseconds: wait far longer than that.
    WEFT_WARN("membarrier failed (errno %d); waiting 10 ms instead", errno);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return;
  }
}

}  // namespace weft
