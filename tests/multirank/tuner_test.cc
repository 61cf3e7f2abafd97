// A tuner plugin in a real job: every rank's communicator opens it (init
// with the communicator's ranks and nodes), its answer (Tree, one channel,
// for AllReduce of 4 KiB or more) is what runs, and the results are right.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "multirank/coll_check.h"
#include "multirank/harness.h"
#include "nccl.h"

namespace weft::test {
namespace {

const std::string kPlugin = std::string(WEFT_TUNER_PLUGINS_DIR) + "/libnccl-tuner-wefttest-v2.so";

int pluginCounter(const char* name) {
  void* handle = dlopen(kPlugin.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  const int* value = static_cast<const int*>(dlsym(handle, name));
  const int out = value ? *value : -1;
  dlclose(handle);
  return out;
}

TEST(TunerPlugin, EveryRankFollowsItAndResultsAreRight) {
  ScopedEnv plugin("NCCL_TUNER_PLUGIN", kPlugin.c_str());
  ScopedEnv debug("NCCL_DEBUG", "WARN");
  constexpr int kRanks = 4;
  runRanksRaw(RankMode::kThreads, kRanks, [&](int rank, int n, const ncclUniqueId& id) {
    ncclComm_t comm = nullptr;
    ASSERT_EQ(ncclCommInitRank(&comm, n, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
    for (size_t count : {size_t{16}, size_t{4096}, size_t{300000}}) {
      std::vector<float> data(count);
      for (size_t i = 0; i < count; ++i) data[i] = static_cast<float>(rank + 1) + static_cast<float>(i % 7);
      ASSERT_EQ(ncclAllReduce(data.data(), data.data(), count, ncclFloat32, ncclSum, comm, nullptr), ncclSuccess)
          << ncclGetLastError(comm);
      for (size_t i = 0; i < count; i += 97)
        ASSERT_EQ(data[i], static_cast<float>(n * (n + 1) / 2) + static_cast<float>(n * (i % 7))) << count << " " << i;
    }
    EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
  });
  // One init and one destroy per rank's communicator; asked once per call
  // planned (three sizes, every rank).
  EXPECT_EQ(pluginCounter("weftTestTunerInits"), kRanks);
  EXPECT_EQ(pluginCounter("weftTestTunerDestroys"), kRanks);
  EXPECT_EQ(pluginCounter("weftTestTunerCalls"), 3 * kRanks);
}

}  // namespace
}  // namespace weft::test
