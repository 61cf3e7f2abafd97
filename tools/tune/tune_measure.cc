// The measurements behind weft-tune: weft-perf runs in a child process,
// and local copy and reduce loops.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "tune/tune.h"

namespace weft::tune {
namespace {

// Runs argv with `env` added; returns its stdout, or false.
bool capture(const std::vector<std::string>& argv, const std::vector<std::pair<std::string, std::string>>& env,
             std::string* out, std::string* why) {
  int fds[2];
  if (pipe(fds) != 0) {
    *why = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  const pid_t pid = fork();
  if (pid < 0) {
    *why = std::string("fork: ") + std::strerror(errno);
    return false;
  }
  if (pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    const int null = open("/dev/null", O_WRONLY);
    if (null >= 0 && std::getenv("WEFT_TUNE_VERBOSE") == nullptr) dup2(null, STDERR_FILENO);
    close(fds[0]);
    close(fds[1]);
    for (const auto& [name, value] : env) setenv(name.c_str(), value.c_str(), 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  close(fds[1]);
  char buffer[4096];
  for (ssize_t n; (n = read(fds[0], buffer, sizeof buffer)) > 0;) out->append(buffer, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    *why = argv[0] + " exited with status " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : -1) +
           " (WEFT_TUNE_VERBOSE=1 shows its errors)";
    return false;
  }
  return true;
}

// weft-perf --csv: size is field 1, the out-of-place time field 6.
bool timeAt(const std::string& csv, size_t bytes, double* us) {
  std::istringstream lines(csv);
  for (std::string line; std::getline(lines, line);) {
    std::vector<std::string> fields;
    std::istringstream cells(line);
    for (std::string cell; std::getline(cells, cell, ',');) fields.push_back(cell);
    if (fields.size() < 7 || fields[1] != std::to_string(bytes) || fields[6].empty()) continue;
    *us = std::strtod(fields[6].c_str(), nullptr);
    return *us > 0;
  }
  return false;
}

double secondsOf(const std::chrono::steady_clock::duration& d) { return std::chrono::duration<double>(d).count(); }

// weft-perf on 2 local ranks, unchecked, the slowest rank's median per size, as CSV.
std::vector<std::string> perfArgv(const std::string& perfPath, const std::string& coll, size_t minBytes,
                                  size_t maxBytes, size_t factor, int iters, int warmup, bool threads) {
  std::vector<std::string> argv = {perfPath,   coll,
                                   "-np",      "2",
                                   "-b",       std::to_string(minBytes),
                                   "-e",       std::to_string(maxBytes),
                                   "-f",       std::to_string(factor),
                                   "-n",       std::to_string(iters),
                                   "-w",       std::to_string(warmup),
                                   "-c",       "0",
                                   "-a",       "3",
                                   "--median", "--csv"};
  if (threads) argv.push_back("--threads");
  return argv;
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

bool runPerf(const std::string& perfPath, const PerfRun& run, double* smallUs, double* largeUs, std::string* why) {
  std::vector<std::string> argv = perfArgv(perfPath, "allreduce", run.smallBytes, run.largeBytes,
                                           run.largeBytes / run.smallBytes, run.iters, 5, run.threads);
  // Every figure is a ring's, on one channel, through the FIFO, whatever
  // the caller's environment says.
  std::vector<std::pair<std::string, std::string>> env = {
      {"WEFT_BACKEND", "host"},    {"NCCL_ALGO", "Ring"},    {"WEFT_DIRECT", "0"},         {"NCCL_MAX_NCHANNELS", "1"},
      {"NCCL_MIN_NCHANNELS", "1"}, {"WEFT_TUNING_FILE", ""}, {"NCCL_TUNER_PLUGIN", "none"}};
  for (const auto& e : run.env) env.push_back(e);
  std::string out;
  if (!capture(argv, env, &out, why)) return false;
  if (!timeAt(out, run.smallBytes, smallUs) || !timeAt(out, run.largeBytes, largeUs)) {
    *why = "weft-perf printed no time for " + std::to_string(run.smallBytes) + " or " + std::to_string(run.largeBytes) +
           " bytes";
    return false;
  }
  return true;
}

bool runSweep(const std::string& perfPath, const Sweep& sweep, std::vector<std::pair<size_t, double>>* times,
              std::string* why) {
  std::vector<std::string> argv =
      perfArgv(perfPath, sweep.coll, sweep.minBytes, sweep.maxBytes, 2, sweep.iters, sweep.warmup, sweep.threads);
  for (const std::string& a : sweep.args) argv.push_back(a);
  std::string out;
  if (!capture(argv, sweep.env, &out, why)) return false;
  times->clear();
  for (size_t bytes = sweep.minBytes; bytes <= sweep.maxBytes; bytes *= 2) {
    double us = 0;
    if (!timeAt(out, bytes, &us)) {
      *why = "weft-perf " + sweep.coll + " printed no time for " + std::to_string(bytes) + " bytes";
      return false;
    }
    times->emplace_back(bytes, us);
  }
  return true;
}

double measureCopyGBs(size_t bytes, int reps) {
  std::vector<char> src(bytes, 1), dst(bytes, 0);
  std::vector<double> gbs;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double s = secondsOf(std::chrono::steady_clock::now() - t0);
    if (r > 0) gbs.push_back(static_cast<double>(bytes) / s / 1e9);  // the first touches the pages
  }
  if (dst[bytes / 2] != 1) return 0;
  return median(gbs);
}

double measureReduceGBs(size_t bytes, int reps) {
  const size_t n = bytes / sizeof(float);
  std::vector<float> acc(n, 1.0f), in(n, 2.0f);
  std::vector<double> gbs;
  for (int r = 0; r < reps + 1; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    float* a = acc.data();
    const float* b = in.data();
    for (size_t i = 0; i < n; ++i) a[i] += b[i];
    const double s = secondsOf(std::chrono::steady_clock::now() - t0);
    if (r > 0) gbs.push_back(static_cast<double>(bytes) / s / 1e9);
  }
  if (acc[n / 2] < 2.0f) return 0;  // keeps the loop
  return median(gbs);
}

}  // namespace weft::tune
