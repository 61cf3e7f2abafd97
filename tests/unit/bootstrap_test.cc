// The bootstrap under strangers, missing ranks, dead ranks and failure
// notices: white-box tests of core/bootstrap.h and the root, with ranks as
// threads of this process.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "core/bootstrap.h"
#include "core/unique_id.h"

namespace weft::core {
namespace {

using Clock = std::chrono::steady_clock;

double secondsSince(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

struct EnvGuard {
  EnvGuard(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~EnvGuard() { unsetenv(name_); }
  const char* name_;
};

// Connections that are not peers: idle ones, garbage, and a hello-sized
// message with the wrong secret. Kept open until the object goes.
struct Strangers {
  explicit Strangers(const SocketAddress& at, int idle = 30, int garbage = 10) {
    for (int i = 0; i < idle; ++i) add(at);
    for (int i = 0; i < garbage; ++i) {
      Socket* s = add(at);
      std::vector<char> junk(static_cast<size_t>(7 + i * 13), static_cast<char>(0x5a + i));
      if (s != nullptr) (void)s->sendAll(junk.data(), junk.size(), Deadline::afterSec(1));
    }
  }
  Socket* add(const SocketAddress& at) {
    Result<Socket> s = Socket::connect(at, Deadline::afterSec(2));
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok()) return nullptr;
    sockets.push_back(std::move(s).value());
    return &sockets.back();
  }
  std::vector<Socket> sockets;
};

// Joins `nranks` ranks (threads) to the id; slot r stays empty for ranks in `absent`.
std::vector<Result<std::unique_ptr<Bootstrap>>> joinAll(const UniqueIdContents& id, int nranks,
                                                        const std::vector<int>& absent = {}) {
  std::vector<Result<std::unique_ptr<Bootstrap>>> out;
  for (int r = 0; r < nranks; ++r) out.emplace_back(Status(ncclInternalError, "absent"));
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) {
    if (std::find(absent.begin(), absent.end(), r) != absent.end()) continue;
    threads.emplace_back([&, r] { out[static_cast<size_t>(r)] = Bootstrap::join(id, r, nranks, nullptr); });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

TEST(Bootstrap, StrangersAtTheRootAndAtEveryListenerCostNothing) {
  Result<UniqueIdContents> id = createUniqueId();
  ASSERT_TRUE(id.ok()) << id.status().message();
  // Before the ranks arrive: each idle connection used to hold the root for 10 s.
  Strangers atRoot(id.value().root);
  wire::Hello wrongSecret{wire::kHelloMagic, id.value().secret ^ 1, 0, 3, {}};
  Socket* impostor = atRoot.add(id.value().root);
  ASSERT_NE(impostor, nullptr);
  ASSERT_TRUE(impostor->sendAll(&wrongSecret, sizeof(wrongSecret), Deadline::afterSec(1)).ok());
  const auto t0 = Clock::now();
  auto ranks = joinAll(id.value(), 3);
  EXPECT_LT(secondsSince(t0), 3.0) << "strangers delayed the root";
  for (auto& r : ranks) ASSERT_TRUE(r.ok()) << r.status().message();

  // Strangers at every rank's listener, then real traffic.
  std::vector<std::unique_ptr<Strangers>> atRanks;
  for (auto& r : ranks) atRanks.push_back(std::make_unique<Strangers>(r.value()->address()));
  const auto t1 = Clock::now();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int r = 0; r < 3; ++r)
    threads.emplace_back([&, r] {
      Bootstrap& b = *ranks[static_cast<size_t>(r)].value();
      int values[3] = {0, 0, 0};
      values[r] = 10 + r;
      if (!b.allGather(values, sizeof(int)).ok() || values[0] + values[1] + values[2] != 33) return;
      const int next = (r + 1) % 3, prev = (r + 2) % 3;
      int out = 100 + r, in = -1;
      if (b.send(next, 7, &out, sizeof(out)).ok() && b.recv(prev, 7, &in, sizeof(in)).ok() && in == 100 + prev) ++ok;
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok.load(), 3);
  EXPECT_LT(secondsSince(t1), 3.0) << "strangers delayed the ranks' listeners";
}

TEST(Bootstrap, MissingRanksAreNamedWhenTheTimeoutExpires) {
  EnvGuard timeout("WEFT_BOOTSTRAP_TIMEOUT", "2");
  Result<UniqueIdContents> id = createUniqueId();
  ASSERT_TRUE(id.ok());
  Strangers atRoot(id.value().root, 3, 0);
  const auto t0 = Clock::now();
  auto ranks = joinAll(id.value(), 4, {1, 3});
  EXPECT_LT(secondsSince(t0), 10.0);
  for (int r : {0, 2}) {
    ASSERT_FALSE(ranks[static_cast<size_t>(r)].ok());
    const std::string msg = ranks[static_cast<size_t>(r)].status().message();
    EXPECT_NE(msg.find("missing ranks: 1, 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("only 2 of 4 ranks"), std::string::npos) << msg;
  }
}

TEST(Bootstrap, FailureNoticesReachEveryRankNamingTheOrigin) {
  Result<UniqueIdContents> id = createUniqueId();
  ASSERT_TRUE(id.ok());
  auto ranks = joinAll(id.value(), 4);
  for (auto& r : ranks) ASSERT_TRUE(r.ok()) << r.status().message();
  std::atomic<int> handled{0};
  for (auto& r : ranks)
    r.value()->setNoticeHandler([&](const BootstrapMailbox::Notice& n) {
      if (n.origin == 3 && n.reporter == 1) ++handled;
    });
  const auto t0 = Clock::now();
  ranks[1].value()->notifyFailure(3, "rank 3 stopped answering (test)");
  while (handled.load() < 3 && secondsSince(t0) < 5.0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(handled.load(), 3) << "every other rank, the origin included, runs its handler once";
  EXPECT_LT(secondsSince(t0), 2.0);
  for (int r : {0, 2, 3}) {
    Bootstrap& b = *ranks[static_cast<size_t>(r)].value();
    ASSERT_TRUE(b.noticed());
    const std::string msg = b.noticeStatus().message();
    EXPECT_NE(msg.find("rank 3 failed (reported by rank 1)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("stopped answering"), std::string::npos) << msg;
    // A bootstrap wait now fails at once with the notice.
    int value = 0;
    const auto t1 = Clock::now();
    const Status got = b.recv((r + 1) % 4, 9, &value, sizeof(value));
    EXPECT_FALSE(got.ok());
    EXPECT_LT(secondsSince(t1), 1.0);
  }
  EXPECT_FALSE(ranks[1].value()->noticed()) << "the reporter does not notify itself";
  for (auto& r : ranks) r.value()->setNoticeHandler(nullptr);
}

TEST(Bootstrap, AWaitOnAGoneRankFailsFastNamingIt) {
  Result<UniqueIdContents> id = createUniqueId();
  ASSERT_TRUE(id.ok());
  auto ranks = joinAll(id.value(), 3);
  for (auto& r : ranks) ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(ranks[0].value()->peerAlive(2));
  ranks[2].value().reset();  // its listener closes, as when its process dies
  EXPECT_FALSE(ranks[0].value()->peerAlive(2));
  int value = 0;
  const auto t0 = Clock::now();
  const Status got = ranks[0].value()->recv(2, 5, &value, sizeof(value));
  ASSERT_FALSE(got.ok());
  EXPECT_LT(secondsSince(t0), 3.0) << "found by the once-a-second probe, not the bootstrap timeout";
  EXPECT_NE(got.message().find("rank 2"), std::string::npos) << got.message();
  EXPECT_NE(got.message().find("is gone"), std::string::npos) << got.message();
  EXPECT_EQ(ranks[0].value()->suspect(), 2);
  const Status sent = ranks[1].value()->send(2, 5, &value, sizeof(value));
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.message().find("rank 2"), std::string::npos) << sent.message();
}

TEST(Bootstrap, AbortEndsAWaitForTheRoot) {
  Result<UniqueIdContents> id = createUniqueId();
  ASSERT_TRUE(id.ok());
  std::atomic<uint32_t> abortFlag{0};
  Status joined;
  std::thread rank([&] { joined = Bootstrap::join(id.value(), 0, 2, &abortFlag).status(); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 1 never comes: the root waits
  const auto t0 = Clock::now();
  abortFlag.store(1);
  rank.join();
  EXPECT_LT(secondsSince(t0), 1.0);
  EXPECT_FALSE(joined.ok());
  EXPECT_NE(joined.message().find("ncclCommAbort"), std::string::npos) << joined.message();
}

}  // namespace
}  // namespace weft::core
