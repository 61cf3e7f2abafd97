// NCCL_DEBUG, NCCL_DEBUG_SUBSYS and NCCL_DEBUG_FILE: the lines NCCL users
// read, checked on the captured output. Each case runs in a forked child
// with its own environment and stdout, since the banner is written once per
// process and the log settings are process-wide.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "multirank/harness.h"
#include "nccl.h"

namespace weft::test {
namespace {

using Env = std::vector<std::pair<const char*, const char*>>;

std::string readFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::vector<std::string> linesWith(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

// Runs body in a child whose environment has `env` and whose stdout goes to
// a file; returns what the child wrote there. Fails the test if the child did.
std::string captureLog(const Env& env, const std::function<void()>& body) {
  char path[] = "/tmp/weft-log-test-XXXXXX";
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    alarm(120);
    dup2(fd, STDOUT_FILENO);
    setenv("WEFT_BACKEND", "host", 1);
    for (const auto& [name, value] : env) setenv(name, value, 1);
    ncclResetDebugInit();  // the settings were read before the fork
    body();
    std::fflush(nullptr);
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  close(fd);
  int status = 0;
  EXPECT_EQ(waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the child failed; its output:\n" << readFile(path);
  std::string text = readFile(path);
  unlink(path);
  return text;
}

// Two ranks as threads, body run on each.
void twoRanks(const std::function<void(RankContext&)>& body) { runRanks(RankMode::kThreads, 2, body); }

void oneAllReduce(RankContext& ctx) {
  float data[4] = {1, 2, 3, 4};
  ASSERT_EQ(ncclAllReduce(data, data, 4, ncclFloat, ncclSum, ctx.comm, nullptr), ncclSuccess);
}

TEST(Log, VersionPrintsTheBannerAlone) {
  const std::string out = captureLog({{"NCCL_DEBUG", "VERSION"}}, [] { twoRanks(oneAllReduce); });
  const std::vector<std::string> banner = linesWith(out, "NCCL version");
  ASSERT_EQ(banner.size(), 1u) << out;  // once per process, though two communicators were made
  // NCCL's VERSION line is the message alone: no host:pid:tid prefix.
  EXPECT_EQ(banner[0].rfind("NCCL version 2.27.", 0), 0u) << banner[0];
  EXPECT_NE(banner[0].find("Weft 0."), std::string::npos) << banner[0];
  EXPECT_NE(banner[0].find("backend host"), std::string::npos) << banner[0];
  // The library that was loaded, so a user sees it is not NVIDIA's.
  EXPECT_TRUE(std::regex_search(banner[0], std::regex("library /\\S*lib(nccl|weft)\\.so"))) << banner[0];
  EXPECT_TRUE(linesWith(out, "NCCL INFO").empty()) << out;
  EXPECT_TRUE(linesWith(out, "NCCL WARN").empty()) << out;
}

TEST(Log, NoneWritesNothing) {
  const std::string out = captureLog({{"NCCL_DEBUG", ""}}, [] { twoRanks(oneAllReduce); });
  EXPECT_EQ(out, "");
}

TEST(Log, InfoShowsEnvironmentTimingsRingsAndTrees) {
  const std::string out = captureLog({{"NCCL_DEBUG", "INFO"}, {"NCCL_BUFFSIZE", "262144"}, {"NCCL_ALGO", "ring"}},
                                     [] { twoRanks(oneAllReduce); });
  // Every variable read, in NCCL's words, once per process.
  EXPECT_EQ(linesWith(out, "NCCL INFO NCCL_BUFFSIZE set by environment to 262144.").size(), 1u) << out;
  EXPECT_EQ(linesWith(out, "NCCL INFO NCCL_ALGO set by environment to ring").size(), 1u) << out;
  EXPECT_EQ(linesWith(out, "NCCL INFO NCCL version 2.27.").size(), 1u) << out;
  const std::regex timings(
      "NCCL INFO Init timings - ncclCommInitRank: rank [01] nranks 2 total [0-9.]+ \\(kernels [0-9.]+, alloc [0-9.]+, "
      "bootstrap [0-9.]+, allgathers [0-9.]+, topo [0-9.]+, graphs [0-9.]+, connections [0-9.]+, rest [0-9.]+\\)");
  int timed = 0;
  for (const std::string& line : linesWith(out, "Init timings")) timed += std::regex_search(line, timings);
  EXPECT_EQ(timed, 2) << out;
  // Rings as NCCL prints them (rank 0 only), and each rank's trees.
  const std::vector<std::string> rings = linesWith(out, "NCCL INFO Channel 00/");
  ASSERT_FALSE(rings.empty()) << out;
  EXPECT_TRUE(std::regex_search(rings[0], std::regex("Channel 00/[0-9]{2} :\\s+0\\s+1$"))) << rings[0];
  EXPECT_EQ(linesWith(out, "NCCL INFO Trees [0] ").size(), 2u) << out;
  // INFO lines carry NCCL's prefix: host:pid:tid [rank].
  const std::regex prefix("^[^: ]+:[0-9]+:[0-9]+ \\[[01-]\\] NCCL INFO ");
  for (const std::string& line : linesWith(out, "NCCL INFO")) EXPECT_TRUE(std::regex_search(line, prefix)) << line;
}

TEST(Log, CollLinePerCallInNcclsFormat) {
  const std::string out = captureLog({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "COLL"}}, [] {
    twoRanks([](RankContext& ctx) {
      float send[8] = {}, recv[8] = {};
      for (int i = 0; i < 3; ++i)  // repeats take the fast path: still one line each
        ASSERT_EQ(ncclAllReduce(send, recv, 8, ncclFloat, ncclMax, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclBroadcast(send, recv, 2, ncclInt32, 1, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclSend(send, 4, ncclInt8, 1 - ctx.rank, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRecv(recv, 4, ncclInt8, 1 - ctx.rank, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
      std::printf("BUFFERS rank %d send %p recv %p comm %p\n", ctx.rank, static_cast<void*>(send),
                  static_cast<void*>(recv), static_cast<void*>(ctx.comm));
    });
  });
  EXPECT_TRUE(linesWith(out, "Init COMPLETE").empty()) << "INIT is not in NCCL_DEBUG_SUBSYS=COLL\n" << out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<std::string> who = linesWith(out, "BUFFERS rank " + std::to_string(rank) + " ");
    ASSERT_EQ(who.size(), 1u) << out;
    char send[32], recv[32], comm[32];
    ASSERT_EQ(std::sscanf(who[0].c_str(), "BUFFERS rank %*d send %31s recv %31s comm %31s", send, recv, comm), 3);
    const std::string c = std::string(" comm ") + comm + " [nranks=2] stream (nil)";
    const std::string tag = "[" + std::to_string(rank) + "] NCCL INFO ";
    std::vector<std::string> expected;
    for (int op = 0; op < 3; ++op)
      expected.push_back(tag + "AllReduce: opCount " + std::to_string(op) + " sendbuff " + send + " recvbuff " + recv +
                         " count 8 datatype 7 op 2 root 0" + c);
    expected.push_back(tag + "Broadcast: opCount 3 sendbuff " + send + " recvbuff " + recv +
                       " count 2 datatype 2 op 0 root 1" + c);
    expected.push_back(tag + "Send: opCount 4 sendbuff " + send + " recvbuff (nil) count 4 datatype 0 op 0 root " +
                       std::to_string(1 - rank) + c);
    expected.push_back(tag + "Recv: opCount 5 sendbuff (nil) recvbuff " + recv + " count 4 datatype 0 op 0 root " +
                       std::to_string(1 - rank) + c);
    const std::vector<std::string> lines = linesWith(out, tag);
    ASSERT_EQ(lines.size(), expected.size()) << out;
    for (size_t i = 0; i < lines.size(); ++i)
      EXPECT_NE(lines[i].find(expected[i]), std::string::npos) << "expected\n" << expected[i] << "\nin\n" << lines[i];
  }
}

TEST(Log, SubsysSyntax) {
  auto run = [](const char* subsys) {
    return captureLog({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", subsys}}, [] { twoRanks(oneAllReduce); });
  };
  const std::string allButColl = run("^COLL");
  EXPECT_FALSE(linesWith(allButColl, "Init COMPLETE").empty()) << allButColl;
  EXPECT_TRUE(linesWith(allButColl, "AllReduce: opCount").empty()) << allButColl;
  const std::string all = run("ALL");
  EXPECT_FALSE(linesWith(all, "Init COMPLETE").empty()) << all;
  EXPECT_EQ(linesWith(all, "AllReduce: opCount").size(), 2u) << all;
  EXPECT_FALSE(linesWith(all, "NCCL INFO Channel 00 : ").empty()) << all;  // connections (P2P)
  const std::string two = run("init,tuning");                              // names are case-insensitive
  EXPECT_FALSE(linesWith(two, "Init COMPLETE").empty()) << two;
  EXPECT_FALSE(linesWith(two, "AllReduce 16 bytes").empty()) << two;  // the tuning choice
  EXPECT_TRUE(linesWith(two, "AllReduce: opCount").empty()) << two;
  const std::string p2p = run("P2P");
  EXPECT_FALSE(linesWith(p2p, "via P2P").empty()) << p2p;
  EXPECT_TRUE(linesWith(p2p, "Init COMPLETE").empty()) << p2p;
}

TEST(Log, WarnNamesWhereTheErrorArose) {
  const std::string out = captureLog({{"NCCL_DEBUG", "WARN"}}, [] {
    twoRanks([](RankContext& ctx) {
      float data[4] = {};
      EXPECT_EQ(ncclAllReduce(data, data, 4, static_cast<ncclDataType_t>(99), ncclSum, ctx.comm, nullptr),
                ncclInvalidArgument);
    });
  });
  const std::vector<std::string> warns = linesWith(out, "NCCL WARN");
  ASSERT_EQ(warns.size(), 2u) << out;
  std::smatch where;
  ASSERT_TRUE(std::regex_search(warns[0], where,
                                std::regex("\\[[01]\\] ([a-z_0-9]+\\.cc):([0-9]+) NCCL WARN ncclAllReduce: "
                                           ".*datatype is 99")))
      << warns[0];
  // The file that made the error, not the logger or the API boundary.
  EXPECT_NE(where[1], "errors.cc");
  EXPECT_NE(where[1], "log.cc");
  EXPECT_GT(std::stoi(where[2]), 0);
  EXPECT_TRUE(linesWith(out, "NCCL INFO").empty()) << out;
}

TEST(Log, TraceAddsCallsAndSteps) {
  // Two virtual nodes: the ranks talk through the network and the proxy.
  const std::string out =
      captureLog({{"NCCL_DEBUG", "TRACE"}, {"NCCL_DEBUG_SUBSYS", "ALL"}, {"WEFT_RANKS_PER_NODE", "1"}},
                 [] { twoRanks(oneAllReduce); });
  const std::vector<std::string> calls = linesWith(out, "NCCL CALL ncclAllReduce(");
  EXPECT_EQ(calls.size(), 2u) << out;
  EXPECT_FALSE(linesWith(out, "NCCL CALL ncclCommInitRank(").empty()) << out;
  EXPECT_FALSE(linesWith(out, "NCCL TRACE").empty()) << out;
  const std::regex trace("\\] [0-9]+\\.[0-9]+ [a-z_0-9]+\\.cc:[0-9]+ NCCL TRACE ");
  for (const std::string& line : linesWith(out, "NCCL TRACE")) EXPECT_TRUE(std::regex_search(line, trace)) << line;
  EXPECT_TRUE(std::regex_search(out, std::regex("channel 0: func 0 algo [A-Za-z]+ count 4,")))
      << out;                                            // each channel's work
  EXPECT_FALSE(linesWith(out, "steps").empty()) << out;  // the network steps posted to the proxy
}

TEST(Log, DebugFileExpandsHostAndPid) {
  char dir[] = "/tmp/weft-logdir-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string pattern = std::string(dir) + "/nccl.%h.%p.log";
  std::string pidText;
  const std::string out = captureLog({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_FILE", pattern.c_str()}}, [] {
    twoRanks(oneAllReduce);
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    if (char* dot = std::strchr(host, '.')) *dot = '\0';
    std::printf("NAME %s %d\n", host, static_cast<int>(getpid()));
  });
  EXPECT_TRUE(linesWith(out, "NCCL INFO").empty()) << "the log went to the file, not stdout\n" << out;
  const std::vector<std::string> name = linesWith(out, "NAME ");
  ASSERT_EQ(name.size(), 1u) << out;
  char host[256];
  int pid = 0;
  ASSERT_EQ(std::sscanf(name[0].c_str(), "NAME %255s %d", host, &pid), 2);
  const std::string file = std::string(dir) + "/nccl." + host + "." + std::to_string(pid) + ".log";
  const std::string log = readFile(file);
  EXPECT_FALSE(linesWith(log, "Init COMPLETE").empty()) << file << ":\n" << log;
  unlink(file.c_str());
  rmdir(dir);
}

TEST(Log, AllocLinesForMemAlloc) {
  const std::string out = captureLog({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "ALLOC"}}, [] {
    void* p = nullptr;
    ASSERT_EQ(ncclMemAlloc(&p, 100), ncclSuccess);
    std::printf("POINTER %p\n", p);
    ASSERT_EQ(ncclMemFree(p), ncclSuccess);
  });
  const std::vector<std::string> ptr = linesWith(out, "POINTER ");
  ASSERT_EQ(ptr.size(), 1u) << out;
  const std::string p = ptr[0].substr(8);
  // A shareable segment (memfd, mapped by local peers in direct mode), or
  // page-rounded private memory where none can be had.
  const size_t shared = linesWith(out, "NCCL INFO ncclMemAlloc: shared host memory Size 100 pointer " + p).size();
  const size_t privateMem = linesWith(out, "NCCL INFO ncclMemAlloc: host memory Size 4096 pointer " + p).size();
  EXPECT_EQ(shared + privateMem, 1u) << out;
}

// WEFT_TUNING_FILE: every rank says which figures it plans with and where
// each comes from, and the calls run on them (as threads, then processes:
// the link type within the node follows).
TEST(Log, TuningFiguresAndTheirSource) {
  char path[] = "/tmp/weft-tuning-test-XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  const std::string text = "# a test file\nversion 1\nthreads.simple.latency_us 0.75\nshm.simple.latency_us 0.8\n";
  ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
  close(fd);
  for (RankMode mode : {RankMode::kThreads, RankMode::kProcesses}) {
    const std::string out =
        captureLog({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "TUNING"}, {"WEFT_TUNING_FILE", path}},
                   [mode] { runRanks(mode, 2, [](RankContext& ctx) { oneAllReduce(ctx); }); });
    const std::vector<std::string> lines =
        linesWith(out, std::string("cost model figures from WEFT_TUNING_FILE=") + path);
    ASSERT_EQ(lines.size(), 2u) << out;  // one per rank
    const bool threads = mode == RankMode::kThreads;
    for (const std::string& line : lines) {
      EXPECT_NE(line.find(threads ? "(links within a node: threads)" : "(links within a node: shared memory)"),
                std::string::npos)
          << line;
      EXPECT_NE(line.find("threads.simple.latency_us 0.75 (file)"), std::string::npos) << line;
      EXPECT_NE(line.find("shm.simple.latency_us 0.8 (file)"), std::string::npos) << line;
      EXPECT_NE(line.find("copy.gbs 8 (default)"), std::string::npos) << line;
    }
    // The per-call estimates follow (the choice's line).
    EXPECT_FALSE(linesWith(out, "AllReduce 16 bytes: ").empty()) << out;
  }
  // Unset: the built-in figures, said so.
  const std::string plain =
      captureLog({{"NCCL_DEBUG", "INFO"}, {"NCCL_DEBUG_SUBSYS", "TUNING"}}, [] { twoRanks(oneAllReduce); });
  EXPECT_EQ(linesWith(plain, "cost model figures from built-in defaults (host backend)").size(), 2u) << plain;
  unlink(path);
}

}  // namespace
}  // namespace weft::test
