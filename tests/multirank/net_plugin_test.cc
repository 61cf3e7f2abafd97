// External network plugins under the whole library: ranks as threads, each
// its own virtual node (WEFT_RANKS_PER_NODE=1), every link through the
// in-tree test plugin (tests/net_plugins/), whose connect finishes only after
// the peer accepted. Each case runs in a forked child, so the network is
// chosen afresh (Weft chooses it once per process).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

std::string pluginPath(const std::string& variant) {
  return std::string(WEFT_NET_PLUGINS_DIR) + "/libnccl-net-weftloop-" + variant + ".so";
}

struct LoopStats {
  int64_t connects = 0, accepts = 0, bytesReceived = 0;
  int initVersion = 0;
};

// What the plugin counted (the loaded library, found again by its path).
LoopStats loopStats(const std::string& variant) {
  LoopStats s;
  void* handle = dlopen(pluginPath(variant).c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return s;
  using StatsFn = void (*)(int64_t*, int64_t*, int64_t*, int*);
  if (auto fn = reinterpret_cast<StatsFn>(dlsym(handle, "weftLoopStats")))
    fn(&s.connects, &s.accepts, &s.bytesReceived, &s.initVersion);
  dlclose(handle);
  return s;
}

// Runs body in a child process that must exit cleanly within `seconds`.
void inFreshProcess(unsigned seconds, const std::function<void()>& body) {
  std::fflush(nullptr);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    alarm(seconds);  // a hang fails the test (SIGALRM) instead of stalling ctest
    body();
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << (WIFEXITED(status) ? "child failed, exit status " + std::to_string(WEXITSTATUS(status))
                            : "child killed by signal " + std::to_string(WTERMSIG(status)) + " (14: it hung)");
}

std::vector<CollCase> someCollectives(int nranks) {
  return {{CollOp::kAllReduce, ncclFloat32, TestOp::kSum, 300001, 0, false},
          {CollOp::kAllReduce, ncclInt64, TestOp::kMax, 4097, 0, true},
          {CollOp::kBroadcast, ncclInt8, TestOp::kSum, 70001, nranks - 1, false},
          {CollOp::kAllGather, ncclFloat64, TestOp::kSum, 9999, 0, false},
          {CollOp::kReduceScatter, ncclInt32, TestOp::kSum, 20000, 0, true},
          {CollOp::kAlltoAll, ncclUint8, TestOp::kSum, 33333, 0, false}};
}

// nranks virtual nodes over the plugin; every case checked on every rank.
void collectivesOverPlugin(int nranks, const char* algo) {
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
  ScopedEnv algorithm("NCCL_ALGO", algo);
  ScopedEnv buff("NCCL_BUFFSIZE", "131072");  // 16 KiB steps: many messages per call
  runRanks(RankMode::kThreads, nranks, [nranks](RankContext& ctx) {
    for (const CollCase& c : someCollectives(nranks))
      if (!runAndCheck(ctx, c)) return;
  });
}

// Several channels and four ranks each connecting and accepting: a rank that
// finished one link's connect before accepting anything would wait forever
// (every peer does the same). The timeout turns such a hang into a failure
// in seconds.
TEST(NetPlugin, ConnectsWhenConnectWaitsForTheAccept) {
  inFreshProcess(120, [] {
    ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("v8").c_str());
    ScopedEnv net("NCCL_NET", "WeftLoop");
    ScopedEnv channels("NCCL_MIN_NCHANNELS", "4");
    ScopedEnv maxChannels("NCCL_MAX_NCHANNELS", "4");
    ScopedEnv patience("WEFT_BOOTSTRAP_TIMEOUT", "15");
    collectivesOverPlugin(4, "Ring,Tree");
    const LoopStats s = loopStats("v8");
    EXPECT_GE(s.connects, 4 * 4) << "four ranks, four channels, at least one send link each";
    EXPECT_EQ(s.connects, s.accepts);
    EXPECT_GT(s.bytesReceived, 0);
  });
}

// The older handshake: accept blocks until the peer's connect arrives, and
// connect finishes at once. A rank that accepted before issuing its own
// connects would block every peer doing the same (the plugin gives up after
// 10 s, which fails the test).
TEST(NetPlugin, ConnectsWhenAcceptBlocksUntilTheConnect) {
  inFreshProcess(120, [] {
    ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("v6blocking").c_str());
    ScopedEnv net("NCCL_NET", "WeftLoop");
    ScopedEnv channels("NCCL_MIN_NCHANNELS", "2");
    ScopedEnv maxChannels("NCCL_MAX_NCHANNELS", "2");
    collectivesOverPlugin(4, "Ring,Tree");
    const LoopStats s = loopStats("v6blocking");
    EXPECT_GE(s.accepts, 4 * 2);
    EXPECT_GT(s.bytesReceived, 0);
  });
}

// Every interface version carries every collective; the plugin's own init
// of that version ran.
class EveryVersion : public ::testing::TestWithParam<int> {};

TEST_P(EveryVersion, CarriesCollectivesAcrossNodes) {
  const std::string variant = "v" + std::to_string(GetParam());
  inFreshProcess(120, [&] {
    ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath(variant).c_str());
    ScopedEnv channels("NCCL_MAX_NCHANNELS", "2");
    collectivesOverPlugin(3, "Ring");
    const LoopStats s = loopStats(variant);
    EXPECT_EQ(s.initVersion, GetParam());
    EXPECT_GT(s.connects, 0);
    EXPECT_GT(s.bytesReceived, 300001 * 4) << "at least one allreduce's worth crossed the plugin";
  });
}

INSTANTIATE_TEST_SUITE_P(NetPlugin, EveryVersion, ::testing::Range(6, 13),
                         [](const ::testing::TestParamInfo<int>& p) { return "v" + std::to_string(p.param); });

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// A plugin the user asked for that cannot be used: a WARN naming it and why,
// and the built-in socket network carries the traffic.
TEST(NetPlugin, UnusablePluginIsAWarningAndSocketsCarryOn) {
  const std::string log = "/tmp/weft-net-plugin-warn-" + std::to_string(getpid()) + ".log";
  std::remove(log.c_str());
  inFreshProcess(120, [&] {
    ScopedEnv plugin("NCCL_NET_PLUGIN", "weftloop-noinit");  // a bare name: libnccl-net-weftloop-noinit.so
    ScopedEnv debug("NCCL_DEBUG", "WARN");
    ScopedEnv file("NCCL_DEBUG_FILE", log.c_str());
    ScopedEnv ifname("NCCL_SOCKET_IFNAME", "=lo");
    collectivesOverPlugin(2, "Ring");
    EXPECT_EQ(loopStats("noinit").connects, 0);
  });
  const std::string text = readFile(log);
  EXPECT_TRUE(text.find("NCCL_NET_PLUGIN=weftloop-noinit") != std::string::npos) << text;
  EXPECT_TRUE(text.find("its init returned ncclSystemError; not using it") != std::string::npos) << text;
  std::remove(log.c_str());
}

// NCCL_NET naming the plugin's network makes the same failure an error.
TEST(NetPlugin, UnusablePluginNamedByNcclNetIsAnError) {
  inFreshProcess(120, [] {
    ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("nodev").c_str());
    ScopedEnv net("NCCL_NET", "WeftLoop");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
    ScopedEnv patience("WEFT_BOOTSTRAP_TIMEOUT", "20");
    runRanksRaw(RankMode::kThreads, 2, [](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      EXPECT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSystemError);
      const std::string why = ncclGetLastError(comm);
      EXPECT_TRUE(why.find("NCCL_NET=WeftLoop") != std::string::npos) << why;
      EXPECT_TRUE(why.find("libnccl-net-weftloop-nodev.so") != std::string::npos) << why;
      EXPECT_TRUE(why.find("it reports no network devices") != std::string::npos) << why;
      if (comm != nullptr) ncclCommAbort(comm);
    });
  });
}

// NCCL_NET naming no network at all is the user's mistake.
TEST(NetPlugin, NcclNetNamingNoNetworkIsInvalidUsage) {
  inFreshProcess(120, [] {
    ScopedEnv plugin("NCCL_NET_PLUGIN", pluginPath("v12").c_str());
    ScopedEnv net("NCCL_NET", "NoSuchNet");
    ScopedEnv nodes("WEFT_RANKS_PER_NODE", "1");
    ScopedEnv patience("WEFT_BOOTSTRAP_TIMEOUT", "20");
    runRanksRaw(RankMode::kThreads, 2, [](int rank, int nranks, const ncclUniqueId& id) {
      ncclComm_t comm = nullptr;
      EXPECT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclInvalidUsage);
      const std::string why = ncclGetLastError(comm);
      EXPECT_TRUE(why.find("NCCL_NET=NoSuchNet names no network here (networks: Socket, WeftLoop)") !=
                  std::string::npos)
          << why;
      if (comm != nullptr) ncclCommAbort(comm);
    });
  });
}

}  // namespace
}  // namespace weft::test
