// CoreShare (common/core_share.h): a thread whose waits are handed off on its
// own core moves to another allowed CPU, keeping its affinity mask.
#include "common/core_share.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <chrono>
#include <thread>

namespace weft {
namespace {

cpu_set_t currentMask() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  EXPECT_EQ(sched_getaffinity(0, sizeof(mask), &mask), 0);
  return mask;
}

// Runs `body` on a new thread whose mask is {a, b} and which runs on a.
template <typename Body>
void onThreadAt(int a, int b, Body body) {
  std::thread t([&] {
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(a, &only);
    ASSERT_EQ(sched_setaffinity(0, sizeof(only), &only), 0);
    cpu_set_t pair = only;
    CPU_SET(b, &pair);
    ASSERT_EQ(sched_setaffinity(0, sizeof(pair), &pair), 0);
    body();
  });
  t.join();
}

// Two CPUs this process may use, or {-1, -1}.
std::pair<int, int> twoCpus() {
  cpu_set_t mask = currentMask();
  int found[2] = {-1, -1};
  int n = 0;
  for (int c = 0; c < CPU_SETSIZE && n < 2; ++c)
    if (CPU_ISSET(c, &mask)) found[n++] = c;
  return {found[0], found[1]};
}

TEST(CoreShare, MoveLeavesTheCpuAndKeepsTheMask) {
  auto [a, b] = twoCpus();
  if (b < 0) GTEST_SKIP() << "one CPU allowed";
  onThreadAt(a, b, [&, a = a, b = b] {
    const int before = CoreShare::moves();
    ASSERT_TRUE(CoreShare::moveOffCurrentCpu());
    EXPECT_EQ(sched_getcpu(), b);  // the only other CPU of the mask
    cpu_set_t mask = currentMask();
    EXPECT_EQ(CPU_COUNT(&mask), 2);
    EXPECT_TRUE(CPU_ISSET(a, &mask));
    EXPECT_TRUE(CPU_ISSET(b, &mask));
    EXPECT_EQ(CoreShare::moves(), before + 1);
  });
}

TEST(CoreShare, APinnedThreadStaysPut) {
  std::thread t([] {
    const int cpu = sched_getcpu();
    cpu_set_t only;
    CPU_ZERO(&only);
    CPU_SET(cpu, &only);
    ASSERT_EQ(sched_setaffinity(0, sizeof(only), &only), 0);
    EXPECT_FALSE(CoreShare::moveOffCurrentCpu());
    EXPECT_EQ(sched_getcpu(), cpu);
    cpu_set_t mask = currentMask();
    EXPECT_EQ(CPU_COUNT(&mask), 1);
  });
  t.join();
}

// A streak of `n` quick yield waits; whether the last completed it.
bool streak(int n) {
  bool complete = false;
  for (int i = 0; i < n; ++i) complete = CoreShare::noteYieldWait(1 + i % CoreShare::kMaxYields, 5000);
  return complete;
}

TEST(CoreShare, AStreakOfQuickYieldWaitsMovesTheFirstChoice) {
  auto [a, b] = twoCpus();
  if (b < 0) GTEST_SKIP() << "one CPU allowed";
  onThreadAt(a, b, [] {
    CoreShare::resetForTest();
    const int before = CoreShare::moves();
    EXPECT_FALSE(streak(CoreShare::kStreak - 1));  // one short
    EXPECT_TRUE(streak(1));
    CoreShare::streakComplete(true);
    EXPECT_EQ(CoreShare::moves(), before + 1);
    // Right after an attempt, another streak waits out the gap.
    EXPECT_TRUE(streak(CoreShare::kStreak));
    CoreShare::streakComplete(true);
    EXPECT_EQ(CoreShare::moves(), before + 1);
  });
}

TEST(CoreShare, TheOtherEndMovesOnlyWhenStreaksGoOn) {
  auto [a, b] = twoCpus();
  if (b < 0) GTEST_SKIP() << "one CPU allowed";
  onThreadAt(a, b, [] {
    CoreShare::resetForTest();
    const int before = CoreShare::moves();
    // Attempts spaced by the gap: the first kDeferredStreaks - 1 pass.
    int64_t waited = 0;
    for (int i = 1; i <= CoreShare::kDeferredStreaks; ++i) {
      ASSERT_TRUE(streak(CoreShare::kStreak));
      CoreShare::streakComplete(false);
      EXPECT_EQ(CoreShare::moves(), before + (i == CoreShare::kDeferredStreaks ? 1 : 0)) << "streak " << i;
      // Out of the gap (it doubles while attempts come back to back).
      const int64_t gap = CoreShare::kMinGapNs << (i - 1);
      std::this_thread::sleep_for(std::chrono::nanoseconds(gap + 2000000));
      waited += gap;
    }
    EXPECT_LT(waited, 1000000000);
  });
}

TEST(CoreShare, OtherWaitsBreakTheStreak) {
  auto [a, b] = twoCpus();
  if (b < 0) GTEST_SKIP() << "one CPU allowed";
  onThreadAt(a, b, [] {
    CoreShare::resetForTest();
    for (int round = 0; round < 4; ++round) {
      EXPECT_FALSE(streak(CoreShare::kStreak - 1));
      switch (round) {
        case 0: CoreShare::noteSpinWait(); break;                                      // satisfied while spinning
        case 1: CoreShare::noteYieldWait(CoreShare::kMaxYields + 1, 5000); break;      // many yields: a late peer
        case 2: CoreShare::noteYieldWait(1, CoreShare::kMaxYieldNs + 1); break;        // a time slice elsewhere
        default: CoreShare::noteYieldWait(0, 0); break;                                // no yield at all
      }
    }
    EXPECT_FALSE(streak(CoreShare::kStreak - 1));  // counting again from zero
    EXPECT_TRUE(streak(1));
  });
}

}  // namespace
}  // namespace weft
