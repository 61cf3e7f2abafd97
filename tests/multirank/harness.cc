#include "multirank/harness.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

namespace weft::test {

const char* modeName(RankMode mode) { return mode == RankMode::kThreads ? "threads" : "processes"; }

namespace {

constexpr unsigned kChildSeconds = 240;

void runThreads(int nranks, const std::function<void(int, int, const ncclUniqueId&)>& body) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < nranks; ++r) threads.emplace_back([&, r] { body(r, nranks, id); });
  for (std::thread& t : threads) t.join();
}

void runProcesses(int nranks, const std::function<void(int, int, const ncclUniqueId&)>& body) {
  int idPipe[2];
  ASSERT_EQ(pipe(idPipe), 0);
  std::vector<pid_t> children;
  for (int r = 0; r < nranks; ++r) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      alarm(kChildSeconds);  // a hung child dies and fails the test instead of hanging ctest
      ncclUniqueId id;
      if (r == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(3);
        for (int i = 1; i < nranks; ++i)
          if (write(idPipe[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) _exit(3);
      } else if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
        _exit(3);
      }
      body(r, nranks, id);
      const bool failed = ::testing::Test::HasFailure();
      std::fflush(nullptr);
      _exit(failed ? 1 : 0);
    }
    children.push_back(pid);
  }
  close(idPipe[0]);
  close(idPipe[1]);
  for (size_t r = 0; r < children.size(); ++r) {
    int status = 0;
    ASSERT_EQ(waitpid(children[r], &status, 0), children[r]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "rank " << r << " (pid " << children[r] << ") failed: "
        << (WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                              : "signal " + std::to_string(WTERMSIG(status)));
  }
}

}  // namespace

void runRanksRaw(RankMode mode, int nranks, const std::function<void(int, int, const ncclUniqueId&)>& body) {
  // These tests pass host buffers: keep them on the host backend even on a
  // machine with a GPU, unless the caller chose a backend explicitly.
  setenv("WEFT_BACKEND", "host", 0);
  if (mode == RankMode::kThreads)
    runThreads(nranks, body);
  else
    runProcesses(nranks, body);
}

void runRanks(RankMode mode, int nranks, const std::function<void(RankContext&)>& body) {
  runRanksRaw(mode, nranks, [&](int rank, int n, const ncclUniqueId& id) {
    RankContext ctx{rank, n, nullptr};
    ASSERT_EQ(ncclCommInitRank(&ctx.comm, n, id, rank), ncclSuccess) << ncclGetLastError(nullptr);
    body(ctx);
    EXPECT_EQ(ncclCommDestroy(ctx.comm), ncclSuccess) << ncclGetLastError(nullptr);
  });
}

}  // namespace weft::test
