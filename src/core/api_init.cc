// Communicator life cycle: unique id, init, split, finalize, destroy, abort.
#include <memory>
#include <thread>
#include <vector>

#include "common/log.h"
#include "common/shm.h"
#include "core/api.h"
#include "core/api_log.h"
#include "core/comm.h"
#include "core/comm_registry.h"
#include "core/cuda_backend.h"
#include "core/failure.h"
#include "core/group.h"
#include "core/init.h"
#include "core/split.h"
#include "core/unique_id.h"

namespace weft::core {
namespace {

Status checkOut(const void* out, const char* name) {
  if (out == nullptr)
    return errorStatus(ncclInvalidArgument, "%s is NULL, expected a pointer to store the result", name);
  return okStatus();
}

void markInitResult(Comm* comm, const Status& status) {
  if (status.ok()) return;
  std::lock_guard<ExecLock> lock(comm->execMutex);
  comm->failure = status;
  comm->state.store(static_cast<int>(CommState::kFailed));
  comm->asyncError.store(status.code());
}

// The backend and, for cuda, the device: the caller's current device unless
// ncclCommInitAll names one.
Status bindBackend(Comm* comm, int device) {
  WEFT_ASSIGN_OR_RETURN(comm->backend, chooseBackend());
  showVersionOnce(comm->backend);
  comm->gpusVisible = cuda::deviceCount() > 0;
  if (comm->backend != weftBackendCuda) return okStatus();
  if (device < 0) {
    WEFT_ASSIGN_OR_RETURN(device, cuda::currentDevice());
  }
  if (device >= cuda::deviceCount())
    return errorStatus(ncclInvalidArgument, "device %d does not exist (%d visible GPUs)", device, cuda::deviceCount());
  comm->cudaDev = device;
  return okStatus();
}

// Validates arguments, creates the communicator object and runs (or defers,
// or backgrounds) its initialisation.
Status initRank(ncclComm_t* out, int nranks, const ncclUniqueId& id, int rank, const ncclConfig_t* config,
                int device = -1) {
  WEFT_RETURN_IF_ERROR(checkOut(out, "comm"));
  *out = nullptr;
  if (nranks < 1) return errorStatus(ncclInvalidArgument, "nranks is %d, expected at least 1", nranks);
  if (rank < 0 || rank >= nranks)
    return errorStatus(ncclInvalidArgument, "rank is %d, expected 0..%d (nranks %d)", rank, nranks - 1, nranks);
  WEFT_ASSIGN_OR_RETURN(UniqueIdContents contents, unpackUniqueId(id));
  WEFT_ASSIGN_OR_RETURN(CommConfig parsed, parseConfig(config));
  auto comm = std::make_unique<ncclComm>();
  comm->rank = rank;
  comm->nranks = nranks;
  comm->config = parsed;
  WEFT_RETURN_IF_ERROR(bindBackend(comm.get(), device));
  Comm* raw = comm.get();
  auto run = [raw, contents]() {
    Status status = initComm(raw, contents);
    // The peers may be waiting on this rank in init: tell them, naming the
    // rank found gone if that is why.
    if (!status.ok() && raw->abortFlag.load() == 0) reportInitFailure(raw, status);
    markInitResult(raw, status);
    return status.withContext(strFormat("init of rank %d", raw->rank));
  };
  if (inGroup()) {
    groupDeferInit(raw, run);
    *out = comm.release();
    return okStatus();
  }
  if (!parsed.blocking) {
    raw->initThread = std::thread([run] { (void)run(); });
    *out = comm.release();
    return Status(ncclInProgress, "");
  }
  WEFT_RETURN_IF_ERROR(run());
  *out = comm.release();
  return okStatus();
}

// Frees the communicator. Abort first stops anything running on it.
Status destroyComm(ncclComm_t handle, bool abort) {
  WEFT_RETURN_IF_ERROR(checkComm(handle));
  Comm* comm = asComm(handle);
  // Calls made from now on are refused; those in flight are waited out below.
  unregisterComm(comm);
  if (abort) {
    // Peers blocked on this rank fail at once rather than at their timeout.
    // Only once init is over (the init thread no longer sets the bootstrap):
    // peers waiting on this rank in init find it gone by probing its listener.
    const int state = comm->state.load();
    if (state == static_cast<int>(CommState::kReady) || state == static_cast<int>(CommState::kFailed))
      reportFailure(comm, comm->rank, errorStatus(ncclInvalidUsage, "rank %d called ncclCommAbort", comm->rank));
    comm->abortFlag.store(1);
  }
  if (comm->initThread.joinable()) comm->initThread.join();
  { std::lock_guard<ExecLock> lock(comm->execMutex); }  // in-flight operations have returned
  // ...and left the library (they may still be recording their error).
  while (comm->apiCalls.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (!abort) {
    Status drained = drainProxy(comm);
    if (!drained.ok()) WEFT_WARN_STATUS(drained);
  }
  Status idle = cudaWaitIdle(comm, abort);
  if (!idle.ok()) {
    // Kernels still hold the FIFOs, and poll the abort flag and write the
    // wait reports in the cuda state: leak both rather than free memory in use.
    WEFT_WARN_STATUS(idle);
    new std::vector<Channel>(std::move(comm->channels));
    (void)comm->cuda.release();
  }
  WEFT_INFO(log::kInit, "comm %p rank %d nranks %d - %s COMPLETE", static_cast<void*>(comm), comm->rank, comm->nranks,
            abort ? "Abort" : "Destroy");
  const bool failed = abort || comm->state.load() == static_cast<int>(CommState::kFailed);
  unwatchFailureNotices(comm);
  delete static_cast<ncclComm*>(handle);
  // A peer that died may have left segments nobody else can name.
  if (failed) removeShmOfDeadProcesses();
  return okStatus();
}

// ncclCommSplit and ncclCommShrink: the new handle cleared, the parent
// checked, the child's config (the caller's, or with NULL the parent's),
// then `make` builds the child.
template <typename Make>
Status makeChildComm(ncclComm_t comm, ncclComm_t* newcomm, ncclConfig_t* config, Make&& make) {
  WEFT_RETURN_IF_ERROR(checkOut(newcomm, "newcomm"));
  *newcomm = nullptr;
  WEFT_RETURN_IF_ERROR(checkComm(comm));
  CommConfig childConfig = asComm(comm)->config;
  if (config != nullptr) {
    WEFT_ASSIGN_OR_RETURN(childConfig, parseConfig(config));
  }
  Comm* child = nullptr;
  WEFT_RETURN_IF_ERROR(make(asComm(comm), childConfig, &child));
  *newcomm = static_cast<ncclComm*>(child);
  return okStatus();
}

}  // namespace
}  // namespace weft::core

using namespace weft::core;

WEFT_NCCL_API(ncclResult_t, ncclGetVersion, int* version) {
  return apiCall("ncclGetVersion", nullptr, [&] {
    WEFT_RETURN_IF_ERROR(checkOut(version, "version"));
    *version = NCCL_VERSION_CODE;
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclGetUniqueId, ncclUniqueId* uniqueId) {
  return apiCall("ncclGetUniqueId", nullptr, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkOut(uniqueId, "uniqueId"));
    WEFT_ASSIGN_OR_RETURN(UniqueIdContents contents, createUniqueId());
    *uniqueId = packUniqueId(contents);
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommInitRankConfig, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank,
              ncclConfig_t* config) {
  return apiCall("ncclCommInitRankConfig", nullptr, [&] { return initRank(comm, nranks, commId, rank, config); });
}

WEFT_NCCL_API(ncclResult_t, ncclCommInitRank, ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return apiCall("ncclCommInitRank", nullptr, [&] { return initRank(comm, nranks, commId, rank, nullptr); });
}

WEFT_NCCL_API(ncclResult_t, ncclCommInitRankScalable, ncclComm_t* newcomm, int nranks, int myrank, int nId,
              ncclUniqueId* commIds, ncclConfig_t* config) {
  return apiCall("ncclCommInitRankScalable", nullptr, [&]() -> weft::Status {
    if (nId < 1 || commIds == nullptr)
      return weft::errorStatus(ncclInvalidArgument, "nId is %d and commIds %p, expected at least one unique id", nId,
                               static_cast<void*>(commIds));
    // One root serves every rank here; the extra ids exist to spread the
    // load of very large jobs, which a single root handles below that scale.
    return initRank(newcomm, nranks, commIds[0], myrank, config);
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommInitAll, ncclComm_t* comm, int ndev, const int* devlist) {
  return apiCall("ncclCommInitAll", nullptr, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkOut(comm, "comm"));
    if (ndev < 1) return weft::errorStatus(ncclInvalidArgument, "ndev is %d, expected at least 1", ndev);
    WEFT_ASSIGN_OR_RETURN(weftBackend_t backend, chooseBackend());
    if (backend == weftBackendCuda && devlist == nullptr && ndev > weft::cuda::deviceCount())
      return weft::errorStatus(ncclInvalidArgument,
                               "ndev is %d but only %d GPUs are visible; pass devlist to put "
                               "several ranks on one GPU",
                               ndev, weft::cuda::deviceCount());
    WEFT_ASSIGN_OR_RETURN(UniqueIdContents contents, createUniqueId());
    const ncclUniqueId id = packUniqueId(contents);
    WEFT_RETURN_IF_ERROR(groupStart());
    weft::Status first;
    for (int i = 0; i < ndev; ++i) {
      const int device = backend == weftBackendCuda ? (devlist != nullptr ? devlist[i] : i) : -1;
      weft::Status s = initRank(&comm[i], ndev, id, i, nullptr, device);
      if (!s.ok() && first.ok()) first = s;
    }
    weft::Status ended = groupEnd();
    if (first.ok()) first = ended;
    if (!first.ok()) {
      for (int i = 0; i < ndev; ++i)
        if (comm[i] != nullptr) (void)destroyComm(comm[i], true), comm[i] = nullptr;
    }
    return first;
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommSplit, ncclComm_t comm, int color, int key, ncclComm_t* newcomm,
              ncclConfig_t* config) {
  return apiCall("ncclCommSplit", comm, [&] {
    return makeChildComm(comm, newcomm, config, [&](Comm* parent, const CommConfig& childConfig, Comm** child) {
      return splitComm(parent, color, key, childConfig, child);
    });
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommShrink, ncclComm_t comm, int* excludeRanksList, int excludeRanksCount,
              ncclComm_t* newcomm, ncclConfig_t* config, int shrinkFlags) {
  return apiCall("ncclCommShrink", comm, [&] {
    return makeChildComm(comm, newcomm, config, [&](Comm* parent, const CommConfig& childConfig, Comm** child) {
      return shrinkComm(parent, excludeRanksList, excludeRanksCount, childConfig, shrinkFlags, child);
    });
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommFinalize, ncclComm_t comm) {
  return apiCall("ncclCommFinalize", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkComm(comm));
    Comm* c = asComm(comm);
    if (c->initThread.joinable()) c->initThread.join();
    // Host operations complete before their call returns; cuda ones are
    // waited for here. Our FIFO memory outlives any peer still using it.
    WEFT_RETURN_IF_ERROR(cudaWaitIdle(c, false));
    WEFT_RETURN_IF_ERROR(cudaKernelFailure(*c));  // why they stopped, if they were stopped
    std::lock_guard<ExecLock> lock(c->execMutex);
    WEFT_RETURN_IF_ERROR(drainProxy(c));
    if (c->state.load() == static_cast<int>(CommState::kReady)) c->state.store(static_cast<int>(CommState::kFinalized));
    return weft::okStatus();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclCommDestroy, ncclComm_t comm) {
  return apiCall("ncclCommDestroy", nullptr, [&] { return destroyComm(comm, false); });
}

WEFT_NCCL_API(ncclResult_t, ncclCommAbort, ncclComm_t comm) {
  return apiCall("ncclCommAbort", nullptr, [&] { return destroyComm(comm, true); });
}
