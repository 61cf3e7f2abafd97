// Direct mode's thresholds, measured: each collective with a direct form,
// ring under Simple, direct mode forced on at every size (a tuning file
// whose thresholds are 1 byte) against forced off (WEFT_DIRECT=0, the same
// file), 2 ranks, 4 KiB to 1 MiB by factor 2. Variants, because which is
// ahead depends on what the caller does with its buffers:
//   plain              the call alone;
//   --touch            each rank reads its whole output after every call
//                      (direct writes leave the lines in the writer's cache);
//   --private-buffers  (processes only) buffers a peer cannot map, where
//                      direct mode's handshake buys nothing (without
//                      WEFT_CMA) and is pure cost.
// Per size, the geometric mean over the variants of direct / FIFO (each the
// median of the reps); the threshold is the smallest size from which that
// mean stays below 1 at every larger size of the sweep, or never
// (kDirectNeverBytes) when direct mode is not ahead at 1 MiB.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "tune/tune.h"

namespace weft::tune {
namespace {

using tuning::CollKind;
using tuning::Figure;
using tuning::LinkType;

struct Coll {
  const char* perfName;
  CollKind kind;
  Figure threadsFigure, shmFigure;
};

const Coll kColls[] = {
    {"allreduce", CollKind::kAllReduce, Figure::kThreadsDirectAllReduceMin, Figure::kShmDirectAllReduceMin},
    {"reducescatter", CollKind::kReduceScatter, Figure::kThreadsDirectReduceScatterMin,
     Figure::kShmDirectReduceScatterMin},
    {"allgather", CollKind::kAllGather, Figure::kThreadsDirectAllGatherMin, Figure::kShmDirectAllGatherMin},
    {"broadcast", CollKind::kBroadcast, Figure::kThreadsDirectBroadcastMin, Figure::kShmDirectBroadcastMin},
};

// A tuning file that makes every direct-capable ring call direct.
bool writeAlwaysDirectFile(std::string* path, std::string* why) {
  char name[] = "/tmp/weft-tune-direct-XXXXXX";
  const int fd = mkstemp(name);
  if (fd < 0) {
    *why = "cannot make a temporary tuning file in /tmp";
    return false;
  }
  close(fd);
  std::ofstream file(name);
  file << "version " << tuning::kTuningFileVersion << "\n";
  for (int i = static_cast<int>(Figure::kThreadsDirectAllReduceMin);
       i <= static_cast<int>(Figure::kShmDirectBroadcastMin); ++i)
    file << tuning::kFigureKeys[i] << " 1\n";
  if (!file) {
    *why = std::string("cannot write ") + name;
    unlink(name);
    return false;
  }
  *path = name;
  return true;
}

// The environment of a sweep with direct mode on (every direct-capable ring
// call, through `file`) or off (the same file, WEFT_DIRECT=0).
std::vector<std::pair<std::string, std::string>> sweepEnv(const std::string& file, bool direct) {
  return {{"WEFT_BACKEND", "host"},
          {"NCCL_ALGO", "Ring"},
          {"NCCL_PROTO", "Simple"},
          {"WEFT_TUNING_FILE", file},
          {"WEFT_DIRECT", direct ? "1" : "0"},
          {"NCCL_TUNER_PLUGIN", "none"},
          {"WEFT_CMA", "0"}};
}

// Medians per size of `reps` sweeps with direct mode on and `reps` with it
// off, alternated so that a slow spell of the machine falls on both.
bool sweepOnOff(const std::string& perf, Sweep sweep, const std::string& file, int reps, std::vector<double>* direct,
                std::vector<double>* fifo, std::string* why) {
  std::vector<std::vector<double>> runs[2];
  for (int r = 0; r < reps; ++r)
    for (int on = 0; on < 2; ++on) {
      sweep.env = sweepEnv(file, on == 1);
      std::vector<std::pair<size_t, double>> times;
      if (!runSweep(perf, sweep, &times, why)) return false;
      runs[on].resize(times.size());
      for (size_t i = 0; i < times.size(); ++i) runs[on][i].push_back(times[i].second);
    }
  direct->clear();
  fifo->clear();
  for (const std::vector<double>& at : runs[1]) direct->push_back(median(at));
  for (const std::vector<double>& at : runs[0]) fifo->push_back(median(at));
  return direct->size() == fifo->size();
}

}  // namespace

bool measureDirect(const std::string& perfPath, int reps, tuning::TuningFigures* figures, std::string* why) {
  std::string file;
  if (!writeAlwaysDirectFile(&file, why)) return false;
  bool ok = true;
  for (bool threads : {true, false}) {
    std::vector<std::vector<std::string>> variants = {{}, {"--touch"}};
    if (!threads) variants.push_back({"--private-buffers"});
    for (const Coll& c : kColls) {
      Sweep sweep;
      sweep.coll = c.perfName;
      sweep.threads = threads;
      std::vector<double> logRatio;
      for (const std::vector<std::string>& args : variants) {
        sweep.args = args;
        std::vector<double> direct, fifo;
        ok = sweepOnOff(perfPath, sweep, file, reps, &direct, &fifo, why);
        if (!ok) break;
        logRatio.resize(direct.size(), 0.0);
        for (size_t i = 0; i < direct.size(); ++i) logRatio[i] += std::log(direct[i] / fifo[i]);
      }
      if (!ok) break;
      std::string ratios;
      std::vector<double> ratio(logRatio.size());
      for (size_t i = 0; i < ratio.size(); ++i) {
        ratio[i] = std::exp(logRatio[i] / static_cast<double>(variants.size()));
        char item[48];
        std::snprintf(item, sizeof item, " %zuK %.2f", (sweep.minBytes << i) >> 10, ratio[i]);
        ratios += item;
      }
      // From the largest size down, while direct mode stays ahead.
      double from = tuning::kDirectNeverBytes;
      for (size_t i = ratio.size(); i-- > 0 && ratio[i] < 1.0;) from = static_cast<double>(sweep.minBytes << i);
      const Figure figure = threads ? c.threadsFigure : c.shmFigure;
      figures->value[static_cast<int>(figure)] = from;
      figures->fromFile[static_cast<int>(figure)] = true;
      std::fprintf(
          stderr, "weft-tune: direct, %-9s %-13s direct/FIFO:%s -> %s\n", threads ? "threads," : "processes,",
          tuning::collKindName(c.kind), ratios.c_str(),
          from >= tuning::kDirectNeverBytes ? "never" : (std::to_string(static_cast<long long>(from)) + " B").c_str());
    }
    if (!ok) break;
  }
  unlink(file.c_str());
  return ok;
}

}  // namespace weft::tune
