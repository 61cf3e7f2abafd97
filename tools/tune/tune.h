// weft-tune: measures this machine through Weft itself (weft-perf's local
// ranks) and writes a tuning file (docs/tuning.md) for WEFT_TUNING_FILE.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace weft::tune {

// One weft-perf run: 2 local ranks, a ring AllReduce (float sum) at the
// given sizes, the slowest rank's median per size.
struct PerfRun {
  bool threads = false;                                  // ranks as threads (else processes)
  std::vector<std::pair<std::string, std::string>> env;  // set in the child (NCCL_PROTO, ...)
  size_t smallBytes = 8;
  size_t largeBytes = 4 << 20;
  int iters = 50;
};

// Times in microseconds at smallBytes and largeBytes; false (and `why`)
// when weft-perf could not run or printed no time.
bool runPerf(const std::string& perfPath, const PerfRun& run, double* smallUs, double* largeUs, std::string* why);

// A local memcpy and a float sum loop over `bytes`: GB/s, median of `reps`.
double measureCopyGBs(size_t bytes, int reps);
double measureReduceGBs(size_t bytes, int reps);

double median(std::vector<double> values);

}  // namespace weft::tune
