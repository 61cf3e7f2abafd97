// The cuda team's wait logic (cuda_coop.cuh) run in its host pass: one
// thread, a host clock instead of %globaltimer, the same source otherwise.
// Needs nvcc, not a GPU (label unit): abort, the announcement of a long
// wait and its clearing, the timeout record that raises the abort flag, and
// records (a mismatch, a timeout) that the end of a wait must not erase.
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

// A step from another call found after the wait was announced (the usual
// case: the mismatched peer is late). The mismatch record must survive the
// end of the wait, or the host sees the abort flag with no failure and
// reports success.
TEST(CudaCoopWait, MismatchAfterAnAnnouncedWaitKeepsItsRecord) {
  Fixture f;
  CudaCoop coop(&f.abortFlag, f.scratch, &f.report, 0);
  const CallSignature ours{packCallWord({0, 7, 0, 0, -1, 5}), 100};
  const CallSignature theirs{packCallWord({1, 7, 0, 0, -1, 5}), 100};
  coop.setCallSignature(ours);
  // The peer's step turns up once the wait is announced. The wait's clock
  // starts at its first check, not at `start`: a deadline from `start`
  // alone would race it on a loaded machine.
  const auto giveUp = Clock::now() + std::chrono::seconds(20);
  bool announced = false;
  EXPECT_FALSE(coop.waitUntil(
      [&] {
        announced = waitWordState(f.word()) == WaitState::kWaiting;
        if (!announced && Clock::now() < giveUp) return false;
        coop.recordMismatch(WaitSite{1, 0, 0}, theirs);
        return true;
      },
      kSite));
  EXPECT_TRUE(announced) << "the wait was not announced before the mismatch: the test proves nothing";
  EXPECT_TRUE(coop.failed());
  EXPECT_EQ(waitWordState(f.word()), WaitState::kFailed) << "the end of the wait erased the mismatch";
  EXPECT_EQ(static_cast<WaitFailure>(f.report.kind), WaitFailure::kMismatch);
  EXPECT_EQ(waitWordSite(f.word()).peer, 1);
  EXPECT_EQ(f.report.theirs[0], theirs.word);
  EXPECT_EQ(f.abortFlag, 1u);
}

// Several threads announce their own waits in one word (waitEach: LL). One
// thread's wait ending must not take the announcement back while others may
// still wait: agree(), after every thread's waits, does.
TEST(CudaCoopWait, EachThreadsAnnouncementIsTakenBackByAgreeNotByTheWait) {
  Fixture f;
  CudaCoop coop(&f.abortFlag, f.scratch, &f.report, 0);
  // Ends once its announcement is out (or after 20 s, and the checks below
  // fail): a fixed delay would race the wait's clock, which starts late.
  const auto giveUp = Clock::now() + std::chrono::seconds(20);
  EXPECT_TRUE(
      coop.waitEach([&] { return waitWordState(f.word()) == WaitState::kWaiting || Clock::now() >= giveUp; }, kSite));
  EXPECT_EQ(waitWordState(f.word()), WaitState::kWaiting) << "one thread's end of wait cleared the block's word";
  EXPECT_EQ(waitWordSite(f.word()).peer, 3);
  EXPECT_TRUE(coop.agree(true));
  EXPECT_EQ(waitWordState(f.word()), WaitState::kIdle) << "agree() did not take the announcement back";
  EXPECT_EQ(f.abortFlag, 0u);
}

// A failed slice keeps whatever the word says (a timeout's record, here).
TEST(CudaCoopWait, AgreeNeverClearsAFailure) {
  Fixture f;
  CudaCoop coop(&f.abortFlag, f.scratch, &f.report, 20000000);  // 20 ms
  EXPECT_FALSE(coop.waitEach([] { return false; }, kSite));
  EXPECT_EQ(waitWordState(f.word()), WaitState::kFailed);
  EXPECT_FALSE(coop.agree(false));
  EXPECT_EQ(waitWordState(f.word()), WaitState::kFailed) << "agree() erased the timeout's record";
  EXPECT_EQ(static_cast<WaitFailure>(f.report.kind), WaitFailure::kTimeout);
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
