#include "core/init.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "common/hash.h"
#include "common/log.h"
#include "common/params.h"
#include "common/process.h"
#include "common/shm.h"
#include "core/api_log.h"
#include "core/channels.h"
#include "core/comm.h"
#include "core/connect.h"
#include "core/cuda_backend.h"
#include "core/direct_peers.h"
#include "core/failure.h"
#include "core/host_executor.h"
#include "core/profiler.h"
#include "tuning/tuning.h"

namespace weft::core {
namespace {

// Values every rank must agree on; each rank proposes, all take the minimum.
struct Proposal {
  int32_t maxChannels;
  int32_t minChannels;
  int32_t chunkSteps;
  int32_t pad;
  int64_t buffSize;
};

struct InitRecord {
  PeerInfo info;
  Proposal proposal;
};

int availableCores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
}

PeerInfo localPeerInfo(const Comm& comm) {
  PeerInfo info{};
  info.rank = comm.rank;
  info.backend = comm.backend;
  info.cudaDev = comm.cudaDev;
  info.pid = static_cast<int32_t>(getpid());
  info.hostHash = hostHash();
  info.processHash = processHash();
  info.pidNamespace = pidNamespaceId();
  info.machineHash = machineHash();
  gethostname(info.hostname, sizeof(info.hostname) - 1);
  if (comm.backend == weftBackendCuda)
    std::snprintf(info.busId, sizeof(info.busId), "%s", cuda::pciBusId(comm.cudaDev).c_str());
  return info;
}

int countLocalRanks(const std::vector<PeerInfo>& peers, uint64_t host) {
  return static_cast<int>(
      std::count_if(peers.begin(), peers.end(), [&](const PeerInfo& p) { return p.hostHash == host; }));
}

Proposal localProposal(const Comm& comm, int ranksSharingCores) {
  Proposal p{};
  int64_t envMax = param::maxNChannels();
  int64_t envMin = param::minNChannels();
  // GPUs: one block per channel, and a block moves far less than the GPU's
  // bandwidth, so the cuda backend builds more channels than the host one.
  int defaultMax = comm.backend == weftBackendCuda
                       ? tuning::kCudaDefaultMaxChannels
                       : tuning::hostDefaultMaxChannels(availableCores(), ranksSharingCores);
  int maxCh = comm.config.maxChannels > 0 ? comm.config.maxChannels
              : envMax > 0                ? static_cast<int>(envMax)
                                          : defaultMax;
  int minCh = comm.config.minChannels > 0 ? comm.config.minChannels : envMin > 0 ? static_cast<int>(envMin) : 1;
  p.maxChannels = std::clamp(std::max(maxCh, minCh), 1, kMaxChannels);
  p.minChannels = std::clamp(minCh, 1, p.maxChannels);
  p.chunkSteps = static_cast<int32_t>(std::clamp<int64_t>(param::chunkSteps(), 1, device::kFifoSteps));
  p.buffSize = tuning::buffSize(param::buffSize(), comm.backend == weftBackendHost, device::kFifoSteps * 64);
  return p;
}

Status exchangePeers(Comm* comm) {
  const PhaseTimer timer(&comm->initTimes.allgathers);
  std::vector<InitRecord> records(static_cast<size_t>(comm->nranks));
  InitRecord& mine = records[static_cast<size_t>(comm->rank)];
  mine.info = localPeerInfo(*comm);
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(records.data(), sizeof(InitRecord)));
  comm->peers.clear();
  for (const InitRecord& r : records) comm->peers.push_back(r.info);
  comm->localRanks = countLocalRanks(comm->peers, mine.info.hostHash);
  comm->machineRanks = static_cast<int>(std::count_if(comm->peers.begin(), comm->peers.end(), [&](const PeerInfo& p) {
    return p.machineHash == mine.info.machineHash;
  }));
  // Second round: proposals depend on how many ranks share this machine's cores.
  mine.proposal = localProposal(*comm, comm->machineRanks);
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(records.data(), sizeof(InitRecord)));
  Proposal agreed = mine.proposal;
  for (const InitRecord& r : records) {
    agreed.maxChannels = std::min(agreed.maxChannels, r.proposal.maxChannels);
    agreed.minChannels = std::min(agreed.minChannels, r.proposal.minChannels);
    agreed.chunkSteps = std::min(agreed.chunkSteps, r.proposal.chunkSteps);
    agreed.buffSize = std::min(agreed.buffSize, r.proposal.buffSize);
  }
  comm->channels.resize(static_cast<size_t>(agreed.maxChannels));
  comm->minChannels = std::min(agreed.minChannels, agreed.maxChannels);
  comm->chunkSteps = agreed.chunkSteps;
  comm->stepBytes = agreed.buffSize / device::kFifoSteps;
  return okStatus();
}

// The peers that are processes of this host (and pid namespace): waits on
// them notice their exit by pid, the bootstrap's (connection set-up) too.
void watchLocalProcesses(Comm* comm) {
  const PeerInfo& me = comm->peers[static_cast<size_t>(comm->rank)];
  comm->peerPids.assign(static_cast<size_t>(comm->nranks), 0);
  for (const PeerInfo& p : comm->peers)
    if (p.hostHash == me.hostHash && p.processHash != me.processHash && p.pidNamespace == me.pidNamespace)
      comm->peerPids[static_cast<size_t>(p.rank)] = p.pid;
  comm->bootstrap->watchProcesses(comm->peerPids);
}

void setupWaiting(Comm* comm) {
  int64_t spin = param::spinCount();
  const bool oversubscribed = comm->machineRanks > availableCores();
  comm->oversubscribed = oversubscribed;
  comm->waitConfig.abortFlag = &comm->abortFlag;
  comm->waitConfig.netFailed = &comm->netFailed;
  comm->waitConfig.peerFailed = &comm->peerFailed;
  comm->waitConfig.help = [](void* context) {
    proxy::ProgressEngine* engine = static_cast<Comm*>(context)->proxy.get();
    if (engine == nullptr) return false;
    Result<bool> moved = engine->tryProgress();
    return moved.ok() && moved.value();
  };
  comm->waitConfig.helpContext = comm;
  comm->waitConfig.spinCount = spin >= 0        ? static_cast<int>(spin)
                               : oversubscribed ? kOversubscribedSpinCount
                                                : kDefaultSpinCount;
  comm->waitConfig.timeoutNs = param::waitTimeoutSec() * 1000000000ll;
  comm->checkCalls = param::checkCalls() != 0;
  comm->waitConfig.peerCheckNs = std::max<int64_t>(1, param::peerCheckMs()) * 1000000ll;
  comm->waitConfig.spreadCores = !oversubscribed && param::spreadRanks() != 0 && comm->waitConfig.spinCount > 0;
  comm->waitConfig.peerPids = comm->peerPids.data();
  comm->waitConfig.nranks = comm->nranks;
  comm->waitConfig.rank = comm->rank;
  if (comm->backend == weftBackendHost) {
    comm->directPeers =
        std::make_unique<DirectPeers>(comm->rank, comm->nranks, param::cma() != 0, param::cmaTestRefuse() != 0);
    comm->waitConfig.direct = comm->directPeers.get();
  }
}

}  // namespace

Status checkBackends(const Comm& comm) {
  const PeerInfo& me = comm.peers[static_cast<size_t>(comm.rank)];
  for (const PeerInfo& p : comm.peers) {
    if (p.backend != me.backend)
      return errorStatus(ncclInvalidUsage,
                         "rank %d runs the %s backend but rank %d (host %s) the %s backend; set "
                         "WEFT_BACKEND the same on every rank",
                         comm.rank, me.backend == weftBackendCuda ? "cuda" : "host", p.rank, p.hostname,
                         p.backend == weftBackendCuda ? "cuda" : "host");
    const bool sharedGpu = me.backend == weftBackendCuda && p.hostHash == me.hostHash &&
                           p.processHash != me.processHash && std::strcmp(p.busId, me.busId) == 0;
    if (!sharedGpu || cuda::mpsEnabled(comm.cudaDev)) continue;
    if (param::shareGpuWithoutMps() != 1)
      return errorStatus(ncclInvalidUsage,
                         "rank %d (pid %d) and rank %d (pid %d) use GPU %s from different processes; their kernels "
                         "wait on each other and can only run together under MPS (start nvidia-cuda-mps-control -d), "
                         "or run these ranks as threads of one process (WEFT_SHARE_GPU_WITHOUT_MPS=1 lets them take "
                         "turns in time slices instead: correct but slow)",
                         comm.rank, me.pid, p.rank, p.pid, me.busId);
    static std::once_flag warned;
    std::call_once(warned, [&] {
      WEFT_WARN(
          "rank %d (pid %d) and rank %d (pid %d) share GPU %s from different processes without MPS "
          "(WEFT_SHARE_GPU_WITHOUT_MPS=1): their kernels take turns in time slices, and a hand-off between "
          "them may wait a slice (milliseconds)",
          comm.rank, me.pid, p.rank, p.pid, me.busId);
    });
  }
  return okStatus();
}

Status setupComm(Comm* comm) {
  log::ScopedRank scoped(comm->rank);
  comm->initTimes.bootstrap = comm->initTimes.sinceBegin();
  cuda::DeviceGuard device(comm->cudaDev);
  WEFT_RETURN_IF_ERROR(exchangePeers(comm));
  WEFT_RETURN_IF_ERROR(checkBackends(*comm));
  watchLocalProcesses(comm);
  WEFT_RETURN_IF_ERROR(buildChannels(comm));
  if (comm->backend == weftBackendCuda) {
    WEFT_RETURN_IF_ERROR(cudaSetup(comm));
    WEFT_RETURN_IF_ERROR(cudaMirrorChannels(comm));
  }
  WEFT_RETURN_IF_ERROR(connectChannels(comm));
  setupWaiting(comm);
  comm->executor = std::make_unique<HostExecutor>(comm->rank);
  // Init is a barrier: no rank returns (and may then destroy, or exit)
  // before every rank has attached to what it set up for its peers.
  WEFT_RETURN_IF_ERROR(comm->bootstrap->finalBarrier());
  comm->state.store(static_cast<int>(CommState::kReady));
  comm->asyncError.store(ncclSuccess);
  watchFailureNotices(comm);  // after the stores above, which it may overwrite
  comm->profiler = ProfilerSession::open(comm->config.commName, comm->commHash, comm->nnodes, comm->nranks, comm->rank);
  WEFT_INFO(log::kInit,
            "comm %p rank %d nranks %d localRanks %d backend %s device %d channels %zu (min %d) buffSize %lld - "
            "Init COMPLETE",
            static_cast<void*>(comm), comm->rank, comm->nranks, comm->localRanks,
            comm->backend == weftBackendCuda ? "cuda" : "host", comm->cudaDev, comm->channels.size(), comm->minChannels,
            static_cast<long long>(comm->stepBytes * device::kFifoSteps));
  logInitTimings(*comm);
  return okStatus();
}

Status initComm(Comm* comm, const UniqueIdContents& id) {
  log::ScopedRank scoped(comm->rank);
  comm->initTimes.begin = InitTimings::Clock::now();
  WEFT_INFO(log::kInit, "ncclCommInitRank comm %p rank %d nranks %d - Init START", static_cast<void*>(comm), comm->rank,
            comm->nranks);
  if (comm->rank == 0 && !param::commId().empty()) WEFT_RETURN_IF_ERROR(startRootForCommId(id));
  const int swept = removeShmOfDeadProcesses();
  if (swept > 0) WEFT_INFO(log::kInit, "removed %d shared-memory segments left by processes that died", swept);
  auto joined = Bootstrap::join(id, comm->rank, comm->nranks, &comm->abortFlag);
  if (!joined.ok()) return joined.status();
  comm->bootstrap = std::move(joined).value();
  comm->commHash = hashBytes(&id.secret, sizeof(id.secret));
  return setupComm(comm);
}

}  // namespace weft::core
