// What the host reads of the cuda kernels' wait reports (core/cuda_watch.h,
// device/wait_report.h), driven with report arrays written the way a block
// writes them, so it runs without a GPU.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "core/comm.h"
#include "core/cuda_watch.h"
#include "core/failure.h"

namespace weft::core {
namespace {

using device::WaitFailure;
using device::WaitFailureInfo;
using device::WaitReport;
using device::WaitSite;
using device::WaitState;

TEST(WaitReportWord, PacksStateAndSiteIntoOneWord) {
  for (const WaitSite site : {WaitSite{0, 0, 0}, WaitSite{5, 1, 31}, WaitSite{-1, 0, -1}, WaitSite{65535, 1, 7}}) {
    for (WaitState state : {WaitState::kIdle, WaitState::kWaiting, WaitState::kFailed}) {
      const uint64_t word = device::packWaitWord(state, site);
      EXPECT_EQ(device::waitWordState(word), state);
      const WaitSite back = device::waitWordSite(word);
      EXPECT_EQ(back.peer, site.peer);
      EXPECT_EQ(back.isSend, site.isSend);
      EXPECT_EQ(back.channel, site.channel);
    }
  }
  // Idle is the zeroed memory the host starts the reports from.
  EXPECT_EQ(device::waitWordState(0), WaitState::kIdle);
}

std::vector<WaitReport> idleReports() {
  std::vector<WaitReport> reports(4);
  std::memset(reports.data(), 0, reports.size() * sizeof(WaitReport));
  return reports;
}

TEST(RecordedWaitFailure, FindsTheBlockThatFailedAndNothingElse) {
  std::vector<WaitReport> reports = idleReports();
  reports[1].word = device::packWaitWord(WaitState::kWaiting, WaitSite{2, 0, 1});
  WaitFailureInfo info;
  EXPECT_FALSE(recordedWaitFailure(reports.data(), 4, &info)) << "an announced wait is not a failure";
  reports[3].waitedNs = 7000000000;
  reports[3].kind = static_cast<uint32_t>(WaitFailure::kTimeout);
  reports[3].word = device::packWaitWord(WaitState::kFailed, WaitSite{1, 1, 3});
  ASSERT_TRUE(recordedWaitFailure(reports.data(), 4, &info));
  EXPECT_EQ(info.kind, WaitFailure::kTimeout);
  EXPECT_EQ(info.site.peer, 1);
  EXPECT_EQ(info.site.isSend, 1);
  EXPECT_EQ(info.site.channel, 3);
  EXPECT_EQ(info.waitedNs, 7000000000);
  EXPECT_FALSE(recordedWaitFailure(reports.data(), 3, &info)) << "only the first n reports are read";
}

// A pid that existed and is gone: a child that exited and was reaped.
pid_t exitedPid() {
  const pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);
  return child;
}

bool processExists(pid_t pid) { return kill(pid, 0) == 0; }

TEST(WaitOnExitedPeer, NamesAnAnnouncedWaitOnAGoneLocalProcess) {
  const pid_t gone = exitedPid();
  // rank 0: us (alive), rank 1: gone, rank 2: another machine (no pid to watch).
  const pid_t pids[3] = {getpid(), gone, 0};
  std::vector<WaitReport> reports = idleReports();
  WaitFailureInfo info;
  EXPECT_FALSE(waitOnExitedPeer(reports.data(), 4, pids, 3, processExists, &info)) << "no wait announced";
  reports[0].word = device::packWaitWord(WaitState::kWaiting, WaitSite{0, 0, 0});
  reports[1].word = device::packWaitWord(WaitState::kWaiting, WaitSite{2, 1, 1});
  reports[2].word = device::packWaitWord(WaitState::kWaiting, WaitSite{7, 0, 2});  // not a rank: ignored
  EXPECT_FALSE(waitOnExitedPeer(reports.data(), 4, pids, 3, processExists, &info))
      << "waits on live or remote ranks are not failures";
  EXPECT_FALSE(waitOnExitedPeer(reports.data(), 4, nullptr, 3, processExists, &info));
  reports[3].word = device::packWaitWord(WaitState::kWaiting, WaitSite{1, 1, 5});
  ASSERT_TRUE(waitOnExitedPeer(reports.data(), 4, pids, 3, processExists, &info));
  EXPECT_EQ(info.kind, WaitFailure::kPeerExited);
  EXPECT_EQ(info.site.peer, 1);
  EXPECT_EQ(info.site.isSend, 1);
  EXPECT_EQ(info.site.channel, 5);
  // The same wait, over: nothing to report.
  reports[3].word = device::packWaitWord(WaitState::kIdle, WaitSite{-1, 0, -1});
  EXPECT_FALSE(waitOnExitedPeer(reports.data(), 4, pids, 3, processExists, &info));
}

TEST(DescribeWaitFailure, KernelWaitsNameThePeerWithoutAnInventedDuration) {
  Comm comm;
  comm.rank = 0;
  comm.nranks = 2;
  comm.waitConfig.timeoutNs = 2000000000;  // WEFT_TIMEOUT=2 at init
  comm.peers.resize(2);
  for (int r = 0; r < 2; ++r) {
    comm.peers[static_cast<size_t>(r)].rank = r;
    comm.peers[static_cast<size_t>(r)].pid = 4000 + r;
    std::snprintf(comm.peers[static_cast<size_t>(r)].hostname, sizeof(comm.peers[0].hostname), "node%d", r);
  }
  WaitFailureInfo exited;
  exited.kind = WaitFailure::kPeerExited;
  exited.site = WaitSite{1, 0, 2};
  Status s = describeWaitFailure(comm, exited);
  EXPECT_EQ(s.code(), ncclRemoteError);
  EXPECT_NE(s.message().find("rank 1 (pid 4001 on host node1) exited"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("channel 2"), std::string::npos) << s.message();
  EXPECT_EQ(s.message().find("0.0 s"), std::string::npos) << s.message();
  WaitFailureInfo timedOut;
  timedOut.kind = WaitFailure::kTimeout;
  timedOut.site = WaitSite{1, 1, 0};
  timedOut.waitedNs = 3000000000;
  s = describeWaitFailure(comm, timedOut);
  EXPECT_EQ(s.code(), ncclRemoteError);
  EXPECT_NE(s.message().find("waited 3 s on channel 0 for rank 1"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("WEFT_TIMEOUT=2)"), std::string::npos) << "the comm's own timeout: " << s.message();
}

}  // namespace
}  // namespace weft::core
