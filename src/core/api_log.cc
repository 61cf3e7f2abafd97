#include "core/api_log.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdlib.h>

#include <atomic>
#include <cinttypes>
#include <string>

#include "core/api.h"
#include "core/comm.h"

namespace weft::core {
namespace {

// The file the dynamic loader mapped this code from (libnccl.so.2, libweft.so,
// or the executable when linked statically), and where it really lives.
std::string loadedLibrary() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&showVersionOnce), &info) == 0 || info.dli_fname == nullptr) return "(unknown)";
  std::string path = info.dli_fname;
  char real[PATH_MAX];
  if (realpath(info.dli_fname, real) != nullptr && path != real) path += std::string(" -> ") + real;
  return path;
}

}  // namespace

void showVersionOnce(weftBackend_t backend) {
  if (!log::enabled(log::Level::kVersion, log::kAll)) return;
  static std::atomic<bool> shown{false};
  if (shown.exchange(true)) return;
  const std::string banner =
      strFormat("NCCL version %d.%d.%d (Weft %d.%d.%d, backend %s, library %s)", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH,
                WEFT_VERSION_MAJOR, WEFT_VERSION_MINOR, WEFT_VERSION_PATCH,
                backend == weftBackendCuda ? "cuda" : "host", loadedLibrary().c_str());
  const log::Level how = log::level() >= log::Level::kInfo ? log::Level::kInfo : log::Level::kVersion;
  WEFT_LOG_(how, log::kAll, "%s", banner.c_str());
}

void logCall(const CallRecord& c) {
  if (c.comm == nullptr || !checkComm(c.comm).ok()) return;  // the call itself reports the bad comm
  Comm* comm = asComm(c.comm);
  const uint64_t opCount = comm->loggedCalls.fetch_add(1, std::memory_order_relaxed);
  const log::ScopedRank rank(comm->rank);
  WEFT_INFO(log::kColl,
            "%s: opCount %" PRIx64
            " sendbuff %p recvbuff %p count %zu datatype %d op %d root %d comm %p [nranks=%d] "
            "stream %p",
            c.name, opCount, c.sendbuff, c.recvbuff, c.count, static_cast<int>(c.datatype), c.op, c.root,
            static_cast<void*>(c.comm), comm->nranks, static_cast<void*>(c.stream));
  if (log::enabled(log::Level::kTrace, log::kCall))
    log::write(log::Level::kTrace, log::kCall, __FILE__, __LINE__, "nccl%s(%p,%p,%zu,%d,%d,%d,%p,%p)", c.name,
               c.sendbuff, c.recvbuff, c.count, static_cast<int>(c.datatype), c.op, c.root, static_cast<void*>(c.comm),
               static_cast<void*>(c.stream));
}

void logInitTimings(const Comm& comm) {
  const InitTimings& t = comm.initTimes;
  const double total = t.sinceBegin();
  const double graphs = t.graphs > t.topo ? t.graphs - t.topo : 0;  // the graphs phase contains topo
  const double rest = total - (t.alloc + t.bootstrap + t.allgathers + t.topo + graphs + t.connections);
  WEFT_INFO(log::kInit,
            "Init timings - %s: rank %d nranks %d total %.2f (kernels %.2f, alloc %.2f, bootstrap %.2f, allgathers "
            "%.2f, topo %.2f, graphs %.2f, connections %.2f, rest %.2f)",
            t.api, comm.rank, comm.nranks, total, 0.0, t.alloc, t.bootstrap, t.allgathers, t.topo, graphs,
            t.connections, rest > 0 ? rest : 0.0);
}

}  // namespace weft::core
