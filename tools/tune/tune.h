// weft-tune: measures this machine through Weft itself (weft-perf's local
// ranks) and writes a tuning file (docs/tuning.md) for WEFT_TUNING_FILE.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "tuning/figures.h"

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

// One weft-perf run of `coll` on 2 local ranks, from minBytes to maxBytes by
// factor 2, with `args` added (--touch, --private-buffers) and only `env`
// set in the child (on top of the caller's environment, as given): the
// slowest rank's median out-of-place time per size, in size order.
struct Sweep {
  std::string coll;
  bool threads = false;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  size_t minBytes = 4 << 10;
  size_t maxBytes = 1 << 20;
  int iters = 40;
  // Per size: a short run's first calls can find both ranks on one core
  // until Weft moves one (common/core_share.h), ~10 us a hand-off.
  int warmup = 300;
};
bool runSweep(const std::string& perfPath, const Sweep& sweep, std::vector<std::pair<size_t, double>>* times,
              std::string* why);

// Direct mode's thresholds (tune_direct.cc): for each collective with a
// direct form and each link within a node, the smallest size of the sweep
// from which direct mode is ahead of the FIFO at every larger size too, on
// the geometric mean of the variants; set into *figures. False (and `why`)
// when a run failed.
bool measureDirect(const std::string& perfPath, int reps, weft::tuning::TuningFigures* figures, std::string* why);

// A local memcpy and a float sum loop over `bytes`: GB/s, median of `reps`.
double measureCopyGBs(size_t bytes, int reps);
double measureReduceGBs(size_t bytes, int reps);

double median(std::vector<double> values);

}  // namespace weft::tune
