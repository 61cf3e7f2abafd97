// Tuner plugins (NCCL_TUNER_PLUGIN): loading tables v2 to v4 by path and by
// NCCL's name resolution, the newest table of a library, each reason a
// plugin cannot be used, and the plugin's answer reaching the planner. The
// plugins are the in-tree test plugins (tests/tuner_plugins/).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>

#include "core/planner.h"
#include "net_test_util.h"
#include "tuning/tuner_plugin.h"

namespace weft::tuning {
namespace {

using testing::ScopedEnv;

std::string pluginPath(const std::string& variant) {
  return std::string(WEFT_TUNER_PLUGINS_DIR) + "/libnccl-tuner-wefttest-" + variant + ".so";
}

// A counter the plugin exports (the loader's copy: RTLD_NOLOAD).
template <typename T>
T counter(const std::string& variant, const char* name) {
  void* handle = dlopen(pluginPath(variant).c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return T{};
  const T* value = static_cast<const T*>(dlsym(handle, name));
  const T out = value ? *value : T{};
  dlclose(handle);
  return out;
}

TunerCosts ringAndTree(bool withLL) {
  TunerCosts costs;
  costs.offer(Algorithm::kRing, Protocol::kSimple, 10.0);
  costs.offer(Algorithm::kTree, Protocol::kSimple, 20.0);
  if (withLL) costs.offer(Algorithm::kRing, Protocol::kLL, 12.0);
  return costs;
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST(TunerPlugin, CostTableV3ChoosesAndSetsChannels) {
  ScopedEnv env("NCCL_TUNER_PLUGIN", pluginPath("v3").c_str());
  {
    auto session = TunerSession::open(4, 2);
    ASSERT_NE(session, nullptr) << TunerSession::problem();
    EXPECT_EQ(session->name(), "wefttest-v3");
    EXPECT_EQ((counter<size_t>("v3", "weftTestTunerRanks")), 4u);
    EXPECT_EQ((counter<size_t>("v3", "weftTestTunerNodes")), 2u);
    const TunerAnswer a = session->ask(CollKind::kAllReduce, 1 << 20, 3, ringAndTree(false));
    EXPECT_TRUE(a.decided);
    EXPECT_EQ(a.algo, Algorithm::kTree);
    EXPECT_EQ(a.proto, Protocol::kSimple);
    EXPECT_EQ(a.nChannels, 1);
    EXPECT_EQ((counter<int>("v3", "weftTestTunerLastColl")), 4);  // ncclFuncAllReduce
    EXPECT_EQ((counter<size_t>("v3", "weftTestTunerLastBytes")), size_t{1} << 20);
    EXPECT_EQ((counter<int>("v3", "weftTestTunerLastPipeOps")), 3);
    // Not an AllReduce: the table comes back as offered, Weft's choice stands.
    EXPECT_FALSE(session->ask(CollKind::kAllGather, 4096, 1, ringAndTree(false)).decided);
    // Tree not offered: the plugin cannot make it cheapest.
    TunerCosts ringOnly;
    ringOnly.offer(Algorithm::kRing, Protocol::kSimple, 10.0);
    EXPECT_FALSE(session->ask(CollKind::kAllReduce, 4096, 1, ringOnly).decided);
  }
  EXPECT_EQ((counter<int>("v3", "weftTestTunerDestroys")), 1);
}

TEST(TunerPlugin, BareNameResolvesAndV2AnswersDirectly) {
  // LD_LIBRARY_PATH holds the test plugins (ctest sets it): the bare name
  // resolves to libnccl-tuner-wefttest-v2.so, as NCCL resolves it.
  ScopedEnv env("NCCL_TUNER_PLUGIN", "wefttest-v2");
  auto session = TunerSession::open(2, 1);
  ASSERT_NE(session, nullptr) << TunerSession::problem();
  const TunerAnswer big = session->ask(CollKind::kAllReduce, 8192, 1, ringAndTree(false));
  EXPECT_TRUE(big.decided);
  EXPECT_EQ(big.algo, Algorithm::kTree);
  EXPECT_EQ(big.nChannels, 1);
  EXPECT_FALSE(session->ask(CollKind::kAllReduce, 1024, 1, ringAndTree(false)).decided);
  // A choice Weft cannot run for this call is ignored.
  TunerCosts ringOnly;
  ringOnly.offer(Algorithm::kRing, Protocol::kSimple, 10.0);
  EXPECT_FALSE(session->ask(CollKind::kAllReduce, 8192, 1, ringOnly).decided);
}

TEST(TunerPlugin, NewestTableOfALibraryWins) {
  ScopedEnv env("NCCL_TUNER_PLUGIN", pluginPath("v34").c_str());
  auto session = TunerSession::open(2, 1);
  ASSERT_NE(session, nullptr) << TunerSession::problem();
  EXPECT_EQ(session->name(), "wefttest-v4");
  const TunerAnswer a = session->ask(CollKind::kAllReduce, 64, 1, ringAndTree(true));
  EXPECT_TRUE(a.decided);
  EXPECT_EQ(a.algo, Algorithm::kRing);
  EXPECT_EQ(a.proto, Protocol::kLL);
  EXPECT_EQ(a.nChannels, 0);
  EXPECT_FALSE(session->ask(CollKind::kAllReduce, 64, 1, ringAndTree(false)).decided);
}

TEST(TunerPlugin, NoneAndAbsentGiveNoPluginSilently) {
  {
    ScopedEnv env("NCCL_TUNER_PLUGIN", "none");
    EXPECT_EQ(TunerSession::open(2, 1), nullptr);
    EXPECT_EQ(TunerSession::problem(), "");
  }
  ScopedEnv unset("NCCL_TUNER_PLUGIN", nullptr);
  ScopedEnv net("NCCL_NET_PLUGIN", "none");
  EXPECT_EQ(TunerSession::open(2, 1), nullptr);
  EXPECT_EQ(TunerSession::problem(), "");
}

TEST(TunerPlugin, UnusablePluginsAreNamedWithWhy) {
  struct Case {
    std::string setting;
    std::string why;
  };
  const Case cases[] = {
      {"/nonexistent/libnccl-tuner-x.so", "/nonexistent/libnccl-tuner-x.so"},
      {"wefttest-nosuch", "libnccl-tuner-wefttest-nosuch.so"},
      {pluginPath("v5only"), "exports only ncclTunerPlugin_v5, newer than the newest Weft loads (v4"},
  };
  for (const Case& c : cases) {
    ScopedEnv env("NCCL_TUNER_PLUGIN", c.setting.c_str());
    EXPECT_EQ(TunerSession::open(2, 1), nullptr) << c.setting;
    const std::string problem = TunerSession::problem();
    EXPECT_TRUE(contains(problem, "NCCL_TUNER_PLUGIN=" + c.setting)) << problem;
    EXPECT_TRUE(contains(problem, c.why)) << problem;
  }
}

TEST(TunerPlugin, FailedInitOrCallLeavesWeftsChoice) {
  {
    ScopedEnv env("NCCL_TUNER_PLUGIN", pluginPath("noinit").c_str());
    EXPECT_EQ(TunerSession::open(2, 1), nullptr);
    EXPECT_EQ((counter<int>("noinit", "weftTestTunerInits")), 1);
  }
  ScopedEnv env("NCCL_TUNER_PLUGIN", pluginPath("fails").c_str());
  auto session = TunerSession::open(2, 1);
  ASSERT_NE(session, nullptr);
  EXPECT_FALSE(session->ask(CollKind::kAllReduce, 1 << 20, 1, ringAndTree(false)).decided);
  EXPECT_EQ((counter<int>("fails", "weftTestTunerCalls")), 1);
}

// The planner takes the plugin's algorithm and channel count.
TEST(TunerPlugin, PlannerFollowsThePlugin) {
  ScopedEnv env("NCCL_TUNER_PLUGIN", pluginPath("v3").c_str());
  auto session = TunerSession::open(8, 1);
  ASSERT_NE(session, nullptr);
  core::PlanInputs in{0, 8, 4, 1, 8192, 4};
  in.shape = Shape{8, 1, 8, 3};
  in.treesAvailable = true;
  in.tuner = session.get();
  static float buffer[1 << 18];
  core::CollTask task{};
  task.func = device::Func::kAllReduce;
  task.sendbuff = buffer;
  task.recvbuff = buffer;
  task.count = 1 << 18;
  task.dtype = ncclFloat32;
  task.op.kind = device::RedOpKind::kSum;
  core::Plan plan;
  ASSERT_TRUE(core::planTasks(in, {task}, {}, &plan).ok());
  int used = 0;
  for (const auto& items : plan.channels) used += items.empty() ? 0 : 1;
  EXPECT_EQ(used, 1);
  ASSERT_FALSE(plan.channels[0].empty());
  EXPECT_EQ(plan.channels[0][0].coll.algo, device::Algo::kTree);
  EXPECT_EQ(plan.channels[0][0].coll.channelCount, task.count);
  // Without the plugin the same call spreads over the channels by the ring.
  in.tuner = nullptr;
  ASSERT_TRUE(core::planTasks(in, {task}, {}, &plan).ok());
  EXPECT_EQ(plan.channels[0][0].coll.algo, device::Algo::kRing);
  EXPECT_LT(plan.channels[0][0].coll.channelCount, task.count);
}

}  // namespace
}  // namespace weft::tuning
