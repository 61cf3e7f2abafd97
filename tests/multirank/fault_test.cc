// Fault trials: in each, one rank of four processes is killed (SIGKILL) or
// stopped (SIGSTOP) at a random moment, during init, while the ranks connect
// to their point-to-point peers (made on first use) or in the middle of
// collectives, over shared memory or across two virtual nodes (network
// transport). Every survivor must fail within a bound, with a message naming
// that rank, whether the survivors then exit or stay; and once the trial's
// processes are gone (a later init sweeps what dead ranks leave), /dev/shm
// holds nothing of theirs.
//
// WEFT_FAULT_TRIALS sets the trials per setting (10 by default);
// tests/scripts/fault_trials.sh runs the long form. Each setting prints one
// summary line: trials, bound, worst time (docs/reliability.md).
#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "nccl.h"

namespace {

constexpr int kRanks = 4;
constexpr int kBootstrapTimeoutSec = 3;  // a rank killed before reaching the root is found only by this
constexpr int kWaitTimeoutSec = 1;       // a stopped rank is found by WEFT_TIMEOUT

enum class Phase { kInit, kConnect, kCollectives };
enum class Fate { kKill, kStop };
enum class Survivors { kExit, kStay };

struct Setting {
  Phase phase;
  Fate fate;
  Survivors survivors;
  bool virtualNodes;  // two nodes of two ranks: network links between them
};

std::string name(const Setting& s) {
  const char* phase = s.phase == Phase::kInit ? "init" : s.phase == Phase::kConnect ? "connect" : "collectives";
  return std::string(phase) + "/" + (s.fate == Fate::kKill ? "SIGKILL" : "SIGSTOP") + "/survivors-" +
         (s.survivors == Survivors::kExit ? "exit" : "stay") + "/" + (s.virtualNodes ? "net" : "shm");
}

// Seconds from the fault to every survivor's failure.
double boundSec(const Setting& s) {
  const double detect = s.fate == Fate::kStop ? kWaitTimeoutSec : 0.5;
  return (s.phase == Phase::kInit ? kBootstrapTimeoutSec : detect) + 4.0;  // + scheduling on a loaded 2-core machine
}

int64_t nowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000ll + ts.tv_nsec;
}

struct Report {
  int rank;
  int result;            // the failing call's ncclResult_t (ncclSuccess: it never failed)
  int stayedCallResult;  // survivors that stay: the next call's result
  int rounds;            // calls (or exchange rounds) that succeeded before the failure
  int64_t failedAtNs;    // CLOCK_MONOTONIC, shared by the processes of this machine
  char message[480];
};

void writeAll(int fd, const void* data, size_t len) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = write(fd, p, len);
    if (n <= 0) _exit(5);
    p += n;
    len -= static_cast<size_t>(n);
  }
}

bool readAll(int fd, void* data, size_t len) {
  char* p = static_cast<char*>(data);
  while (len > 0) {
    const ssize_t n = read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

struct Pipes {
  int id[2];       // rank 0 -> the others: the unique id
  int ready[2];    // ranks -> parent: init done (one byte each)
  int report[2];   // survivors -> parent: a Report each
  int release[2];  // parent -> survivors that stay: closed when they may go
};

// Runs collectives until one fails (or 30 s pass), returning its result.
// Calls of 128 KiB through the FIFO alternate with calls of 1 MiB on
// ncclMemAlloc buffers, which run in direct mode within a node (their
// handshakes: outputs written through the writer's mapping, inputs read
// through the reader's), so a fault also lands in those waits.
ncclResult_t collectivesUntilFailure(ncclComm_t comm, int* rounds) {
  std::vector<float> buf(1 << 15, 1.0f);
  const size_t bigCount = 1 << 18;
  void* big[2] = {nullptr, nullptr};
  for (void*& b : big)
    if (ncclMemAlloc(&b, bigCount * sizeof(float)) != ncclSuccess) return ncclSystemError;
  std::fill(static_cast<float*>(big[0]), static_cast<float*>(big[0]) + bigCount, 1.0f);
  const int64_t end = nowNs() + 30 * 1000000000ll;
  ncclResult_t rc = ncclSuccess;
  while (nowNs() < end) {
    if (*rounds % 2 == 0)
      rc = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
    else
      rc = ncclAllReduce(big[0], big[1], bigCount, ncclFloat32, ncclSum, comm, nullptr);
    if (rc != ncclSuccess) break;
    ++*rounds;
  }
  // Not freed after a failure: a peer that is only slow may still read or
  // write them (docs/fifo-protocol.md); the process exits soon after.
  if (rc == ncclSuccess)
    for (void* b : big) (void)ncclMemFree(b);
  return rc;
}

// Exchanges with every other rank at once (one group of sends and receives)
// until a round fails (or 30 s pass). Point-to-point peers are connected on
// first use, so the first round sets up every connection: a fault in its
// first milliseconds lands in connection set-up.
ncclResult_t exchangesUntilFailure(ncclComm_t comm, int rank, int* rounds) {
  constexpr size_t kCount = 1024;
  std::vector<float> out(kCount * kRanks, static_cast<float>(rank)), in(kCount * kRanks, -1.0f);
  const int64_t end = nowNs() + 30 * 1000000000ll;
  ncclResult_t rc = ncclSuccess;
  while (nowNs() < end) {
    std::fill(in.begin(), in.end(), -1.0f);
    rc = ncclGroupStart();
    for (int peer = 0; peer < kRanks && rc == ncclSuccess; ++peer) {
      if (peer == rank) continue;
      rc = ncclSend(out.data() + peer * kCount, kCount, ncclFloat32, peer, comm, nullptr);
      if (rc == ncclSuccess) rc = ncclRecv(in.data() + peer * kCount, kCount, ncclFloat32, peer, comm, nullptr);
    }
    const ncclResult_t groupRc = ncclGroupEnd();
    if (rc == ncclSuccess) rc = groupRc;
    if (rc != ncclSuccess) break;
    for (int peer = 0; peer < kRanks; ++peer)
      if (peer != rank && in[peer * kCount] != static_cast<float>(peer)) _exit(6);  // wrong data: no report
    ++*rounds;
  }
  return rc;
}

[[noreturn]] void rankMain(int rank, const Setting& s, Pipes& p) {
  // A hung rank dies and shows as a failed trial instead of hanging the test
  // (SIGALRM's default action, whatever the launcher left in place).
  signal(SIGALRM, SIG_DFL);
  alarm(60);
  // Only the parent writes `release` and reads `ready` and `report`: a copy of
  // a write end left open here would keep the survivors' reads from ending.
  close(p.release[1]);
  close(p.ready[0]);
  close(p.report[0]);
  ncclUniqueId id;
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) _exit(3);
    for (int i = 1; i < kRanks; ++i) writeAll(p.id[1], &id, sizeof(id));
  } else if (!readAll(p.id[0], &id, sizeof(id))) {
    _exit(3);
  }
  Report report{};
  report.rank = rank;
  ncclComm_t comm = nullptr;
  ncclResult_t rc = ncclCommInitRank(&comm, kRanks, id, rank);
  if (rc == ncclSuccess) {
    const char one = 1;
    writeAll(p.ready[1], &one, 1);
    rc = s.phase == Phase::kConnect ? exchangesUntilFailure(comm, rank, &report.rounds)
                                    : collectivesUntilFailure(comm, &report.rounds);
  }
  report.failedAtNs = nowNs();
  report.result = rc;
  std::snprintf(report.message, sizeof(report.message), "%s", ncclGetLastError(rc == ncclSuccess ? nullptr : comm));
  if (comm != nullptr && rc != ncclSuccess && s.survivors == Survivors::kStay) {
    // Still here: the next call fails at once, with the same culprit.
    std::vector<float> buf(64, 1.0f);
    report.stayedCallResult = ncclAllReduce(buf.data(), buf.data(), buf.size(), ncclFloat32, ncclSum, comm, nullptr);
  }
  writeAll(p.report[1], &report, sizeof(report));
  if (s.survivors == Survivors::kStay) {
    char byte;
    (void)!read(p.release[0], &byte, 1);  // returns when the parent closes it
  }
  if (comm != nullptr) (void)ncclCommAbort(comm);
  _exit(0);
}

struct TrialResult {
  double worstSec = 0;
  std::string failure;      // empty: the trial passed
  bool firstRound = false;  // a survivor failed in its first call (connect: while connecting)
};

std::string checkReport(const Report& r, int victim, int64_t faultAtNs, const Setting& s, double* sec) {
  const std::string msg(r.message, strnlen(r.message, sizeof(r.message)));
  if (r.result == ncclSuccess) return "rank " + std::to_string(r.rank) + " never failed";
  *sec = std::max(0.0, static_cast<double>(r.failedAtNs - faultAtNs) / 1e9);
  if (*sec > boundSec(s))
    return "rank " + std::to_string(r.rank) + " failed after " + std::to_string(*sec) + " s: " + msg;
  const std::string v = std::to_string(victim);
  // A rank stopped during init cannot be told from a slow one until the
  // bootstrap timeout, and then only the ranks waiting on it directly know
  // whom they waited on: the others name the peer they waited on.
  // And a rank still waiting for the bootstrap root when the process hosting
  // it (rank 0) exits, after failing on the victim, learns only that.
  const bool rootGone =
      s.phase == Phase::kInit && msg.find("closed the connection before answering") != std::string::npos;
  const bool mustNameVictim = !(s.phase == Phase::kInit && s.fate == Fate::kStop) && !rootGone;
  if (mustNameVictim && msg.find("rank " + v) == std::string::npos && msg.find("ranks: " + v) == std::string::npos)
    return "rank " + std::to_string(r.rank) + " does not name rank " + v + ": " + msg;
  if (msg.find("rank ") == std::string::npos) return "rank " + std::to_string(r.rank) + " names no rank: " + msg;
  if (s.survivors == Survivors::kStay && r.stayedCallResult == ncclSuccess && r.result != ncclSuccess &&
      s.phase != Phase::kInit)
    return "rank " + std::to_string(r.rank) + ": a call after the failure succeeded";
  return "";
}

std::string shmPrefix(pid_t pid) {
  struct stat st {};
  stat("/proc/self/ns/pid", &st);
  char prefix[64];
  std::snprintf(prefix, sizeof(prefix), "weft-%llx-%d-", static_cast<unsigned long long>(st.st_ino),
                static_cast<int>(pid));
  return prefix;
}

std::vector<std::string> leftovers(const std::vector<pid_t>& pids) {
  std::vector<std::string> found;
  if (DIR* d = opendir("/dev/shm")) {
    while (const dirent* e = readdir(d))
      for (pid_t pid : pids)
        if (std::string(e->d_name).rfind(shmPrefix(pid), 0) == 0) found.push_back(e->d_name);
    closedir(d);
  }
  return found;
}

// A later init on this host, as the next job would run: it sweeps what dead ranks left.
void laterInit() {
  const pid_t pid = fork();
  if (pid == 0) {
    ncclUniqueId id;
    ncclComm_t comm = nullptr;
    const bool ok = ncclGetUniqueId(&id) == ncclSuccess && ncclCommInitRank(&comm, 1, id, 0) == ncclSuccess &&
                    ncclCommDestroy(comm) == ncclSuccess;
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  waitpid(pid, &status, 0);
}

TrialResult runTrial(const Setting& s, std::mt19937& rng) {
  Pipes p{};
  if (pipe(p.id) != 0 || pipe(p.ready) != 0 || pipe(p.report) != 0 || pipe(p.release) != 0) return {0, "pipe"};
  const int victim = 1 + static_cast<int>(rng() % (kRanks - 1));  // rank 0 hosts the bootstrap root and the id
  std::vector<pid_t> pids;
  for (int r = 0; r < kRanks; ++r) {
    const pid_t pid = fork();
    if (pid == 0) rankMain(r, s, p);
    pids.push_back(pid);
  }
  TrialResult result;
  if (s.phase != Phase::kInit) {
    char byte;
    for (int r = 0; r < kRanks; ++r)
      if (!readAll(p.ready[0], &byte, 1)) result.failure = "a rank did not finish init";
    // Connecting starts as each rank's init returns and takes a few ms.
    usleep(static_cast<useconds_t>(rng() % (s.phase == Phase::kConnect ? 3000 : 20000)));
  } else {
    usleep(static_cast<useconds_t>(rng() % 40000));
  }
  const int64_t faultAtNs = nowNs();
  kill(pids[static_cast<size_t>(victim)], s.fate == Fate::kKill ? SIGKILL : SIGSTOP);
  close(p.report[1]);
  for (int n = 0; n < kRanks - 1 && result.failure.empty(); ++n) {
    Report r{};
    if (!readAll(p.report[0], &r, sizeof(r))) {
      result.failure = "a survivor died without reporting";
      break;
    }
    double sec = 0;
    result.failure = checkReport(r, victim, faultAtNs, s, &sec);
    result.worstSec = std::max(result.worstSec, sec);
    if (r.rounds == 0 && r.result != ncclSuccess) result.firstRound = true;
  }
  close(p.release[1]);
  kill(pids[static_cast<size_t>(victim)], SIGKILL);
  for (pid_t pid : pids) waitpid(pid, nullptr, 0);
  for (int* fds : {p.id, p.ready, p.report, p.release})
    for (int i = 0; i < 2; ++i) close(fds[i]);
  laterInit();
  const std::vector<std::string> left = leftovers(pids);
  if (result.failure.empty() && !left.empty()) result.failure = "left in /dev/shm: " + left.front();
  return result;
}

int trialsPerSetting() {
  const char* env = std::getenv("WEFT_FAULT_TRIALS");
  return env != nullptr && std::atoi(env) > 0 ? std::atoi(env) : 10;
}

class FaultTrials : public ::testing::TestWithParam<Setting> {
 protected:
  void SetUp() override {
    setenv("WEFT_BACKEND", "host", 1);
    setenv("WEFT_TIMEOUT", std::to_string(kWaitTimeoutSec).c_str(), 1);
    setenv("WEFT_BOOTSTRAP_TIMEOUT", std::to_string(kBootstrapTimeoutSec).c_str(), 1);
    setenv("NCCL_DEBUG", "NONE", 1);
    if (GetParam().virtualNodes) setenv("WEFT_RANKS_PER_NODE", "2", 1);
  }
  void TearDown() override { unsetenv("WEFT_RANKS_PER_NODE"); }
};

TEST_P(FaultTrials, SurvivorsFailInBoundNamingTheRank) {
  const Setting s = GetParam();
  std::mt19937 rng(static_cast<unsigned>(nowNs()));
  const int trials = trialsPerSetting();
  double worst = 0;
  int failed = 0, firstRound = 0;
  for (int t = 0; t < trials; ++t) {
    const TrialResult r = runTrial(s, rng);
    worst = std::max(worst, r.worstSec);
    firstRound += r.firstRound ? 1 : 0;
    if (!r.failure.empty()) {
      ++failed;
      ADD_FAILURE() << name(s) << " trial " << t << ": " << r.failure;
    }
  }
  // For connect, how many trials hit the first round (connection set-up).
  std::printf("fault trials %s: %d trials, %d failed, bound %.1f s, worst %.2f s, first call hit in %d\n",
              name(s).c_str(), trials, failed, boundSec(s), worst, firstRound);
}

std::vector<Setting> allSettings() {
  std::vector<Setting> out;
  for (Phase phase : {Phase::kInit, Phase::kConnect, Phase::kCollectives})
    for (Fate fate : {Fate::kKill, Fate::kStop})
      for (Survivors survivors : {Survivors::kExit, Survivors::kStay})
        for (bool net : {false, true}) out.push_back({phase, fate, survivors, net});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Settings, FaultTrials, ::testing::ValuesIn(allSettings()),
                         [](const ::testing::TestParamInfo<Setting>& info) {
                           std::string n = name(info.param);
                           std::replace_if(
                               n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return n;
                         });

}  // namespace
