// weft-demo: the README's main job. Runs ncclAllReduce (float sum) across N
// local ranks on the host backend, as forked processes (default) or threads,
// checks every result, and prints time and bandwidth per size.
//
//   weft-demo [-n ranks] [-i iters] [-w warmup] [--threads] [-e maxbytes]
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "nccl.h"
#include "weft.h"

namespace {

struct Options {
  int ranks = 4;
  int iters = 20;
  int warmup = 5;
  bool threads = false;
  size_t maxBytes = 64u << 20;
};

struct Row {
  size_t bytes;
  double medianUs;
  bool correct;
};

#define DEMO_CHECK(call)                                                                       \
  do {                                                                                         \
    ncclResult_t rc_ = (call);                                                                 \
    if (rc_ != ncclSuccess) {                                                                  \
      std::fprintf(stderr, "weft-demo: %s failed: %s\n  %s\n", #call, ncclGetErrorString(rc_), \
                   ncclGetLastError(nullptr));                                                 \
      return false;                                                                            \
    }                                                                                          \
  } while (0)

// Rank r contributes r+1+i%7 at element i: every partial sum is a small
// integer, exact in float whatever the reduction order.
bool runRank(const Options& opt, const ncclUniqueId& id, int rank, std::vector<Row>* rows) {
  ncclComm_t comm = nullptr;
  DEMO_CHECK(ncclCommInitRank(&comm, opt.ranks, id, rank));
  bool allCorrect = true;
  for (size_t bytes = 8; bytes <= opt.maxBytes; bytes *= (bytes < 4096 ? 512 : bytes < (1u << 20) ? 256 : 64)) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> send(count), recv(count, -1.0f);
    for (size_t i = 0; i < count; ++i) send[i] = static_cast<float>(rank + 1 + static_cast<int>(i % 7));
    std::vector<double> samples;
    for (int it = 0; it < opt.warmup + opt.iters; ++it) {
      auto t0 = std::chrono::steady_clock::now();
      DEMO_CHECK(ncclAllReduce(send.data(), recv.data(), count, ncclFloat, ncclSum, comm, nullptr));
      auto t1 = std::chrono::steady_clock::now();
      if (it >= opt.warmup) samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    bool correct = true;
    const float base = static_cast<float>(opt.ranks * (opt.ranks + 1) / 2);
    for (size_t i = 0; i < count && correct; ++i)
      correct = recv[i] == base + static_cast<float>(opt.ranks * static_cast<int>(i % 7));
    std::sort(samples.begin(), samples.end());
    rows->push_back({bytes, samples[samples.size() / 2], correct});
    allCorrect = allCorrect && correct;
  }
  DEMO_CHECK(ncclCommDestroy(comm));
  return allCorrect;
}

void printRows(const Options& opt, const std::vector<Row>& rows, bool pass) {
  const double factor = 2.0 * (opt.ranks - 1) / opt.ranks;
  std::printf("# %s: ncclAllReduce float sum, %d ranks as %s, median of %d iterations\n", weftGetVersionString(),
              opt.ranks, opt.threads ? "threads" : "processes", opt.iters);
  std::printf("%12s %12s %12s %12s %8s\n", "bytes", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "check");
  for (const Row& r : rows) {
    const double algbw = static_cast<double>(r.bytes) / (r.medianUs * 1e3);
    std::printf("%12zu %12.2f %12.3f %12.3f %8s\n", r.bytes, r.medianUs, algbw, algbw * factor,
                r.correct ? "ok" : "WRONG");
  }
  std::printf("verdict: %s\n", pass ? "PASS (every rank's result matched the reference)" : "FAIL");
}

int runThreads(const Options& opt) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  std::vector<std::vector<Row>> rows(static_cast<size_t>(opt.ranks));
  std::vector<char> ok(static_cast<size_t>(opt.ranks), 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < opt.ranks; ++r)
    threads.emplace_back([&, r] { ok[static_cast<size_t>(r)] = runRank(opt, id, r, &rows[static_cast<size_t>(r)]); });
  for (std::thread& t : threads) t.join();
  bool pass = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
  printRows(opt, rows[0], pass);
  return pass ? 0 : 1;
}

// Child 0 makes the unique id and hands it to the others through a pipe, so
// the parent never starts a library thread before forking.
int runProcesses(const Options& opt) {
  int idPipe[2];
  int rowPipe[2];
  if (pipe(idPipe) != 0 || pipe(rowPipe) != 0) return 1;
  std::vector<pid_t> children;
  for (int r = 0; r < opt.ranks; ++r) {
    pid_t pid = fork();
    if (pid == 0) {
      ncclUniqueId id;
      if (r == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(2);
        for (int i = 1; i < opt.ranks; ++i)
          if (write(idPipe[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) _exit(2);
      } else if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
        _exit(2);
      }
      std::vector<Row> rows;
      bool ok = runRank(opt, id, r, &rows);
      if (r == 0)
        for (const Row& row : rows)
          if (write(rowPipe[1], &row, sizeof(row)) != static_cast<ssize_t>(sizeof(row))) _exit(2);
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  close(rowPipe[1]);
  std::vector<Row> rows;
  Row row;
  while (read(rowPipe[0], &row, sizeof(row)) == static_cast<ssize_t>(sizeof(row))) rows.push_back(row);
  bool pass = true;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    pass = pass && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  printRows(opt, rows, pass && !rows.empty());
  return pass ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options opt;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : "0"; };
    if (arg == "-n")
      opt.ranks = std::atoi(next());
    else if (arg == "-i")
      opt.iters = std::atoi(next());
    else if (arg == "-w")
      opt.warmup = std::atoi(next());
    else if (arg == "-e")
      opt.maxBytes = std::strtoull(next(), nullptr, 0);
    else if (arg == "--threads")
      opt.threads = true;
    else {
      std::fprintf(stderr, "usage: %s [-n ranks] [-i iters] [-w warmup] [-e maxbytes] [--threads]\n", argv[0]);
      return 2;
    }
  }
  if (opt.ranks < 1 || opt.iters < 1) {
    std::fprintf(stderr, "weft-demo: -n and -i must be at least 1\n");
    return 2;
  }
  return opt.threads ? runThreads(opt) : runProcesses(opt);
}
