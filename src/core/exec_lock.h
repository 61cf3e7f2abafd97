// ExecLock: a communicator's operation lock, biased to the thread that
// calls the communicator.
//
// Why: a locked instruction (a mutex's unlock, an atomic counter) right
// after a call's stores to the FIFO slot and counter lines, which the
// receiver's core holds, waits until those stores have completed: a
// cross-core round trip on every call. The biased thread enters and leaves
// a repeated call with plain loads and stores, so the stores drain while it
// goes on (docs/performance.md has the measurement).
//
// How: a mutex, plus a bias. lock()/unlock() are the mutex, for everyone.
// The bias is granted under lock() to the calling thread (biasToCaller);
// that thread may then run a section without the mutex, between
// tryEnterBiased() and leaveBiased(). Any other thread's lock() revokes
// the bias first: it raises `revoked_`, makes every thread of the process
// pass a memory barrier (common/asym_barrier.h), then waits until the
// biased thread is outside. The two sides form a Dekker pair: the biased
// thread stores inside_ then loads revoked_ and owner_ with only a compiler
// barrier between; the revoker stores revoked_ and owner_, runs the
// process-wide barrier, then loads inside_. The barrier puts the biased
// thread's store before its loads for the revoker, so either the biased
// thread sees the revocation and backs out, or the revoker sees it inside
// and waits.
// A revoked bias stays revoked until its thread takes the lock again (its
// next call goes the locked way and is granted the bias anew).
//
// Without membarrier (old kernel, seccomp) the bias is never granted and
// ExecLock is a plain mutex; under ThreadSanitizer, which cannot see the
// process-wide barrier, likewise.
#pragma once

#include <pthread.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace weft::core {

class ExecLock {
 public:
  void lock();
  void unlock() { mutex_.unlock(); }

  // The biased thread's section. False (nothing held) when the calling
  // thread does not hold the bias or it was revoked.
  bool tryEnterBiased() noexcept {
    if (!biasedToMe()) return false;
    inside_.store(1, std::memory_order_relaxed);
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the revoker's barrier orders it for the CPU
    // Both words again, not only revoked_: a thread stalled between its
    // first two loads may resume after a revocation and after another
    // thread took the bias (revoked_ back to 0); owner_ is then not this
    // thread's any more, and only this thread could make it so again.
    if (!biasedToMe()) {
      inside_.store(0, std::memory_order_release);
      return false;
    }
    std::atomic_signal_fence(std::memory_order_seq_cst);  // the section's accesses stay after the check
    return true;
  }
  // Release: the section's writes are visible to a revoker that sees it out.
  void leaveBiased() noexcept { inside_.store(0, std::memory_order_release); }

  // Under lock(): the calling thread gets the bias (when the process can
  // revoke it).
  void biasToCaller() noexcept;

 private:
  static uintptr_t self() noexcept { return static_cast<uintptr_t>(pthread_self()); }
  bool biasedToMe() const noexcept {
    return owner_.load(std::memory_order_relaxed) == self() && revoked_.load(std::memory_order_relaxed) == 0;
  }

  std::mutex mutex_;
  std::atomic<uintptr_t> owner_{0};   // the biased thread; 0: none (written under mutex_)
  std::atomic<uint32_t> revoked_{1};  // written under mutex_
  std::atomic<uint32_t> inside_{0};   // written by the biased thread only
};

}  // namespace weft::core
