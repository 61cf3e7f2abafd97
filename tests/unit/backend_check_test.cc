// The init check of who may share what (core/init.cc, checkBackends): one
// backend for every rank, and processes sharing a GPU only under MPS or
// with WEFT_SHARE_GPU_WITHOUT_MPS=1 (time slices).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/comm.h"
#include "core/init.h"
#include "device/backend/cuda/runtime.h"

namespace weft::core {
namespace {

// Two cuda ranks on one host; processes 10 and 11 unless sameProcess.
void fillPeers(Comm* comm, bool sameProcess, const char* busId1) {
  comm->rank = 0;
  comm->nranks = 2;
  comm->cudaDev = 0;
  comm->backend = weftBackendCuda;
  comm->peers.assign(2, PeerInfo{});
  for (int r = 0; r < 2; ++r) {
    PeerInfo& p = comm->peers[static_cast<size_t>(r)];
    p.rank = r;
    p.backend = weftBackendCuda;
    p.pid = 100 + r;
    p.hostHash = 7;
    p.processHash = sameProcess ? 10 : static_cast<uint64_t>(10 + r);
    std::snprintf(p.hostname, sizeof(p.hostname), "node");
    std::snprintf(p.busId, sizeof(p.busId), "%s", r == 0 ? "0000:01:00.0" : busId1);
  }
}

class BackendCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::mpsEnabled(0)) GTEST_SKIP() << "GPU 0 runs under MPS here: sharing it is allowed anyway";
    unsetenv("WEFT_SHARE_GPU_WITHOUT_MPS");
  }
  void TearDown() override { unsetenv("WEFT_SHARE_GPU_WITHOUT_MPS"); }
};

TEST_F(BackendCheck, ProcessesSharingAGpuWithoutMpsAreRefusedNamingBothAndTheWayOut) {
  Comm comm;
  fillPeers(&comm, false, "0000:01:00.0");
  const Status refused = checkBackends(comm);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), ncclInvalidUsage);
  const std::string why = refused.message();
  EXPECT_NE(why.find("rank 0 (pid 100) and rank 1 (pid 101) use GPU 0000:01:00.0 from different processes"),
            std::string::npos)
      << why;
  EXPECT_NE(why.find("nvidia-cuda-mps-control -d"), std::string::npos) << why;
  EXPECT_NE(why.find("WEFT_SHARE_GPU_WITHOUT_MPS=1"), std::string::npos) << why;
}

TEST_F(BackendCheck, TheSettingLetsProcessesTakeTurns) {
  Comm comm;
  fillPeers(&comm, false, "0000:01:00.0");
  setenv("WEFT_SHARE_GPU_WITHOUT_MPS", "1", 1);
  const Status allowed = checkBackends(comm);
  EXPECT_TRUE(allowed.ok()) << allowed.message();
  setenv("WEFT_SHARE_GPU_WITHOUT_MPS", "0", 1);
  EXPECT_FALSE(checkBackends(comm).ok());
}

TEST_F(BackendCheck, ThreadsOfOneProcessAndProcessesOnTwoGpusNeedNothing) {
  Comm threads;
  fillPeers(&threads, true, "0000:01:00.0");
  EXPECT_TRUE(checkBackends(threads).ok());
  Comm twoGpus;
  fillPeers(&twoGpus, false, "0000:02:00.0");
  EXPECT_TRUE(checkBackends(twoGpus).ok());
}

TEST_F(BackendCheck, RanksOnDifferentBackendsAreRefusedNamingTheSetting) {
  Comm comm;
  fillPeers(&comm, false, "0000:02:00.0");
  comm.peers[1].backend = weftBackendHost;
  const Status refused = checkBackends(comm);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.code(), ncclInvalidUsage);
  EXPECT_NE(refused.message().find("rank 0 runs the cuda backend but rank 1 (host node) the host backend"),
            std::string::npos)
      << refused.message();
}

}  // namespace
}  // namespace weft::core
