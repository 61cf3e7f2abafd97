// Profiler plugins (NCCL_PROFILER_PLUGIN, tests/profiler_plugins/): every
// communicator opens a session (init with its rank, ranks and nodes,
// finalize at destroy); each launch is a group event with one event per
// call under it, named as NCCL names them, every start matched by a stop;
// the plugin's mask silences events; a v3 plugin gets v3 descriptors; a
// plugin that cannot be used changes nothing but a warning.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "multirank/coll_check.h"
#include "multirank/harness.h"
#include "nccl.h"

namespace weft::test {
namespace {

std::string pluginPath(const char* variant) {
  return std::string(WEFT_PROFILER_PLUGINS_DIR) + "/libnccl-profiler-wefttest-" + variant + ".so";
}

// The plugin's log, then cleared (it stays loaded for the process).
std::string takeLog(const std::string& path) {
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return "(not loaded)";
  auto log = reinterpret_cast<const char* (*)()>(dlsym(handle, "weftTestProfilerLog"));
  auto clear = reinterpret_cast<void (*)()>(dlsym(handle, "weftTestProfilerClear"));
  std::string out = log ? log() : "(no log)";
  if (clear) clear();
  dlclose(handle);
  return out;
}

int countLines(const std::string& log, const std::string& fragment) {
  std::istringstream lines(log);
  int n = 0;
  for (std::string line; std::getline(lines, line);)
    if (line.find(fragment) != std::string::npos) ++n;
  return n;
}

// Two ranks: two AllReduces, a Broadcast from rank 1, and a group of a send
// and a receive to the other rank; every result checked.
void runCalls(const ncclUniqueId& id, int rank, int nranks) {
  ncclComm_t comm = nullptr;
  ASSERT_EQ(ncclCommInitRank(&comm, nranks, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<float> data(1000, static_cast<float>(rank + 1));
  for (int i = 0; i < 2; ++i) {
    std::fill(data.begin(), data.end(), static_cast<float>(rank + 1));
    ASSERT_EQ(ncclAllReduce(data.data(), data.data(), data.size(), ncclFloat32, ncclSum, comm, nullptr), ncclSuccess);
    EXPECT_EQ(data[999], 3.0f);
  }
  std::vector<int> root(10, rank);
  ASSERT_EQ(ncclBroadcast(root.data(), root.data(), root.size(), ncclInt32, 1, comm, nullptr), ncclSuccess);
  EXPECT_EQ(root[9], 1);
  std::vector<double> out(64, rank), in(64, -1);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  ASSERT_EQ(ncclSend(out.data(), out.size(), ncclFloat64, 1 - rank, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclRecv(in.data(), in.size(), ncclFloat64, 1 - rank, comm, nullptr), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  EXPECT_EQ(in[63], 1 - rank);
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);
}

TEST(ProfilerPlugin, V4GetsEveryCallUnderItsGroup) {
  const std::string path = pluginPath("v4");
  ScopedEnv plugin("NCCL_PROFILER_PLUGIN", path.c_str());
  ScopedEnv algo("NCCL_ALGO", "Ring");  // what the events must name
  ScopedEnv proto("NCCL_PROTO", "Simple");
  takeLog(path);
  runRanksRaw(RankMode::kThreads, 2, [](int rank, int n, const ncclUniqueId& id) { runCalls(id, rank, n); });
  const std::string log = takeLog(path);
  for (int r = 0; r < 2; ++r) {
    const std::string rk = "rank=" + std::to_string(r) + " ";
    SCOPED_TRACE("rank " + std::to_string(r) + ", plugin log:\n" + log);
    EXPECT_EQ(countLines(log, "init v4 " + rk + "nranks=2 nNodes=1"), 1);
    EXPECT_EQ(countLines(log, "start " + rk + "group"), 4);  // three calls and one group of two
    EXPECT_EQ(countLines(log, "start " + rk +
                                  "coll parent=group seq=0 func=AllReduce count=1000 root=0 "
                                  "datatype=ncclFloat32 nch=1"),
              1);
    EXPECT_EQ(countLines(log, "start " + rk + "coll parent=group seq=1 func=AllReduce"), 1);
    EXPECT_EQ(countLines(log, "start " + rk +
                                  "coll parent=group seq=0 func=Broadcast count=10 root=1 "
                                  "datatype=ncclInt32"),
              1);
    EXPECT_EQ(countLines(log, "start " + rk + "p2p parent=group func=Send peer=" + std::to_string(1 - r) +
                                  " count=64 datatype=ncclFloat64"),
              1);
    EXPECT_EQ(countLines(log, "start " + rk + "p2p parent=group func=Recv"), 1);
    EXPECT_EQ(countLines(log, "stop " + rk), countLines(log, "start " + rk)) << "a started event was not stopped";
    EXPECT_EQ(countLines(log, "finalize " + rk), 1);
  }
  EXPECT_EQ(countLines(log, "nch=1 algo=RING proto=SIMPLE"), 6);
}

// The mask the plugin sets at init: none asked for, none emitted.
TEST(ProfilerPlugin, ItsMaskSilencesEvents) {
  const std::string path = pluginPath("v4");
  ScopedEnv plugin("NCCL_PROFILER_PLUGIN", path.c_str());
  ScopedEnv mask("WEFT_TEST_PROFILER_MASK", "0");
  takeLog(path);
  runRanksRaw(RankMode::kThreads, 2, [](int rank, int n, const ncclUniqueId& id) { runCalls(id, rank, n); });
  const std::string log = takeLog(path);
  EXPECT_EQ(countLines(log, "init v4"), 2) << log;
  EXPECT_EQ(countLines(log, "start"), 0) << log;
  EXPECT_EQ(countLines(log, "finalize"), 2) << log;
}

// A plugin exporting only the v3 table gets v3 descriptors (with the
// communicator's hash in each).
TEST(ProfilerPlugin, V3GetsItsOwnDescriptors) {
  const std::string path = pluginPath("v3");
  ScopedEnv plugin("NCCL_PROFILER_PLUGIN", path.c_str());
  takeLog(path);
  runRanksRaw(RankMode::kThreads, 2, [](int rank, int n, const ncclUniqueId& id) { runCalls(id, rank, n); });
  const std::string log = takeLog(path);
  EXPECT_EQ(countLines(log, "init v3"), 2) << log;
  EXPECT_EQ(countLines(log, "coll parent=group seq=1 func=AllReduce count=1000 name="), 2) << log;
  EXPECT_EQ(countLines(log, "hash=set"), 6) << log;
  EXPECT_EQ(countLines(log, "p2p func=Send"), 2) << log;
  EXPECT_EQ(countLines(log, "stop"), countLines(log, "start")) << log;
}

// A plugin whose init refuses, one with no table Weft loads, and one that is
// not there: each run is still right (runCalls checks it).
TEST(ProfilerPlugin, APluginThatCannotBeUsedChangesNothing) {
  for (const std::string& path : {pluginPath("noinit"), pluginPath("v2only"), std::string("wefttest-missing")}) {
    SCOPED_TRACE(path);
    ScopedEnv plugin("NCCL_PROFILER_PLUGIN", path.c_str());
    runRanksRaw(RankMode::kThreads, 2, [](int rank, int n, const ncclUniqueId& id) { runCalls(id, rank, n); });
  }
  EXPECT_EQ(countLines(takeLog(pluginPath("noinit")), "init-refused"), 2);
}

}  // namespace
}  // namespace weft::test
