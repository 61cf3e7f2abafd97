// Command line of weft-perf: nccl-tests' options plus -np/--threads and the
// output format.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "perf/perf.h"

namespace weft::perf {
namespace {

const char kUsage[] =
    "usage: weft-perf <allreduce|allgather|reducescatter|broadcast|reduce|alltoall|gather|scatter|sendrecv>\n"
    "                 [options]\n"
    "  -b, --minbytes N      smallest size (default 32M; K, M, G suffixes)\n"
    "  -e, --maxbytes N      largest size (default 32M)\n"
    "  -i, --stepbytes N     fixed increment between sizes (default 1M)\n"
    "  -f, --stepfactor F    multiplication factor between sizes (replaces -i)\n"
    "  -n, --iters N         timed iterations per size (default 20)\n"
    "  -w, --warmup_iters N  untimed iterations first (default 1)\n"
    "  -c, --check N         check results before timing (default 1; 0 skips)\n"
    "  -o, --op OP           sum, prod, max, min, avg, mulsum (PreMulSum; premulsum also accepted)\n"
    "                        or all (default sum)\n"
    "  -d, --datatype T      int8 uint8 int32 uint32 int64 uint64 half float double bfloat16 f8e4m3 f8e5m2\n"
    "                        or all (default float)\n"
    "  -r, --root R          root rank, or all (default 0)\n"
    "  -a, --average A       time across ranks: 0 rank 0, 1 mean, 2 min, 3 max (default 1)\n"
    "  -z, --blocking Z      0: wait once per batch (cuda); 1, 2: wait after each operation (default 0)\n"
    "  -m, --agg_iters M     operations aggregated in one group per iteration (default 1)\n"
    "  -T, --timeout S       fail when one size takes longer than S seconds (default 0: no limit)\n"
    "  -p, --parallel_init P 1: the threads of a process create their communicators concurrently\n"
    "                        (default 0: the process creates them all in one group)\n"
    "  --median              time each iteration and report the median (default: the mean, as nccl-tests)\n"
    "  --sample K            with --median: each timed sample is K iterations back to back, counted as\n"
    "                        their mean (default 1: each iteration alone; more for calls near the clock's\n"
    "                        resolution), the median of -n samples reported\n"
    "  --touch               each rank reads its whole output after every call, timed with it (host buffers):\n"
    "                        the consumer's use of the result, which a call that left it in another core's\n"
    "                        cache (direct writes) makes slower\n"
    "  -np N                 launch N local ranks (processes; --threads for threads)\n"
    "  -t, --nthreads T      ranks (threads) per process (default 1): -np N gives N x T ranks, and so does\n"
    "                        a launcher starting N processes\n"
    "  -g, --ngpus G         ranks (communicators) each thread drives, every call made for all of them\n"
    "                        in one group (default 1): -np N -t T -g G gives N x T x G ranks\n"
    "  -G, --cudagraph N     capture the -n timed iterations as a CUDA graph and replay it N times\n"
    "                        (cuda backend; default 0: launch directly)\n"
    "  -R, --local_register R  0: buffers not registered (default); 1: ncclCommRegister; 2: ncclCommWindowRegister\n"
    "  --private-buffers     host backend: buffers from aligned_alloc instead of ncclMemAlloc (not shareable:\n"
    "                        direct mode between processes then uses cross-memory attach or the FIFO)\n"
    "  --threads             ranks as threads of this process\n"
    "  --json | --csv        machine-readable output instead of the table\n"
    "  --id-file F           external launchers: rank 0 writes the unique id to F, others read it\n"
    "Without -np, one rank per process from OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/PMI_SIZE,\n"
    "SLURM_PROCID/SLURM_NTASKS or RANK/WORLD_SIZE; a single process is one rank.\n";

bool parseSize(const char* text, size_t* out) {
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || v < 0) return false;
  switch (*end) {
    case 'K':
    case 'k':
      v *= 1024;
      ++end;
      break;
    case 'M':
    case 'm':
      v *= 1024.0 * 1024;
      ++end;
      break;
    case 'G':
    case 'g':
      v *= 1024.0 * 1024 * 1024;
      ++end;
      break;
    default: break;
  }
  if (*end != '\0') return false;
  *out = static_cast<size_t>(v);
  return true;
}

bool parseInt(const char* text, int* out) {
  char* end = nullptr;
  long v = std::strtol(text, &end, 0);
  if (end == text || *end != '\0') return false;
  *out = static_cast<int>(v);
  return true;
}

bool parseColl(const std::string& name, Coll* out) {
  static const struct {
    const char* name;
    Coll coll;
  } kNames[] = {
      {"allreduce", Coll::kAllReduce}, {"allgather", Coll::kAllGather}, {"reducescatter", Coll::kReduceScatter},
      {"broadcast", Coll::kBroadcast}, {"reduce", Coll::kReduce},       {"alltoall", Coll::kAlltoAll},
      {"gather", Coll::kGather},       {"scatter", Coll::kScatter},     {"sendrecv", Coll::kSendRecv}};
  for (const auto& n : kNames)
    if (name == n.name) return (*out = n.coll), true;
  return false;
}

bool parseOps(const std::string& name, std::vector<ncclRedOp_t>* out) {
  const ncclRedOp_t all[] = {ncclSum, ncclProd, ncclMax, ncclMin, ncclAvg, kPreMulSum};
  out->clear();
  for (ncclRedOp_t op : all)
    if (name == "all" || name == opName(op) || (op == kPreMulSum && name == "premulsum")) out->push_back(op);
  return !out->empty();
}

bool parseTypes(const std::string& name, std::vector<ncclDataType_t>* out) {
  out->clear();
  for (int t = 0; t < ncclNumTypes; ++t)
    if (name == "all" || name == typeName(static_cast<ncclDataType_t>(t)))
      out->push_back(static_cast<ncclDataType_t>(t));
  return !out->empty();
}

}  // namespace

bool parseOptions(int argc, char** argv, Options* opt, int* exitCode) {
  *exitCode = 2;
  int i = 1;
  if (i < argc && argv[i][0] != '-') {
    if (!parseColl(argv[i], &opt->coll)) {
      std::fprintf(stderr, "weft-perf: unknown collective '%s'\n%s", argv[i], kUsage);
      return false;
    }
    ++i;
  }
  bool allRoots = false;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      *exitCode = 0;
      return false;
    }
    if (a == "--threads") {
      opt->threads = true;
      continue;
    }
    if (a == "--json") {
      opt->output = Output::kJson;
      continue;
    }
    if (a == "--csv") {
      opt->output = Output::kCsv;
      continue;
    }
    if (a == "--touch") {
      opt->touch = true;
      continue;
    }
    if (a == "--median") {
      opt->median = true;
      continue;
    }
    if (a == "--private-buffers") {
      opt->privateBuffers = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "weft-perf: option %s needs a value\n%s", a.c_str(), kUsage);
      return false;
    }
    const char* v = argv[++i];
    bool ok = true;
    if (a == "-b" || a == "--minbytes")
      ok = parseSize(v, &opt->minBytes);
    else if (a == "-e" || a == "--maxbytes")
      ok = parseSize(v, &opt->maxBytes);
    else if (a == "-i" || a == "--stepbytes")
      ok = parseSize(v, &opt->stepBytes) && opt->stepBytes > 0;
    else if (a == "-f" || a == "--stepfactor")
      ok = (opt->stepFactor = std::atof(v)) > 1;
    else if (a == "-n" || a == "--iters")
      ok = parseInt(v, &opt->iters) && opt->iters > 0;
    else if (a == "-w" || a == "--warmup_iters")
      ok = parseInt(v, &opt->warmup) && opt->warmup >= 0;
    else if (a == "-c" || a == "--check")
      ok = parseInt(v, &opt->check) && opt->check >= 0;
    else if (a == "-a" || a == "--average")
      ok = parseInt(v, &opt->average) && opt->average >= 0 && opt->average <= 3;
    else if (a == "-z" || a == "--blocking")
      ok = parseInt(v, &opt->blocking) && opt->blocking >= 0;
    else if (a == "-t" || a == "--nthreads")
      ok = parseInt(v, &opt->threadsPerProcess) && opt->threadsPerProcess > 0;
    else if (a == "-g" || a == "--ngpus")
      ok = parseInt(v, &opt->ranksPerThread) && opt->ranksPerThread > 0;
    else if (a == "-G" || a == "--cudagraph")
      ok = parseInt(v, &opt->cudaGraphs) && opt->cudaGraphs >= 0;
    else if (a == "-m" || a == "--agg_iters")
      ok = parseInt(v, &opt->aggIters) && opt->aggIters > 0;
    else if (a == "--sample")
      ok = parseInt(v, &opt->sampleIters) && opt->sampleIters > 0;
    else if (a == "-T" || a == "--timeout")
      ok = parseInt(v, &opt->timeoutSec) && opt->timeoutSec >= 0;
    else if (a == "-p" || a == "--parallel_init")
      ok = parseInt(v, &opt->parallelInit) && opt->parallelInit >= 0;
    else if (a == "-o" || a == "--op")
      ok = parseOps(v, &opt->ops);
    else if (a == "-d" || a == "--datatype")
      ok = parseTypes(v, &opt->types);
    else if (a == "-r" || a == "--root") {
      allRoots = std::strcmp(v, "all") == 0;
      ok = allRoots || (parseInt(v, &opt->roots[0]) && opt->roots[0] >= 0);
    } else if (a == "-np")
      ok = parseInt(v, &opt->np) && opt->np > 0;
    else if (a == "--id-file")
      opt->idFile = v;
    else if (a == "-R" || a == "--local_register")
      ok = parseInt(v, &opt->registerMode) && opt->registerMode >= 0 && opt->registerMode <= 2;
    else {
      std::fprintf(stderr, "weft-perf: unknown option %s\n%s", a.c_str(), kUsage);
      return false;
    }
    if (!ok) {
      std::fprintf(stderr, "weft-perf: bad value '%s' for %s\n", v, a.c_str());
      return false;
    }
  }
  if (opt->minBytes > opt->maxBytes) {
    std::fprintf(stderr, "weft-perf: -b %zu is larger than -e %zu\n", opt->minBytes, opt->maxBytes);
    return false;
  }
  if (opt->threads && opt->threadsPerProcess > 1) {
    std::fprintf(stderr, "weft-perf: -np N --threads already runs N threads; -t applies to processes\n");
    return false;
  }
  if (opt->cudaGraphs > 0 && opt->ranksPerThread > 1) {
    std::fprintf(stderr,
                 "weft-perf: -G %d with -g %d: graphs are captured on one rank's stream; use -t or -np instead "
                 "of -g\n",
                 opt->cudaGraphs, opt->ranksPerThread);
    return false;
  }
  if (opt->sampleIters > 1 && !opt->median) {
    std::fprintf(stderr,
                 "weft-perf: --sample %d times samples of the median; add --median (without it the whole\n"
                 "batch of -n iterations is one sample)\n",
                 opt->sampleIters);
    return false;
  }
  if (opt->cudaGraphs > 0 && opt->median) {
    std::fprintf(stderr, "weft-perf: -G times whole graph replays; --median times single iterations: choose one\n");
    return false;
  }
  if (allRoots) opt->roots = {-1};  // expanded once the rank count is known
  return true;
}

}  // namespace weft::perf
