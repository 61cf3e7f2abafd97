// WEFT_DIRECT's three settings. The rule per backend (directAllowedFor):
// unset means the host backend only, the cuda backend's direct mode waiting
// for WEFT_DIRECT=1 until it has been measured on a GPU. And on the host
// backend (ranks as threads): unset and 1, a large ring AllReduce runs in
// direct mode (read from the FIFO ends' direct-call counters afterwards,
// not assumed from the result); 0, never.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <thread>
#include <vector>

#include "core/channels.h"
#include "core/comm.h"
#include "nccl.h"
#include "scoped_env.h"

namespace weft::core {
namespace {

using Env = weft::testing::ScopedEnv;

// Runs one 1 MiB AllReduce on 2 thread ranks; returns the direct calls
// counted on rank 0's ring links and checks the sums.
uint64_t directCallsOfOneAllReduce() {
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1 << 18;
  ncclComm_t comms[kRanks];
  EXPECT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      std::vector<float> in(kCount, static_cast<float>(r + 1)), out(kCount, 0.0f);
      ASSERT_EQ(ncclAllReduce(in.data(), out.data(), kCount, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
      for (size_t i = 0; i < kCount; i += 997) ASSERT_EQ(out[i], 3.0f) << i;
    });
  for (auto& t : threads) t.join();
  uint64_t calls = 0;
  for (const Channel& channel : asComm(comms[0])->channels)
    for (const auto* side : {&channel.send, &channel.recv})
      for (const auto& conn : *side)
        if (conn) calls += conn->end.directCalls;
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  return calls;
}

TEST(DirectDefault, UnsetMeansTheHostBackendOnly) {
  EXPECT_TRUE(directAllowedFor(-1, weftBackendHost));
  EXPECT_FALSE(directAllowedFor(-1, weftBackendCuda));
  EXPECT_TRUE(directAllowedFor(1, weftBackendHost));
  EXPECT_TRUE(directAllowedFor(1, weftBackendCuda));
  EXPECT_FALSE(directAllowedFor(0, weftBackendHost));
  EXPECT_FALSE(directAllowedFor(0, weftBackendCuda));
}

TEST(DirectDefault, HostRunsDirectUnlessTurnedOff) {
  Env backend("WEFT_BACKEND", "host");
  Env algo("NCCL_ALGO", "Ring");
  {
    Env unset("WEFT_DIRECT", nullptr);
    EXPECT_GT(directCallsOfOneAllReduce(), 0u) << "WEFT_DIRECT unset";
  }
  {
    Env on("WEFT_DIRECT", "1");
    EXPECT_GT(directCallsOfOneAllReduce(), 0u) << "WEFT_DIRECT=1";
  }
  {
    Env off("WEFT_DIRECT", "0");
    EXPECT_EQ(directCallsOfOneAllReduce(), 0u) << "WEFT_DIRECT=0";
  }
}

}  // namespace
}  // namespace weft::core
