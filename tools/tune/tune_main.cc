// weft-tune: measures this machine through Weft and writes a tuning file.
//   weft-tune [-o FILE] [--reps N] [--perf PATH] [--no-net] [--no-direct]
// Every link figure is a 2-rank ring AllReduce forced through weft-perf (one
// channel, through the FIFO), fitted to the cost model's ring:
//   t(S) = 2 latency + S / bandwidth + (S / 2) / reduce
// at 8 bytes (latency: the call's own overhead is shared over its two
// hand-offs) and at a large size (bandwidth); copy and reduce bandwidth
// come from local loops; direct mode's thresholds from sweeps with it on
// and off (tune_direct.cc). The median of --reps runs is kept.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

#include "tune/tune.h"
#include "tuning/figures.h"

namespace {

using weft::tuning::Figure;
using weft::tuning::TuningFigures;

struct Options {
  std::string out;  // empty: stdout
  std::string perf;
  int reps = 3;
  bool net = true;
  bool direct = true;
};

void usage() {
  std::fprintf(stdout,
               "usage: weft-tune [-o FILE] [--reps N] [--perf PATH] [--no-net] [--no-direct]\n"
               "  -o FILE      write the tuning file here (default: stdout)\n"
               "  --reps N     runs per figure, the median kept (default 3, 1..21)\n"
               "  --perf PATH  the weft-perf to run (default: next to weft-tune)\n"
               "  --no-net     keep the network figures' defaults (no run between virtual nodes)\n"
               "  --no-direct  keep direct mode's thresholds at their defaults (no sweeps)\n"
               "Use the file with WEFT_TUNING_FILE=FILE (docs/tuning.md).\n");
}

// False: stop, with *exitCode (0 for --help).
bool parse(int argc, char** argv, Options* o, int* exitCode) {
  *exitCode = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool hasValue = i + 1 < argc;
    if (a == "-h" || a == "--help") {
      usage();
      *exitCode = 0;
      return false;
    } else if (a == "-o" && hasValue) {
      o->out = argv[++i];
    } else if (a == "--reps" && hasValue) {
      o->reps = std::atoi(argv[++i]);
      if (o->reps < 1 || o->reps > 21) {
        std::fprintf(stderr, "weft-tune: --reps %s: expected 1 to 21\n", argv[i]);
        return false;
      }
    } else if (a == "--perf" && hasValue) {
      o->perf = argv[++i];
    } else if (a == "--no-net") {
      o->net = false;
    } else if (a == "--no-direct") {
      o->direct = false;
    } else {
      std::fprintf(stderr, "weft-tune: unknown argument \"%s\" (weft-tune --help lists them)\n", a.c_str());
      return false;
    }
  }
  if (o->perf.empty()) {
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    std::string dir = n > 0 ? std::string(self, static_cast<size_t>(n)) : "";
    dir = dir.substr(0, dir.rfind('/') + 1);
    o->perf = dir + "weft-perf";
  }
  if (access(o->perf.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "weft-tune: --perf %s: not an executable weft-perf\n", o->perf.c_str());
    return false;
  }
  return true;
}

// A link's latency and bandwidth under one protocol, fitted to the ring.
struct Fit {
  double latencyUs;
  double gbs;
  double largeUs;  // the measured time it came from
};

// t(8) = 2 latency; t(S) - 2 latency - S/(2 reduce) = S / bandwidth. The
// bandwidth term is kept at a tenth of t(S) at least: a wire term swallowed
// by noise reads as a very fast link, not a negative one.
Fit fit(double smallUs, double largeUs, double largeBytes, double reduceGBs) {
  Fit f;
  f.largeUs = largeUs;
  f.latencyUs = smallUs / 2;
  const double wireUs = std::max(largeUs - smallUs - largeBytes / 2 / (reduceGBs * 1e3), largeUs / 10);
  f.gbs = largeBytes / (wireUs * 1e3);
  return f;
}

// The median of `reps` runs of `run`; false when any run fails.
bool measure(const Options& o, const weft::tune::PerfRun& run, double reduceGBs, const char* what, Fit* out) {
  std::vector<double> small, large;
  for (int r = 0; r < o.reps; ++r) {
    double s = 0, l = 0;
    std::string why;
    if (!weft::tune::runPerf(o.perf, run, &s, &l, &why)) {
      std::fprintf(stderr, "weft-tune: %s: %s\n", what, why.c_str());
      return false;
    }
    small.push_back(s);
    large.push_back(l);
  }
  const double s = weft::tune::median(small), l = weft::tune::median(large);
  *out = fit(s, l, static_cast<double>(run.largeBytes), reduceGBs);
  std::fprintf(stderr, "weft-tune: %-24s %zu B %8.2f us, %zu B %9.2f us -> %.3f us per hand-off, %.3f GB/s\n", what,
               run.smallBytes, s, run.largeBytes, l, out->latencyUs, out->gbs);
  return true;
}

void set(TuningFigures* f, Figure figure, double value) {
  f->value[static_cast<int>(figure)] = value;
  f->fromFile[static_cast<int>(figure)] = true;
}

std::string header(const Options& o, bool net, bool direct) {
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  char when[64];
  const std::time_t now = std::time(nullptr);
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  std::string h = "Weft tuning file, written by weft-tune (docs/tuning.md): use it with WEFT_TUNING_FILE.\n";
  h += std::string("Measured on ") + host + ", " + std::to_string(std::thread::hardware_concurrency()) + " cores, " +
       when + ", median of " + std::to_string(o.reps) + " runs per figure.\n";
  h += "Hand-offs and bandwidths: 2-rank ring AllReduce through weft-perf (one channel, FIFO), fitted to\n";
  h += "t(S) = 2 latency + S / bandwidth + (S / 2) / reduce; the latency includes the call's own overhead.\n";
  h += "oversubscribed.latency_factor is the built-in default (not measured: it would need more ranks than cores).\n";
  if (!net) h += "The net.* figures are the built-in defaults (--no-net, or the run between virtual nodes failed).\n";
  if (direct) {
    h += "Direct mode's thresholds: ring, Simple, on against off at 4 KiB-1 MiB by 2, the geometric mean of "
         "direct/FIFO\n";
    h += "over the call alone, --touch and (processes) --private-buffers; from the smallest size ahead at every\n";
    h += "larger size (1e+15: never ahead).\n";
  } else {
    h += "The *.direct.* thresholds are the built-in defaults (--no-direct).\n";
  }
  return h;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  int exitCode = 0;
  if (!parse(argc, argv, &o, &exitCode)) return exitCode;
  const auto start = std::chrono::steady_clock::now();
  TuningFigures f = weft::tuning::defaultFigures(true);
  const double copy = weft::tune::measureCopyGBs(64 << 20, 5);
  const double reduce = weft::tune::measureReduceGBs(64 << 20, 5);
  if (copy <= 0 || reduce <= 0) {
    std::fprintf(stderr, "weft-tune: the local copy or reduce loop gave no time\n");
    return 1;
  }
  set(&f, Figure::kCopyGBs, copy);
  set(&f, Figure::kReduceGBs, reduce);
  std::fprintf(stderr, "weft-tune: local copy %.2f GB/s, reduce %.2f GB/s\n", copy, reduce);

  struct Case {
    bool threads;
    int proto;
    Figure lat, gbs;
    const char* what;
  };
  const Case cases[] = {
      {true, 0, Figure::kThreadsSimpleLatUs, Figure::kThreadsSimpleGBs, "threads, Simple"},
      {true, 1, Figure::kThreadsLLLatUs, Figure::kThreadsLLGBs, "threads, LL"},
      {true, 2, Figure::kThreadsLL128LatUs, Figure::kThreadsLL128GBs, "threads, LL128"},
      {false, 0, Figure::kShmSimpleLatUs, Figure::kShmSimpleGBs, "processes (shm), Simple"},
      {false, 1, Figure::kShmLLLatUs, Figure::kShmLLGBs, "processes (shm), LL"},
      {false, 2, Figure::kShmLL128LatUs, Figure::kShmLL128GBs, "processes (shm), LL128"},
  };
  static const char* const kProtoNames[] = {"Simple", "LL", "LL128"};
  double threadsSimpleLargeUs = 0;
  for (const Case& c : cases) {
    weft::tune::PerfRun run;
    run.threads = c.threads;
    run.env = {{"NCCL_PROTO", kProtoNames[c.proto]}};
    // The line protocols are slow per byte: a smaller large size.
    run.largeBytes = c.proto ? (64 << 10) : (4 << 20);
    Fit fitted;
    if (!measure(o, run, reduce, c.what, &fitted)) return 1;
    set(&f, c.lat, fitted.latencyUs);
    set(&f, c.gbs, fitted.gbs);
    if (c.threads && c.proto == 0) threadsSimpleLargeUs = fitted.largeUs;
  }

  // A second channel: t(2) = t(1) / 2 + start-up, at 4 MiB between threads.
  {
    weft::tune::PerfRun run;
    run.threads = true;
    run.env = {{"NCCL_PROTO", "Simple"}, {"NCCL_MIN_NCHANNELS", "2"}, {"NCCL_MAX_NCHANNELS", "2"}};
    std::vector<double> two;
    for (int r = 0; r < o.reps; ++r) {
      double s = 0, l = 0;
      std::string why;
      if (!weft::tune::runPerf(o.perf, run, &s, &l, &why)) {
        std::fprintf(stderr, "weft-tune: two channels: %s\n", why.c_str());
        return 1;
      }
      two.push_back(l);
    }
    const double t2 = weft::tune::median(two);
    const double startup = std::max(1.0, t2 - threadsSimpleLargeUs / 2);
    set(&f, Figure::kChannelUs, startup);
    std::fprintf(stderr, "weft-tune: two channels, 4 MiB %9.2f us -> %.2f us start-up per channel\n", t2, startup);
  }

  bool netMeasured = false;
  if (o.net) {
    weft::tune::PerfRun run;
    run.env = {{"NCCL_PROTO", "Simple"}, {"WEFT_RANKS_PER_NODE", "1"}};
    run.largeBytes = 1 << 20;
    run.iters = 20;
    Fit fitted;
    if (measure(o, run, reduce, "network (virtual nodes)", &fitted)) {
      set(&f, Figure::kNetSimpleLatUs, fitted.latencyUs);
      set(&f, Figure::kNetSimpleGBs, fitted.gbs);
      netMeasured = true;
    }
  }

  if (o.direct) {
    std::string why;
    if (!weft::tune::measureDirect(o.perf, o.reps, &f, &why)) {
      std::fprintf(stderr, "weft-tune: direct mode: %s\n", why.c_str());
      return 1;
    }
  }

  const std::string text = weft::tuning::formatTuningFile(f, header(o, netMeasured, o.direct));
  // What is written must read back as the same figures.
  auto back = weft::tuning::parseTuningFile(text, "weft-tune output", weft::tuning::defaultFigures(true));
  if (!back.ok()) {
    std::fprintf(stderr, "weft-tune: its own output does not parse: %s\n", back.status().message().c_str());
    return 1;
  }
  if (o.out.empty()) {
    std::fputs(text.c_str(), stdout);
  } else {
    std::ofstream file(o.out);
    file << text;
    if (!file) {
      std::fprintf(stderr, "weft-tune: -o %s: cannot write the file\n", o.out.c_str());
      return 1;
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr, "weft-tune: done in %.1f s%s%s\n", seconds, o.out.empty() ? "" : ", wrote ", o.out.c_str());
  return 0;
}
