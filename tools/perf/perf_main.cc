// weft-perf entry: decides who the ranks are (spawned processes or threads,
// or one rank per process under an external launcher), gives every rank the
// unique id, and runs the sweep.
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "perf/perf.h"

#if WEFT_PERF_MPI
#include <mpi.h>
#endif

namespace weft::perf {
namespace {

bool runComms(const Options& opt, const std::vector<ncclComm_t>& comms, int first, int nranks) {
  const bool ok = runRanks(opt, comms, first, nranks);
  for (ncclComm_t comm : comms) ncclCommDestroy(comm);
  return ok;
}

// Ranks first..first+count-1 of nranks, made by this thread in one group
// (as nccl-tests does without -p; one rank: no group).
bool initInGroup(const ncclUniqueId& id, int first, int count, int nranks, std::vector<ncclComm_t>* comms) {
  comms->assign(static_cast<size_t>(count), nullptr);
  if (count == 1) {
    const ncclResult_t rc = ncclCommInitRank(&(*comms)[0], nranks, id, first);
    if (rc != ncclSuccess)
      std::fprintf(stderr, "weft-perf: rank %d: ncclCommInitRank: %s: %s\n", first, ncclGetErrorString(rc),
                   ncclGetLastError(nullptr));
    return rc == ncclSuccess;
  }
  ncclResult_t rc = ncclGroupStart();
  for (int i = 0; i < count && rc == ncclSuccess; ++i) rc = ncclCommInitRank(&(*comms)[i], nranks, id, first + i);
  const ncclResult_t ended = ncclGroupEnd();
  if (rc == ncclSuccess) rc = ended;
  if (rc != ncclSuccess)
    std::fprintf(stderr, "weft-perf: ncclCommInitRank of ranks %d..%d in a group: %s: %s\n", first, first + count - 1,
                 ncclGetErrorString(rc), ncclGetLastError(nullptr));
  return rc == ncclSuccess;
}

// Runs ranks first..first+count-1 of nranks on threads of this process, -g
// ranks per thread. -p 1: each thread makes its communicators; -p 0: this
// thread makes them all.
bool runThreads(const Options& opt, const ncclUniqueId& id, int first, int count, int nranks) {
  const int g = opt.ranksPerThread;
  const int nthreads = count / g;
  std::vector<char> ok(static_cast<size_t>(nthreads), 0);
  std::vector<std::thread> threads;
  std::vector<ncclComm_t> comms;
  if (opt.parallelInit == 0 || nthreads == 1) {
    if (!initInGroup(id, first, count, nranks, &comms)) return false;
    if (nthreads == 1) return runComms(opt, comms, first, nranks);
    for (int i = 0; i < nthreads; ++i)
      threads.emplace_back([&, i] {
        const auto begin = comms.begin() + i * g;
        ok[static_cast<size_t>(i)] = runComms(opt, std::vector<ncclComm_t>(begin, begin + g), first + i * g, nranks);
      });
  } else {
    for (int i = 0; i < nthreads; ++i)
      threads.emplace_back([&, i] {
        std::vector<ncclComm_t> mine;
        ok[static_cast<size_t>(i)] =
            initInGroup(id, first + i * g, g, nranks, &mine) && runComms(opt, mine, first + i * g, nranks);
      });
  }
  for (std::thread& t : threads) t.join();
  for (char c : ok)
    if (!c) return false;
  return true;
}

int spawnThreads(const Options& opt) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  const int ranks = opt.np * opt.ranksPerThread;
  return runThreads(opt, id, 0, ranks, ranks) ? 0 : 1;
}

// Child 0 makes the id and hands it to the others through a pipe, so this
// process never starts a library thread before forking.
int spawnProcesses(const Options& opt) {
  int idPipe[2];
  if (pipe(idPipe) != 0) return 1;
  std::fflush(nullptr);
  std::vector<pid_t> children;
  for (int r = 0; r < opt.np; ++r) {
    const pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      ncclUniqueId id;
      if (r == 0) {
        if (ncclGetUniqueId(&id) != ncclSuccess) _exit(3);
        for (int i = 1; i < opt.np; ++i)
          if (write(idPipe[1], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) _exit(3);
      } else if (read(idPipe[0], &id, sizeof(id)) != static_cast<ssize_t>(sizeof(id))) {
        _exit(3);
      }
      const int perProcess = opt.threadsPerProcess * opt.ranksPerThread;
      const bool ok = runThreads(opt, id, r * perProcess, perProcess, opt.np * perProcess);
      std::fflush(nullptr);
      _exit(ok ? 0 : 1);
    }
    children.push_back(pid);
  }
  int failures = 0;
  for (size_t r = 0; r < children.size(); ++r) {
    int status = 0;
    waitpid(children[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      ++failures;
      std::fprintf(stderr, "weft-perf: rank %zu (pid %d) %s %d\n", r, children[r],
                   WIFEXITED(status) ? "exited with" : "killed by signal",
                   WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
    }
  }
  return failures ? 1 : 0;
}

// Rank and size from the usual launchers' environment.
bool launcherRank(int* rank, int* size) {
  static const char* kPairs[][2] = {{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                                    {"PMI_RANK", "PMI_SIZE"},
                                    {"SLURM_PROCID", "SLURM_NTASKS"},
                                    {"RANK", "WORLD_SIZE"}};
  for (const auto& p : kPairs) {
    const char* r = std::getenv(p[0]);
    const char* s = std::getenv(p[1]);
    if (r && s) {
      *rank = std::atoi(r);
      *size = std::atoi(s);
      return *size > 0 && *rank >= 0 && *rank < *size;
    }
  }
  return false;
}

// Where rank 0 leaves the id for the others: --id-file, WEFT_PERF_ID_FILE,
// or a name derived from the launcher's job identity.
std::string idFilePath(const Options& opt) {
  if (!opt.idFile.empty()) return opt.idFile;
  if (const char* f = std::getenv("WEFT_PERF_ID_FILE")) return f;
  for (const char* var : {"PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID"})
    if (const char* v = std::getenv(var)) {
      std::string key = v;
      if (const char* step = std::getenv("SLURM_STEP_ID")) key += std::string(".") + step;
      for (char& ch : key)
        if (ch == '/' || ch == ' ') ch = '_';
      return std::string(std::getenv("TMPDIR") ? std::getenv("TMPDIR") : "/tmp") + "/weft-perf-" + key + ".id";
    }
  return "";
}

int runUnderLauncher(const Options& opt, int rank, int nranks) {
  ncclUniqueId id;
  if (std::getenv("NCCL_COMM_ID")) {  // the library's own rendezvous: every rank asks
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    const int t = opt.threadsPerProcess * opt.ranksPerThread;
    return runThreads(opt, id, rank * t, t, nranks * t) ? 0 : 1;
  }
  const std::string path = idFilePath(opt);
  if (path.empty()) {
    std::fprintf(stderr,
                 "weft-perf: rank %d of %d: no way to share the unique id; pass --id-file F (a path all "
                 "ranks see), set WEFT_PERF_ID_FILE, or set NCCL_COMM_ID=host:port\n",
                 rank, nranks);
    return 2;
  }
  if (rank == 0) {
    if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
    const std::string tmp = path + ".tmp";
    std::ofstream(tmp, std::ios::binary).write(reinterpret_cast<const char*>(&id), sizeof(id));
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      std::fprintf(stderr, "weft-perf: cannot write the unique id to %s\n", path.c_str());
      return 1;
    }
  } else {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (;;) {
      std::ifstream in(path, std::ios::binary);
      if (in.read(reinterpret_cast<char*>(&id), sizeof(id)) && in.gcount() == sizeof(id)) break;
      if (std::chrono::steady_clock::now() > deadline) {
        std::fprintf(stderr, "weft-perf: rank %d: no unique id appeared in %s within 120 s\n", rank, path.c_str());
        return 1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  const int t = opt.threadsPerProcess * opt.ranksPerThread;
  const bool ok = runThreads(opt, id, rank * t, t, nranks * t);
  if (rank == 0) std::remove(path.c_str());  // every rank has joined long since (or failed)
  return ok ? 0 : 1;
}

#if WEFT_PERF_MPI
// One rank per MPI process: rank 0 makes the unique id and MPI broadcasts
// it, as nccl-tests' MPI build does; no file or address is shared otherwise.
int runUnderMpi(const Options& opt) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  ncclUniqueId id{};
  int made = rank != 0 || ncclGetUniqueId(&id) == ncclSuccess;
  MPI_Bcast(&made, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!made) {
    if (rank == 0) std::fprintf(stderr, "weft-perf: ncclGetUniqueId: %s\n", ncclGetLastError(nullptr));
    return 1;
  }
  MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, MPI_COMM_WORLD);
  const int t = opt.threadsPerProcess * opt.ranksPerThread;
  return runThreads(opt, id, rank * t, t, size * t) ? 0 : 1;
}
#endif

}  // namespace
}  // namespace weft::perf

int main(int argc, char** argv) {
  using namespace weft::perf;
  Options opt;
  int exitCode = 0;
#if WEFT_PERF_MPI
  MPI_Init(&argc, &argv);
  if (!parseOptions(argc, argv, &opt, &exitCode)) return MPI_Finalize(), exitCode;
  if (opt.np == 0) {  // ranks come from mpirun
    exitCode = runUnderMpi(opt);
    int worst = exitCode;
    MPI_Allreduce(&exitCode, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    MPI_Finalize();
    return worst;
  }
  MPI_Finalize();
#else
  if (!parseOptions(argc, argv, &opt, &exitCode)) return exitCode;
#endif
  if (opt.np > 0) return opt.threads ? spawnThreads(opt) : spawnProcesses(opt);
  int rank = 0, nranks = 1;
  if (launcherRank(&rank, &nranks) && nranks > 1) return runUnderLauncher(opt, rank, nranks);
  opt.np = opt.threadsPerProcess;  // one process: -t threads
  opt.threads = true;
  return spawnThreads(opt);
}
