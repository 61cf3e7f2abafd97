// Processes of one host without shared memory use the network, as NCCL's
// do: with NCCL_SHM_DISABLE=1, and when /dev/shm has no room (a small tmpfs
// in a private mount namespace; needs root, skipped otherwise). Results are
// checked, and the INIT log lines say which transport each channel took.
// The advice of the shared-memory error (lower NCCL_BUFFSIZE or
// NCCL_MAX_NCHANNELS) is followed and must bring shared memory back.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "multirank/coll_check.h"
#include "multirank/harness.h"
#include "nccl.h"

namespace weft::test {
namespace {

// Runs checked collectives on `nranks` processes; each writes its log to a
// file of `dir`, returned concatenated.
std::string runLogged(int nranks, const std::string& dir) {
  const std::string pattern = dir + "/rank.%p.log";
  ScopedEnv debug("NCCL_DEBUG", "INFO");
  ScopedEnv subsys("NCCL_DEBUG_SUBSYS", "INIT");
  ScopedEnv file("NCCL_DEBUG_FILE", pattern.c_str());
  runRanksRaw(RankMode::kProcesses, nranks, [](int rank, int n, const ncclUniqueId& id) {
    ncclResetDebugInit();  // settings changed since the parent read them
    RankContext ctx{rank, n, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, n, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
    for (size_t count : {1ul, 1000ul, 300000ul})
      for (CollOp coll : {CollOp::kAllReduce, CollOp::kAllGather, CollOp::kBroadcast})
        EXPECT_TRUE(runAndCheck(ctx, {coll, ncclInt32, TestOp::kSum, count, 0, false}));
    EXPECT_EQ(ncclCommDestroy(ctx.comm), ncclSuccess);
  });
  std::string all;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] == '.') continue;
      const std::string path = dir + "/" + e->d_name;
      std::ifstream in(path);
      std::stringstream text;
      text << in.rdbuf();
      all += text.str();
      unlink(path.c_str());
    }
    closedir(d);
  }
  return all;
}

std::string tempDir() {
  char dir[] = "/tmp/weft-shm-test-XXXXXX";
  return mkdtemp(dir) ? dir : "";
}

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

TEST(ShmFallback, ShmDisabledUsesTheNetworkBetweenProcesses) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  ScopedEnv shm("NCCL_SHM_DISABLE", "1");
  const std::string log = runLogged(3, dir);
  rmdir(dir.c_str());
  EXPECT_TRUE(has(log, " via NET")) << log;
  EXPECT_FALSE(has(log, " via SHM")) << log;
}

TEST(ShmFallback, SharedMemoryByDefault) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  const std::string log = runLogged(2, dir);
  rmdir(dir.c_str());
  EXPECT_TRUE(has(log, " via SHM")) << log;
  EXPECT_FALSE(has(log, " via NET")) << log;
}

// In a child with its own mount namespace and a /dev/shm of `shmBytes`,
// runs the body; returns false (and the test skips) when that cannot be set up.
bool withSmallDevShm(size_t shmBytes, const std::function<void()>& body, int* exitCode) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (unshare(CLONE_NEWNS) != 0 || mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, ("size=" + std::to_string(shmBytes)).c_str()) != 0)
      _exit(77);
    body();
    _exit(::testing::Test::HasFailure() ? 1 : 0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  *exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return *exitCode != 77;
}

TEST(ShmFallback, NoRoomInDevShmFallsBackToTheNetwork) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  int code = 0;
  const bool ran = withSmallDevShm(
      64 << 10,
      [&] {
        const std::string log = runLogged(2, dir);
        EXPECT_TRUE(has(log, "shared memory from rank")) << log;
        EXPECT_TRUE(has(log, "lower NCCL_BUFFSIZE or NCCL_MAX_NCHANNELS")) << log;  // the advice, in the line
        EXPECT_TRUE(has(log, " via NET")) << log;
      },
      &code);
  rmdir(dir.c_str());
  if (!ran) GTEST_SKIP() << "needs root to mount a small /dev/shm in a private namespace";
  EXPECT_EQ(code, 0);
}

TEST(ShmFallback, LowerBuffSizeAndChannelsBringSharedMemoryBack) {
  const std::string dir = tempDir();
  ASSERT_FALSE(dir.empty());
  int code = 0;
  const bool ran = withSmallDevShm(
      64 << 10,
      [&] {
        ScopedEnv buff("NCCL_BUFFSIZE", "4096");
        ScopedEnv channels("NCCL_MAX_NCHANNELS", "1");
        const std::string log = runLogged(2, dir);
        EXPECT_TRUE(has(log, " via SHM")) << log;
        EXPECT_FALSE(has(log, " via NET")) << log;
      },
      &code);
  rmdir(dir.c_str());
  if (!ran) GTEST_SKIP() << "needs root to mount a small /dev/shm in a private namespace";
  EXPECT_EQ(code, 0);
}

}  // namespace
}  // namespace weft::test
