#include "core/exec_lock.h"

#include <thread>

#include "common/asym_barrier.h"

namespace weft::core {

void ExecLock::lock() {
  mutex_.lock();
  const uintptr_t owner = owner_.load(std::memory_order_relaxed);
  if (owner == 0 || owner == self()) return;  // no bias, or ours: we are not inside a section
  revoked_.store(1, std::memory_order_relaxed);
  owner_.store(0, std::memory_order_relaxed);
  asymmetricBarrier();
  // A section in progress ends when its call returns; a call blocked on a
  // peer ends on its own timeout or on the abort flag, as with the mutex.
  while (inside_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
}

void ExecLock::biasToCaller() noexcept {
#if defined(__SANITIZE_THREAD__)
  return;
#else
  if (!asymmetricBarrierReady()) return;
  owner_.store(self(), std::memory_order_relaxed);
  revoked_.store(0, std::memory_order_relaxed);
#endif
}

}  // namespace weft::core
