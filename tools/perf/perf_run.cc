// One rank's sweep: sizes x types x ops x roots, checked, timed, reduced
// across ranks, printed by rank 0 as nccl-tests prints (or JSON/CSV).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "perf/perf.h"
#include "weft.h"

namespace weft::perf {
namespace {

using Clock = std::chrono::steady_clock;

struct Measure {
  double us = 0;
  int64_t wrong = 0;
  bool valid = false;
};

struct Row {
  size_t bytes, count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  Measure oop, ip;
};

// One rank this thread drives, with its buffers.
struct Local {
  ncclComm_t comm;
  int rank;
  std::unique_ptr<Buffers> b;
  std::unique_ptr<Buffers> scratch;
};
using Locals = std::vector<Local>;

// Calls f(local) for every rank of the thread: alone for one rank, in one
// group for several (-g), so that no rank waits for a call not yet made.
template <typename F>
ncclResult_t forEachRank(const Locals& ls, F&& f) {
  if (ls.size() == 1) return f(ls[0]);
  ncclResult_t rc = ncclGroupStart();
  for (const Local& l : ls)
    if (rc == ncclSuccess) rc = f(l);
  const ncclResult_t ended = ncclGroupEnd();
  return rc != ncclSuccess ? rc : ended;
}

void syncAll(const Locals& ls) {
  for (const Local& l : ls) l.b->sync();
}

// Combines one value per rank across all ranks (sum, min or max) through
// the library; every rank of the thread gets the same result.
double acrossRanks(const Locals& ls, const std::function<double(const Local&)>& value, ncclRedOp_t op) {
  const ncclResult_t rc = forEachRank(ls, [&](const Local& l) {
    const double v = value(l);
    l.scratch->upload(l.scratch->send(), &v, sizeof(v));
    return ncclAllReduce(l.scratch->send(), l.scratch->recv(), 1, ncclFloat64, op, l.comm,
                         static_cast<cudaStream_t>(l.scratch->stream()));
  });
  if (rc != ncclSuccess) return -1;
  double out = 0;
  for (const Local& l : ls) l.scratch->sync();
  ls[0].scratch->download(&out, ls[0].scratch->recv(), sizeof(out));
  return out;
}

// What one measurement calls: the collective, its arguments and the ranks.
struct Call {
  const Options& opt;
  Coll coll;
  Counts c;
  ncclDataType_t type;
  ncclRedOp_t op;
  int root;
  bool inPlace;
  const Locals& ls;
  int nranks;
};

// One iteration: -m operations of every rank of the thread, in one group
// when more than one.
ncclResult_t runIteration(const Call& k) {
  auto one = [&](const Local& l) {
    return runColl(k.coll, k.c, k.type, k.op, k.root, k.inPlace, *l.b, l.comm, l.rank, k.nranks);
  };
  if (k.opt.aggIters == 1) return forEachRank(k.ls, one);
  ncclResult_t rc = ncclGroupStart();
  for (int m = 0; m < k.opt.aggIters && rc == ncclSuccess; ++m) rc = forEachRank(k.ls, one);
  const ncclResult_t ended = ncclGroupEnd();
  return rc != ncclSuccess ? rc : ended;
}

// The number of wrong elements after one checked call on every rank.
int64_t checkOnce(const Call& k, ncclResult_t* rc) {
  for (const Local& l : k.ls) fillCheck(k.coll, k.c, k.type, k.op, k.inPlace, *l.b, l.rank);
  *rc = forEachRank(k.ls, [&](const Local& l) {
    return runColl(k.coll, k.c, k.type, k.op, k.root, k.inPlace, *l.b, l.comm, l.rank, k.nranks);
  });
  if (*rc != ncclSuccess) return -1;
  syncAll(k.ls);
  int64_t wrong = 0;
  for (const Local& l : k.ls)
    wrong += verifyCheck(k.coll, k.c, k.type, k.op, k.root, k.inPlace, *l.b, l.rank, k.nranks);
  return wrong;
}

volatile uint64_t touchSink;  // keeps touchOutputs' reads

// --touch: each rank of this thread reads its whole output (host memory),
// as the program that asked for the result would.
void touchOutputs(const Call& k) {
  uint64_t sum = 0;
  const size_t bytes = k.c.recvElems * typeSize(k.type);
  for (const Local& l : k.ls) {
    if (l.b->onDevice()) continue;
    const auto* out = static_cast<const unsigned char*>(l.b->recv());  // in place too: the output is recv's
    for (size_t i = 0; i + sizeof(uint64_t) <= bytes; i += sizeof(uint64_t)) {
      uint64_t word;
      std::memcpy(&word, out + i, sizeof word);
      sum += word;
    }
  }
  touchSink = sum;
}

// One timed call: the call, then the outputs' reads when --touch asks.
ncclResult_t timedIteration(const Call& k) {
  const ncclResult_t rc = runIteration(k);
  if (rc == ncclSuccess && k.opt.touch) {
    syncAll(k.ls);
    touchOutputs(k);
  }
  return rc;
}

// -n iterations, with a wait after each when -z asks.
ncclResult_t timedBatch(const Call& k) {
  ncclResult_t rc = ncclSuccess;
  for (int i = 0; i < k.opt.iters && rc == ncclSuccess; ++i) {
    rc = timedIteration(k);
    if (k.opt.blocking != 0) syncAll(k.ls);
  }
  return rc;
}

// The batch -G captures: no waits (a stream being captured cannot be waited on).
ncclResult_t capturedBatch(void* context) {
  const Call& k = *static_cast<const Call*>(context);
  ncclResult_t rc = ncclSuccess;
  for (int i = 0; i < k.opt.iters && rc == ncclSuccess; ++i) rc = runIteration(k);
  return rc;
}

// Microseconds per operation. By default as nccl-tests: the batch of -n
// iterations timed whole (one wait at its end unless -z), divided by the
// operations it ran. --median: each iteration timed alone, the median taken.
// -G: the batch captured once as a CUDA graph, replayed -G times.
double timeIt(const Call& k, ncclResult_t* rc) {
  for (int i = 0; i < k.opt.warmup && *rc == ncclSuccess; ++i) *rc = runIteration(k);
  syncAll(k.ls);
  const int perBatch = k.opt.iters * k.opt.aggIters;
  if (k.opt.cudaGraphs > 0) {
    std::string why;
    const double us = replayAsGraph(*k.ls[0].b, k.opt.cudaGraphs, capturedBatch, const_cast<Call*>(&k), rc, &why);
    if (us < 0 && *rc == ncclSuccess) {
      std::fprintf(stderr, "weft-perf: rank %d: -G %d: %s\n", k.ls[0].rank, k.opt.cudaGraphs, why.c_str());
      *rc = ncclInvalidUsage;
    }
    return us / perBatch;
  }
  if (!k.opt.median) {
    const auto t0 = Clock::now();
    *rc = timedBatch(k);
    syncAll(k.ls);
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / perBatch;
  }
  // A sample of --sample iterations back to back: one clock reading per
  // sample, so a call shorter than the clock's step is still resolved.
  const int perSample = k.opt.sampleIters * k.opt.aggIters;
  std::vector<double> samples;
  for (int i = 0; i < k.opt.iters && *rc == ncclSuccess; ++i) {
    const auto t0 = Clock::now();
    for (int j = 0; j < k.opt.sampleIters && *rc == ncclSuccess; ++j) *rc = timedIteration(k);
    syncAll(k.ls);
    samples.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / perSample);
  }
  if (samples.empty()) return 0;
  std::nth_element(samples.begin(), samples.begin() + samples.size() / 2, samples.end());
  return samples[samples.size() / 2];
}

// -T: if one size runs past the limit, the run fails (a hung peer would
// otherwise hold it until the library's own timeout).
class Watchdog {
 public:
  Watchdog(int seconds, int rank) : seconds_(seconds), rank_(rank) {
    if (seconds_ > 0) thread_ = std::thread([this] { watch(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      done_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  // A new size starts: its own time limit.
  void restart(std::string what) {
    std::lock_guard<std::mutex> lock(mutex_);
    what_ = std::move(what);
    deadline_ = Clock::now() + std::chrono::seconds(seconds_);
  }

 private:
  void watch() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!done_) {
      if (Clock::now() > deadline_) {
        std::fprintf(stderr, "weft-perf: rank %d: %s took more than %d s (-T %d); stopping\n", rank_, what_.c_str(),
                     seconds_, seconds_);
        std::fflush(nullptr);
        _exit(1);
      }
      wake_.wait_until(lock, deadline_);
    }
  }

  const int seconds_;
  const int rank_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool done_ = false;
  std::string what_ = "start-up";
  Clock::time_point deadline_ = Clock::now() + std::chrono::seconds(seconds_);
  std::thread thread_;
};

std::string strFormatSize(const char* coll, ncclDataType_t type, ncclRedOp_t op, size_t bytes) {
  return std::string(coll) + " " + typeName(type) + " " + opName(op) + " " + std::to_string(bytes) + " bytes";
}

std::vector<size_t> sweepSizes(const Options& opt) {
  std::vector<size_t> sizes;
  for (size_t s = opt.minBytes; s <= opt.maxBytes;) {
    sizes.push_back(s);
    const size_t next =
        opt.stepFactor > 1 ? static_cast<size_t>(static_cast<double>(s) * opt.stepFactor) : s + opt.stepBytes;
    s = next > s ? next : s + 1;
  }
  return sizes;
}

// The size nccl-tests prints: the buffer the size convention refers to.
size_t shownElems(Coll coll, const Counts& c) {
  switch (coll) {
    case Coll::kAllGather:
    case Coll::kGather: return c.recvElems;
    case Coll::kReduceScatter:
    case Coll::kScatter:
    case Coll::kAlltoAll: return c.sendElems;
    default: return c.count;
  }
}

void printHeader(const Options& opt, int nranks, bool device) {
  const CollInfo& info = collInfo(opt.coll);
  std::printf("# weft-perf %s: %d ranks (%s), backend %s, %s\n", info.name, nranks,
              opt.np > 0 ? (opt.threads ? "threads" : "processes") : "external launcher", device ? "cuda" : "host",
              weftGetVersionString());
  char what[64];
  if (opt.median && opt.sampleIters > 1)
    std::snprintf(what, sizeof what, "median of %d samples of %d iterations", opt.iters, opt.sampleIters);
  else
    std::snprintf(what, sizeof what, "%s of %d iterations", opt.median ? "median" : "mean", opt.iters);
  std::printf("# time per operation: %s of %d operation%s after %d warm-up; across ranks: %s%s\n#\n", what,
              opt.aggIters, opt.aggIters > 1 ? "s" : "", opt.warmup,
              (const char*[]){"rank 0", "mean", "min", "max"}[opt.average],
              opt.touch ? "; each rank's read of its output included (--touch)" : "");
  std::printf("# %76s %34s\n", "out-of-place", "in-place");
  std::printf("# %10s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "size", "count", "type", "redop", "root",
              "time", "algbw", "busbw", "#wrong", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s %12s %8s %6s %6s %8s %7s %7s %6s %8s %7s %7s %6s\n", "(B)", "(elements)", "", "", "", "(us)",
              "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)", "");
}

void printCell(const Measure& m, size_t bytes, double factor) {
  if (!m.valid) {
    std::printf(" %8s %7s %7s %6s", "N/A", "N/A", "N/A", "N/A");
    return;
  }
  const double algbw = m.us > 0 ? static_cast<double>(bytes) / (m.us * 1e3) : 0;
  std::printf(" %8.2f %7.2f %7.2f %6lld", m.us, algbw, algbw * factor, static_cast<long long>(m.wrong));
}

const char* redopName(const Options& opt, const Row& r) { return collInfo(opt.coll).reduces ? opName(r.op) : "none"; }

void printRow(const Options& opt, const Row& r, double factor) {
  if (opt.output == Output::kCsv) {
    auto cell = [&](const Measure& m) {
      const double algbw = m.us > 0 ? static_cast<double>(r.bytes) / (m.us * 1e3) : 0;
      if (m.valid)
        std::printf(",%.3f,%.4f,%.4f,%lld", m.us, algbw, algbw * factor, static_cast<long long>(m.wrong));
      else
        std::printf(",,,,");
    };
    std::printf("%s,%zu,%zu,%s,%s,%d", collInfo(opt.coll).name, r.bytes, r.count, typeName(r.type), redopName(opt, r),
                r.root);
    cell(r.oop);
    cell(r.ip);
    std::printf("\n");
    return;
  }
  std::printf("  %10zu %12zu %8s %6s %6d", r.bytes, r.count, typeName(r.type), redopName(opt, r), r.root);
  printCell(r.oop, r.bytes, factor);
  printCell(r.ip, r.bytes, factor);
  std::printf("\n");
  std::fflush(stdout);
}

void printJson(const Options& opt, const std::vector<Row>& rows, int nranks, bool device, double factor) {
  std::printf(
      "{\"tool\":\"weft-perf\",\"version\":\"%s\",\"collective\":\"%s\",\"nranks\":%d,\"backend\":\"%s\","
      "\"iters\":%d,\"results\":[",
      weftGetVersionString(), collInfo(opt.coll).name, nranks, device ? "cuda" : "host", opt.iters);
  auto cell = [&](const char* name, const Measure& m, size_t bytes) {
    if (!m.valid) return std::printf(",\"%s\":null", name), void();
    const double algbw = m.us > 0 ? static_cast<double>(bytes) / (m.us * 1e3) : 0;
    std::printf(",\"%s\":{\"time_us\":%.3f,\"algbw\":%.4f,\"busbw\":%.4f,\"wrong\":%lld}", name, m.us, algbw,
                algbw * factor, static_cast<long long>(m.wrong));
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    std::printf("%s{\"size\":%zu,\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d", i ? "," : "", r.bytes,
                r.count, typeName(r.type), redopName(opt, r), r.root);
    cell("out_of_place", r.oop, r.bytes);
    cell("in_place", r.ip, r.bytes);
    std::printf("}");
  }
  std::printf("]}\n");
}

}  // namespace

bool runRanks(const Options& opt, const std::vector<ncclComm_t>& comms, int firstRank, int nranks) {
  const CollInfo& info = collInfo(opt.coll);
  const std::vector<size_t> sizes = sweepSizes(opt);
  size_t sendBytes = 0, recvBytes = 0;
  for (ncclDataType_t t : opt.types) {
    const Counts c = countsFor(opt.coll, opt.maxBytes, t, nranks);
    sendBytes = std::max(sendBytes, c.sendElems * typeSize(t));
    recvBytes = std::max(recvBytes, std::max(c.recvElems, c.sendElems) * typeSize(t));
  }
  Locals ls;
  for (size_t i = 0; i < comms.size(); ++i) {
    const int rank = firstRank + static_cast<int>(i);
    ls.push_back({comms[i], rank,
                  std::make_unique<Buffers>(comms[i], sendBytes, recvBytes, opt.registerMode, opt.privateBuffers),
                  std::make_unique<Buffers>(comms[i], sizeof(double), sizeof(double))});
    if (!ls.back().b->ok() || !ls.back().scratch->ok()) {
      std::fprintf(stderr, "weft-perf: rank %d: cannot allocate %zu + %zu bytes of buffers\n", rank, sendBytes,
                   recvBytes);
      return false;
    }
  }
  std::vector<int> roots = info.rooted ? opt.roots : std::vector<int>{-1};
  if (info.rooted && roots[0] < 0) {  // -r all
    roots.clear();
    for (int r = 0; r < nranks; ++r) roots.push_back(r);
  }
  const bool lead = firstRank == 0;
  if (info.rooted && roots[0] >= nranks) {
    if (lead) std::fprintf(stderr, "weft-perf: -r %d: root must be below the rank count %d\n", roots[0], nranks);
    return false;
  }
  const double factor = info.busFactor(nranks);
  if (lead && opt.output == Output::kTable) printHeader(opt, nranks, ls[0].b->onDevice());
  if (lead && opt.output == Output::kCsv)
    std::printf(
        "collective,size,count,type,redop,root,oop_time_us,oop_algbw,oop_busbw,oop_wrong,ip_time_us,"
        "ip_algbw,ip_busbw,ip_wrong\n");
  std::vector<Row> rows;
  int64_t totalWrong = 0;
  double busSum = 0;
  int busCount = 0;
  ncclResult_t rc = ncclSuccess;
  const auto start = Clock::now();
  Watchdog watchdog(opt.timeoutSec, firstRank);
  for (ncclDataType_t type : opt.types)
    for (ncclRedOp_t op : info.reduces ? opt.ops : std::vector<ncclRedOp_t>{ncclSum})
      for (int root : roots)
        for (size_t s = 0; s < sizes.size() && rc == ncclSuccess; ++s) {
          const Counts c = countsFor(opt.coll, sizes[s], type, nranks);
          watchdog.restart(strFormatSize(info.name, type, op, sizes[s]));
          Row row{shownElems(opt.coll, c) * typeSize(type), shownElems(opt.coll, c), type, op, root, {}, {}};
          for (int v = 0; v < (info.inPlace ? 2 : 1) && rc == ncclSuccess; ++v) {
            const Call call{opt, opt.coll, c, type, op, root, v == 1, ls, nranks};
            Measure& m = v == 0 ? row.oop : row.ip;
            int64_t wrong = 0;
            for (int k = 0; k < opt.check && rc == ncclSuccess; ++k) wrong += checkOnce(call, &rc);
            if (rc != ncclSuccess) break;
            const double us = timeIt(call, &rc);
            if (rc != ncclSuccess) break;
            const ncclRedOp_t how = opt.average == 2 ? ncclMin : opt.average == 3 ? ncclMax : ncclSum;
            // Every rank of the thread ran the same batch: each reports the thread's time.
            m.us = acrossRanks(
                ls, [&](const Local& l) { return opt.average == 0 && l.rank != 0 ? 0.0 : us; }, how);
            if (opt.average == 1) m.us /= nranks;
            const double threadWrong = static_cast<double>(wrong);
            m.wrong = static_cast<int64_t>(acrossRanks(
                ls, [&](const Local& l) { return l.rank == firstRank ? threadWrong : 0.0; }, ncclSum));
            m.valid = true;
            totalWrong += m.wrong;
            if (m.us > 0) busSum += static_cast<double>(row.bytes) / (m.us * 1e3) * factor, ++busCount;
          }
          if (rc != ncclSuccess) break;
          if (lead && opt.output != Output::kJson) printRow(opt, row, factor);
          rows.push_back(row);
          const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
          if (lead && elapsed > 2 && sizes.size() > 1)
            std::fprintf(stderr, "weft-perf: %s %s %s %zu bytes done (%zu/%zu), %.0f s\n", info.name, typeName(type),
                         opName(op), sizes[s], s + 1, sizes.size(), elapsed);
        }
  if (rc != ncclSuccess) {
    std::fprintf(stderr, "weft-perf: rank %d: %s: %s\n", firstRank, ncclGetErrorString(rc),
                 ncclGetLastError(ls[0].comm));
    return false;
  }
  if (lead && opt.output == Output::kJson) printJson(opt, rows, nranks, ls[0].b->onDevice(), factor);
  if (lead && opt.output == Output::kTable) {
    std::printf("# Out of bounds values : %lld %s\n", static_cast<long long>(totalWrong), totalWrong ? "FAILED" : "OK");
    std::printf("# Avg bus bandwidth    : %g\n#\n", busCount ? busSum / busCount : 0.0);
  }
  return totalWrong == 0;
}

}  // namespace weft::perf
