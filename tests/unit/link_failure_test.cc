// A link that fails at run time while both its ranks live (the test hook
// injectLinkFailure raises what the proxy raises when a network call on the
// link fails): the failing call and the next name the link and the way out
// (WEFT_BROKEN_LINKS); the other ranks fail too instead of waiting; a
// communicator created again with that link broken runs correct AllReduces
// and sends nothing over the link.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "core/failure.h"
#include "nccl.h"

namespace weft::core {
namespace {

class Env {
 public:
  Env(const char* name, const char* value) : name_(name) {
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }
  ~Env() { unsetenv(name_); }

 private:
  const char* name_;
};

constexpr int kRanks = 4;
constexpr size_t kCount = 10000;

// Runs AllReduces (int sums, checked) until one fails or `calls` pass;
// returns the failing call's result.
ncclResult_t allReduceUntilFailure(ncclComm_t comm, int rank, int calls) {
  std::vector<int32_t> in(kCount), out(kCount);
  for (size_t i = 0; i < kCount; ++i) in[i] = static_cast<int32_t>(i % 100) * (rank + 1);
  for (int c = 0; c < calls; ++c) {
    const ncclResult_t rc = ncclAllReduce(in.data(), out.data(), kCount, ncclInt32, ncclSum, comm, nullptr);
    if (rc != ncclSuccess) return rc;
    for (size_t i = 0; i < kCount; i += 37)
      if (out[i] != static_cast<int32_t>(i % 100) * (kRanks * (kRanks + 1) / 2)) return ncclInternalError;
  }
  return ncclSuccess;
}

std::vector<ncclComm_t> initComms() {
  ncclUniqueId id;
  EXPECT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<ncclComm_t> comms(kRanks, nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back(
        [&, r] { EXPECT_EQ(ncclCommInitRank(&comms[static_cast<size_t>(r)], kRanks, id, r), ncclSuccess); });
  for (auto& t : threads) t.join();
  return comms;
}

TEST(LinkFailure, TheErrorNamesTheLinkAndACommWithoutItWorks) {
  Env backend("WEFT_BACKEND", "host");
  Env buff("NCCL_BUFFSIZE", "65536");
  Env algo("NCCL_ALGO", "Ring");
  Env broken("WEFT_BROKEN_LINKS", nullptr);
  std::vector<ncclComm_t> comms = initComms();
  ASSERT_EQ(comms.size(), static_cast<size_t>(kRanks));
  std::vector<std::string> errors(kRanks);
  std::vector<ncclResult_t> results(kRanks, ncclSuccess);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back([&, r] {
      ncclComm_t comm = comms[static_cast<size_t>(r)];
      ASSERT_EQ(allReduceUntilFailure(comm, r, 1), ncclSuccess);
      if (r == 0) injectLinkFailure(asComm(comm), 1, "the link's FIFO broke (test)");
      // The injected failure is a flag, not a link that stops: a wait checks
      // it once it stops spinning, which on an idle machine a ring of fast
      // threads may never do in 1000 calls. The others pause, as data on a
      // broken link would: rank 0's next wait outlasts its spin.
      if (r != 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
      results[static_cast<size_t>(r)] = allReduceUntilFailure(comm, r, 1000);
      errors[static_cast<size_t>(r)] = ncclGetLastError(comm);
      if (r == 0) {
        // The next call fails at once with the same message.
        EXPECT_NE(allReduceUntilFailure(comm, r, 1), ncclSuccess);
        EXPECT_EQ(std::string(ncclGetLastError(comm)), errors[0]);
      }
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_NE(results[static_cast<size_t>(r)], ncclSuccess) << "rank " << r << " never failed";
    EXPECT_NE(errors[static_cast<size_t>(r)].find("link 0-1 failed: the link's FIFO broke (test)"), std::string::npos)
        << "rank " << r << ": " << errors[static_cast<size_t>(r)];
  }
  EXPECT_NE(errors[0].find("Rank 1 is alive"), std::string::npos) << errors[0];
  EXPECT_NE(errors[0].find("recreate the communicator with WEFT_BROKEN_LINKS=0-1"), std::string::npos) << errors[0];
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommAbort(comm), ncclSuccess);

  // As the message says: a new communicator with the link broken.
  Env avoid("WEFT_BROKEN_LINKS", "0-1");
  Env any("NCCL_ALGO", nullptr);
  comms = initComms();
  threads.clear();
  for (int r = 0; r < kRanks; ++r)
    threads.emplace_back(
        [&, r] { EXPECT_EQ(allReduceUntilFailure(comms[static_cast<size_t>(r)], r, 20), ncclSuccess); });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    const Comm& comm = *asComm(comms[static_cast<size_t>(r)]);
    EXPECT_TRUE(comm.brokenLinks.has(0, 1));
    for (const Channel& channel : comm.channels) {
      const auto& conn = channel.send[static_cast<size_t>(1 - r)];
      if (conn) {
        EXPECT_EQ(__atomic_load_n(conn->end.tail, __ATOMIC_ACQUIRE), 0u) << "rank " << r << " sent on 0-1";
      }
    }
  }
  for (ncclComm_t comm : comms) EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

}  // namespace
}  // namespace weft::core
