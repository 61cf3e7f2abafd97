// The cuda team's wait logic (cuda_coop.cuh) run in its host pass: one
// thread, a host clock instead of %globaltimer, the same source otherwise.
// Needs nvcc, not a GPU (label unit): abort, the announcement of a long
// wait and its clearing, and the timeout record that raises the abort flag.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>

#include "device/backend/cuda/cuda_coop.cuh"

namespace weft::device {
namespace {

using Clock = std::chrono::steady_clock;

struct Fixture {
  uint32_t abortFlag = 0;
  int scratch[2] = {0, 0};
  WaitReport report;
  Fixture() { std::memset(&report, 0, sizeof(report)); }
  uint64_t word() const { return __atomic_load_n(&report.word, __ATOMIC_ACQUIRE); }
};

const auto kSite = [] { return WaitSite{3, 1, 2}; };

TEST(CudaCoopWait, ReadyWaitWritesNothing) {
  Fixture f;
  CudaCoop coop(&f.abortFlag, f.scratch, &f.report, 1000000);
  EXPECT_TRUE(coop.waitUntil([] { return true; }, kSite));
  EXPECT_FALSE(coop.failed());
  EXPECT_EQ(f.word(), 0u);
  EXPECT_EQ(f.abortFlag, 0u);
}

TEST(CudaCoopWait, AbortFlagStopsTheWaitAndEveryLaterOne) {
  Fixture f;
  f.abortFlag = 1;
  CudaCoop coop(&f.abortFlag, f.scratch, &f.report, 0);
  EXPECT_FALSE(coop.waitUntil([] { return false; }, kSite));
  EXPECT_TRUE(coop.failed());
  EXPECT_FALSE(coop.waitUntil([] { return true; }, kSite)) << "a failed team does not wait again";
  EXPECT_NE(waitWordState(f.word()), WaitState::kFailed) << "an abort is not recorded as the block's failure";
}

TEST(CudaCoopWait, LongWaitIsAnnouncedWithItsSiteAndClearedWhenItEnds) {
  Fixture f;
  std::atomic<bool> go{false};
  WaitSite seen{-1, 0, -1};
  // The watcher plays the host: it lets the wait end only once it has seen
  // the announcement, so the test cannot pass without one.
  std::thread watcher([&] {
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (waitWordState(f.word()) != WaitState::kWaiting && Clock::now() < deadline) std::this_thread::yield();
    seen = waitWordSite(f.word());
    go = true;
  });
  CudaCoop coop(&f.abortFlag, f.scratch, &f.report, 0);
  const auto start = Clock::now();
  EXPECT_TRUE(coop.waitUntil([&] { return go.load(); }, kSite));
  watcher.join();
  EXPECT_GE(Clock::now() - start, std::chrono::nanoseconds(kWaitAnnounceNs)) << "announced too early";
  EXPECT_EQ(seen.peer, 3);
  EXPECT_EQ(seen.isSend, 1);
  EXPECT_EQ(seen.channel, 2);
  EXPECT_EQ(waitWordState(f.word()), WaitState::kIdle) << "the announcement outlived the wait";
  EXPECT_EQ(f.abortFlag, 0u);
}

TEST(CudaCoopWait, TimeoutRecordsTheFailureThenRaisesTheAbortFlag) {
  Fixture f;
  const int64_t timeoutNs = 20000000;  // 20 ms
  CudaCoop coop(&f.abortFlag, f.scratch, &f.report, timeoutNs);
  const auto start = Clock::now();
  EXPECT_FALSE(coop.waitUntil([] { return false; }, kSite));
  const auto took = Clock::now() - start;
  EXPECT_TRUE(coop.failed());
  EXPECT_GE(took, std::chrono::nanoseconds(timeoutNs));
  EXPECT_LT(took, std::chrono::seconds(10)) << "the timeout did not bound the wait";
  EXPECT_EQ(waitWordState(f.word()), WaitState::kFailed);
  EXPECT_EQ(static_cast<WaitFailure>(f.report.kind), WaitFailure::kTimeout);
  EXPECT_GT(f.report.waitedNs, timeoutNs);
  const WaitSite site = waitWordSite(f.word());
  EXPECT_EQ(site.peer, 3);
  EXPECT_EQ(site.channel, 2);
  EXPECT_EQ(f.abortFlag, 1u) << "the other blocks must be told to stop";
}

TEST(CudaCoopWait, NoReportNoTimeoutStillHonoursAbort) {
  Fixture f;
  CudaCoop coop(&f.abortFlag, f.scratch);  // what kernel-level tests construct
  std::thread aborter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    __atomic_store_n(&f.abortFlag, 1u, __ATOMIC_RELEASE);
  });
  EXPECT_FALSE(coop.waitUntil([] { return false; }, kSite));
  aborter.join();
}

}  // namespace
}  // namespace weft::device
