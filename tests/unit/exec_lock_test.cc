// ExecLock (core/exec_lock.h): the thread holding the bias enters its
// sections without the mutex; any other thread's lock() revokes the bias
// and waits for a section in progress. These tests check the exclusion
// itself (a plain counter incremented from both sides must not lose an
// update) and the hand-over of the bias. Where the process cannot use
// membarrier the bias is never granted; the tests then check that.
#include "core/exec_lock.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include "common/asym_barrier.h"

namespace weft::core {
namespace {

bool biasPossible() {
#if defined(__SANITIZE_THREAD__)
  return false;
#else
  return asymmetricBarrierReady();
#endif
}

// counter += 1 as a read, a pause and a write: a section that overlaps
// another loses the other's update.
void slowIncrement(long* counter) {
  const long value = *counter;
  for (volatile int i = 0; i < 50; i = i + 1) {
  }
  *counter = value + 1;
}

void grantToMe(ExecLock& lock) {
  std::lock_guard<ExecLock> held(lock);
  lock.biasToCaller();
}

TEST(ExecLock, BiasIsTheGrantedThreadsOnly) {
  ExecLock lock;
  EXPECT_FALSE(lock.tryEnterBiased()) << "no bias before a grant";
  grantToMe(lock);
  if (!biasPossible()) {
    EXPECT_FALSE(lock.tryEnterBiased()) << "granted although the process cannot revoke it";
    GTEST_SKIP() << "membarrier unavailable here: ExecLock is a plain mutex";
  }
  ASSERT_TRUE(lock.tryEnterBiased());
  lock.leaveBiased();
  bool other = true;
  std::thread([&] { other = lock.tryEnterBiased(); }).join();
  EXPECT_FALSE(other) << "a thread without the bias entered";
}

// Another thread's lock() waits for the section in progress, and the
// bias is gone afterwards until its thread takes the lock again.
TEST(ExecLock, LockWaitsForTheSectionThenRevokes) {
  if (!biasPossible()) GTEST_SKIP() << "membarrier unavailable here";
  ExecLock lock;
  grantToMe(lock);
  ASSERT_TRUE(lock.tryEnterBiased());
  std::atomic<int> sectionDone{0};
  std::atomic<int> seenAtLock{-1};
  std::thread other([&] {
    std::lock_guard<ExecLock> held(lock);
    seenAtLock = sectionDone.load();
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(seenAtLock.load(), -1) << "lock() returned while the biased section was running";
  sectionDone = 1;
  lock.leaveBiased();
  other.join();
  EXPECT_EQ(seenAtLock.load(), 1);
  EXPECT_FALSE(lock.tryEnterBiased()) << "the bias survived another thread's lock()";
  grantToMe(lock);
  EXPECT_TRUE(lock.tryEnterBiased()) << "the bias was not granted again";
  lock.leaveBiased();
}

// Both sides increment one plain counter, the biased thread in sections
// (taking the lock and the bias again whenever it was revoked), the other
// under lock(): any hole in the exclusion loses increments.
TEST(ExecLock, NoUpdateIsLostBetweenBiasedSectionsAndLockers) {
  if (!biasPossible()) GTEST_SKIP() << "membarrier unavailable here";
  ExecLock lock;
  constexpr int kLockerIters = 20000;
  long counter = 0;
  long biasedIters = 0;
  int sections = 0;
  std::atomic<int> relocks{0};
  std::atomic<int> lockerDone{0};
  std::thread biased([&] {
    // Runs until the locker is done, so the two overlap throughout.
    while (lockerDone.load(std::memory_order_relaxed) == 0 || biasedIters < 100000) {
      ++biasedIters;
      if (lock.tryEnterBiased()) {
        slowIncrement(&counter);
        ++sections;
        lock.leaveBiased();
      } else {
        std::lock_guard<ExecLock> held(lock);
        slowIncrement(&counter);
        relocks.fetch_add(1, std::memory_order_relaxed);
        lock.biasToCaller();
      }
    }
  });
  long lockerIters = 0;
  std::thread locker([&] {
    // Until the bias has changed hands often (or 10 s: a starved thread
    // makes the check below fail rather than the test hang).
    const auto t0 = std::chrono::steady_clock::now();
    while (lockerIters < kLockerIters || relocks.load(std::memory_order_relaxed) < 200) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) break;
      std::lock_guard<ExecLock> held(lock);
      slowIncrement(&counter);
      ++lockerIters;
    }
    lockerDone = 1;
  });
  biased.join();
  locker.join();
  EXPECT_EQ(counter, biasedIters + lockerIters);
  EXPECT_GT(sections, 0) << "the biased path never ran: the test proves nothing";
  EXPECT_GE(relocks.load(), 200) << "the bias rarely changed hands: the test proves little";
}

}  // namespace
}  // namespace weft::core
