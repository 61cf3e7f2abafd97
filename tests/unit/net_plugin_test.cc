// Loading external network plugins: every interface version from 6 to the
// newest, NCCL's name resolution, and each reason a plugin cannot be used,
// named. The plugins are the in-tree test plugins (tests/net_plugins/): an
// in-memory network whose connect finishes once the peer accepted.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/clock.h"
#include "transport/net/net_plugin.h"

namespace weft::transport {
namespace {

std::string pluginPath(const std::string& variant) {
  return std::string(WEFT_NET_PLUGINS_DIR) + "/libnccl-net-weftloop-" + variant + ".so";
}

int initVersionSeenBy(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_NOLOAD);
  if (handle == nullptr) return -1;
  using StatsFn = void (*)(int64_t*, int64_t*, int64_t*, int*);
  auto fn = reinterpret_cast<StatsFn>(dlsym(handle, "weftLoopStats"));
  int64_t connects = 0, accepts = 0, bytes = 0;
  int version = -1;
  if (fn) fn(&connects, &accepts, &bytes, &version);
  dlclose(handle);
  return version;
}

bool contains(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// Polls `request` until done (10 s at most); returns the size it reports.
int waitFor(const NetApi& api, void* request) {
  const Deadline deadline = Deadline::afterSec(10);
  int done = 0, size = -1;
  while (!done && !deadline.expired()) EXPECT_EQ(api.test(request, &done, &size), ncclSuccess);
  EXPECT_TRUE(done) << "request not done in 10 s";
  return size;
}

// Connects a pair through `api` the way Weft's set-up does: connect and
// accept alternate until both have a comm.
void connectPair(const NetApi& api, void** send, void** recv) {
  char handle[kNetHandleBytes] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(api.listen(1, handle, &listenComm), ncclSuccess);
  *send = *recv = nullptr;
  ASSERT_EQ(api.connect(1, handle, send), ncclSuccess);
  EXPECT_EQ(*send, nullptr) << "the test plugin's connect waits for the accept";
  for (int i = 0; i < 100 && (*send == nullptr || *recv == nullptr); ++i) {
    if (*recv == nullptr) ASSERT_EQ(api.accept(listenComm, recv), ncclSuccess);
    if (*send == nullptr) ASSERT_EQ(api.connect(1, handle, send), ncclSuccess);
  }
  ASSERT_EQ(api.closeListen(listenComm), ncclSuccess);
  ASSERT_NE(*send, nullptr);
  ASSERT_NE(*recv, nullptr);
}

// Three messages of different sizes, each checked byte for byte.
void moveData(const NetApi& api) {
  void* send = nullptr;
  void* recv = nullptr;
  ASSERT_NO_FATAL_FAILURE(connectPair(api, &send, &recv));
  std::vector<char> out(1 << 16), in(1 << 16);
  void* sendMr = nullptr;
  void* recvMr = nullptr;
  ASSERT_EQ(api.regMr(send, out.data(), out.size(), kNetPtrHost, &sendMr), ncclSuccess);
  ASSERT_EQ(api.regMr(recv, in.data(), in.size(), kNetPtrHost, &recvMr), ncclSuccess);
  for (size_t bytes : {size_t{1}, size_t{4097}, size_t{1} << 16}) {
    for (size_t i = 0; i < bytes; ++i) out[i] = static_cast<char>(i * 7 + bytes);
    std::memset(in.data(), 0, in.size());
    void* sendRequest = nullptr;
    void* recvRequest = nullptr;
    void* data = in.data();
    size_t room = in.size();
    int tag = 0;
    ASSERT_EQ(api.irecv(recv, 1, &data, &room, &tag, &recvMr, &recvRequest), ncclSuccess);
    ASSERT_EQ(api.isend(send, out.data(), bytes, 0, sendMr, &sendRequest), ncclSuccess);
    ASSERT_NE(recvRequest, nullptr);
    ASSERT_NE(sendRequest, nullptr);
    EXPECT_EQ(waitFor(api, sendRequest), static_cast<int>(bytes));
    EXPECT_EQ(waitFor(api, recvRequest), static_cast<int>(bytes));
    EXPECT_EQ(std::memcmp(in.data(), out.data(), bytes), 0) << bytes << " bytes";
  }
  EXPECT_EQ(api.deregMr(send, sendMr), ncclSuccess);
  EXPECT_EQ(api.deregMr(recv, recvMr), ncclSuccess);
  EXPECT_EQ(api.closeSend(send), ncclSuccess);
  EXPECT_EQ(api.closeRecv(recv), ncclSuccess);
}

class EveryVersion : public ::testing::TestWithParam<int> {};

TEST_P(EveryVersion, LoadsInitialisesAndMovesData) {
  const int version = GetParam();
  const std::string library = pluginPath("v" + std::to_string(version));
  PluginLoad load = loadNetPlugin(library);
  ASSERT_TRUE(load.failure.empty()) << load.failure;
  ASSERT_NE(load.net.api, nullptr);
  EXPECT_EQ(load.net.api->version(), version);
  EXPECT_STREQ(load.net.api->name(), "WeftLoop");
  EXPECT_EQ(load.net.library, library);
  EXPECT_TRUE(load.net.external);
  EXPECT_EQ(load.net.devices, 2);
  EXPECT_EQ(initVersionSeenBy(library), version) << "the plugin's own init of that version ran";
  NetProperties props;
  ASSERT_EQ(load.net.api->getProperties(1, &props), ncclSuccess);
  EXPECT_EQ(props.name, "loop1");
  EXPECT_EQ(props.speedMbps, 100000);
  EXPECT_EQ(props.ptrSupport, kNetPtrHost);
  EXPECT_EQ(props.maxMessageBytes, version >= 9 ? size_t{1} << 30 : 0);
  moveData(*load.net.api);
}

INSTANTIATE_TEST_SUITE_P(NetPlugin, EveryVersion, ::testing::Range(kNetOldestVersion, kNetNewestVersion + 1),
                         [](const ::testing::TestParamInfo<int>& p) { return "v" + std::to_string(p.param); });

TEST(NetPluginLoad, TakesTheNewestVersionExported) {
  PluginLoad load = loadNetPlugin(pluginPath("multi"));  // exports v6, v9 and v12
  ASSERT_TRUE(load.failure.empty()) << load.failure;
  EXPECT_EQ(load.net.api->version(), kNetNewestVersion);
  EXPECT_EQ(initVersionSeenBy(pluginPath("multi")), kNetNewestVersion);
}

// NCCL's resolution: a bare name is tried as given, then as
// libnccl-net-<name>.so, both through the loader's search path (this test
// runs with LD_LIBRARY_PATH at the test plugins).
TEST(NetPluginLoad, ResolvesNamesAsNcclDoes) {
  PluginLoad bare = loadNetPlugin("weftloop-v9");
  ASSERT_TRUE(bare.failure.empty()) << bare.failure;
  EXPECT_EQ(bare.net.library, "libnccl-net-weftloop-v9.so");
  EXPECT_EQ(bare.net.api->version(), 9);
  PluginLoad file = loadNetPlugin("libnccl-net-weftloop-v7.so");
  ASSERT_TRUE(file.failure.empty()) << file.failure;
  EXPECT_EQ(file.net.library, "libnccl-net-weftloop-v7.so");
  EXPECT_EQ(file.net.api->version(), 7);
  PluginLoad missing = loadNetPlugin("no-such-net");
  EXPECT_TRUE(contains(missing.failure, "no-such-net")) << missing.failure;
  EXPECT_TRUE(contains(missing.failure, "libnccl-net-no-such-net.so")) << missing.failure;
  EXPECT_EQ(missing.net.api, nullptr);
  PluginLoad missingFile = loadNetPlugin("libnccl-net-absent.so");  // a library name: not decorated again
  EXPECT_TRUE(contains(missingFile.failure, "libnccl-net-absent.so")) << missingFile.failure;
  EXPECT_FALSE(contains(missingFile.failure, "libnccl-net-libnccl-net")) << missingFile.failure;
}

TEST(NetPluginLoad, NamesEveryReasonAPluginCannotBeUsed) {
  struct Case {
    const char* variant;
    const char* why;
  };
  const Case cases[] = {
      {"noinit", "its init returned ncclSystemError"},
      {"nodev", "it reports no network devices"},
      {"collnetonly", "exports only a CollNet table (ncclCollNetPlugin_v8); Weft has no CollNet support"},
      {"v13only", "exports only ncclNetPlugin_v13, newer than the newest Weft loads (v12)"},
  };
  for (const Case& c : cases) {
    PluginLoad load = loadNetPlugin(pluginPath(c.variant));
    EXPECT_TRUE(contains(load.failure, c.why)) << c.variant << ": " << load.failure;
    EXPECT_TRUE(contains(load.failure, "libnccl-net-weftloop-" + std::string(c.variant))) << load.failure;
  }
  PluginLoad notAPlugin = loadNetPlugin("libm.so.6");
  EXPECT_TRUE(contains(notAPlugin.failure, "libm.so.6 exports no ncclNetPlugin_v6..v12 table")) << notAPlugin.failure;
}

TEST(NetPluginLoad, UsesTheNetTableBesideARefusedCollNetTable) {
  PluginLoad load = loadNetPlugin(pluginPath("collnet"));  // ncclNetPlugin_v8 and ncclCollNetPlugin_v8
  ASSERT_TRUE(load.failure.empty()) << load.failure;
  EXPECT_EQ(load.net.api->version(), 8);
}

}  // namespace
}  // namespace weft::transport
