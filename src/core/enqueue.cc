#include "core/enqueue.h"

#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/datatypes.h"
#include "core/failure.h"
#include "core/group.h"
#include "core/launch.h"

namespace weft::core {
namespace {

const char* funcName(device::Func func) {
  switch (func) {
    case device::Func::kAllReduce: return "AllReduce";
    case device::Func::kAllGather: return "AllGather";
    case device::Func::kReduceScatter: return "ReduceScatter";
    case device::Func::kBroadcast: return "Broadcast";
    case device::Func::kReduce: return "Reduce";
    default: return "SendRecv";
  }
}

bool reduces(device::Func func) {
  return func == device::Func::kAllReduce || func == device::Func::kReduceScatter || func == device::Func::kReduce;
}

Status checkType(ncclDataType_t datatype) {
  if (!validDataType(datatype))
    return errorStatus(ncclInvalidArgument, "datatype is %d, expected an ncclDataType_t in 0..%d",
                       static_cast<int>(datatype), ncclNumTypes - 1);
  return okStatus();
}

Status checkBytes(size_t count, ncclDataType_t datatype, int factor) {
  size_t bytes = 0;  // multiplications with an overflow flag: no division on every call
  if (__builtin_mul_overflow(count, typeSize(datatype), &bytes) ||
      __builtin_mul_overflow(bytes, static_cast<size_t>(factor), &bytes))
    return errorStatus(ncclInvalidArgument, "count is %zu, too large: count x sizeof(%s) x %d overflows", count,
                       typeName(datatype), factor);
  return okStatus();
}

Status checkBuffer(const Comm& comm, const char* name, const void* buff, size_t count) {
  if (count == 0) return okStatus();
  if (buff == nullptr)
    return errorStatus(ncclInvalidArgument, "%s is NULL with count %zu, expected a buffer", name, count);
  return checkBufferKind(comm, name, buff);
}

Status checkRank(const char* name, int value, int nranks) {
  if (value < 0 || value >= nranks)
    return errorStatus(ncclInvalidArgument, "%s is %d, expected a rank in 0..%d", name, value, nranks - 1);
  return okStatus();
}

// Which buffers a rank must pass: only the root of a Broadcast reads
// sendbuff; Reduce writes recvbuff only at the root.
bool needsSendbuff(const Comm& comm, const CollArgs& a) {
  return a.func != device::Func::kBroadcast || comm.rank == a.root;
}
bool needsRecvbuff(const Comm& comm, const CollArgs& a) {
  return a.func != device::Func::kReduce || comm.rank == a.root;
}

Status checkCollBuffers(const Comm& comm, const CollArgs& a) {
  if (needsSendbuff(comm, a)) WEFT_RETURN_IF_ERROR(checkBuffer(comm, "sendbuff", a.sendbuff, a.count));
  if (needsRecvbuff(comm, a)) WEFT_RETURN_IF_ERROR(checkBuffer(comm, "recvbuff", a.recvbuff, a.count));
  return okStatus();
}

Status submit(Comm* comm) {
  if (inGroup()) {
    groupAddComm(comm);
    return okStatus();
  }
  return launchComm(comm);
}

Status recordInGroup(Status status) {
  if (!status.ok()) groupRecordError(status);
  return status;
}

}  // namespace

Status ensureInitialised(Comm* comm) {
  if (comm->state.load() == static_cast<int>(CommState::kInitializing)) {
    if (!comm->initThread.joinable())
      return errorStatus(ncclInvalidUsage, "comm %p is initialised by the enclosing group: call ncclGroupEnd first",
                         static_cast<void*>(comm));
    comm->initThread.join();
  }
  if (comm->state.load() == static_cast<int>(CommState::kFinalized))
    return errorStatus(ncclInvalidUsage, "comm %p was finalized; only ncclCommDestroy may follow",
                       static_cast<void*>(comm));
  return okStatus();
}

Status ensureUsable(ncclComm_t handle) {
  WEFT_RETURN_IF_ERROR(checkComm(handle));
  Comm* comm = asComm(handle);
  WEFT_RETURN_IF_ERROR(ensureInitialised(comm));
  switch (static_cast<CommState>(comm->state.load())) {
    case CommState::kFailed: {
      std::lock_guard<ExecLock> lock(comm->execMutex);
      if (!comm->failure.ok()) return comm->failure;
      const Status noticed = noticedFailure(*comm);  // marked failed by another rank's notice
      return noticed.ok() ? errorStatus(ncclInvalidUsage, "comm %p failed earlier", static_cast<void*>(comm)) : noticed;
    }
    default: return okStatus();
  }
}

Status enqueueColl(ncclComm_t handle, const CollArgs& a) {
  Status usable = ensureUsable(handle);
  if (!usable.ok()) return recordInGroup(usable);
  Comm* comm = asComm(handle);
  auto check = [&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkType(a.datatype));
    const bool perRank = a.func == device::Func::kAllGather || a.func == device::Func::kReduceScatter;
    WEFT_RETURN_IF_ERROR(checkBytes(a.count, a.datatype, perRank ? comm->nranks : 1));
    if (a.func == device::Func::kBroadcast || a.func == device::Func::kReduce)
      WEFT_RETURN_IF_ERROR(checkRank("root", a.root, comm->nranks));
    return checkCollBuffers(*comm, a);
  };
  Status checked = check();
  if (!checked.ok()) return recordInGroup(checked.withContext(funcName(a.func)));
  CollTask task{a.func, a.sendbuff, a.recvbuff, a.count, a.datatype, ResolvedOp{}, a.root, a.stream, a.op};
  if (reduces(a.func)) {
    Result<ResolvedOp> op = comm->ops.resolve(a.op, a.datatype, comm->nranks);
    if (!op.ok()) return recordInGroup(op.status().withContext(funcName(a.func)));
    task.op = op.value();
  }
  if (a.count == 0) return okStatus();
  if (inGroup()) {
    comm->collTasks.push_back(task);
    groupAddComm(comm);
    return okStatus();
  }
  return launchColl(comm, task);
}

bool repeatBiased(Comm* comm, const CollArgs& a, Status* status) {
  // Exactly the planned call's arguments but the buffers: then every check
  // enqueueColl makes passed for it already, but the buffers' own. A
  // created op is left to the general path (its handle may have been
  // destroyed and made again with another scalar), and so are buffers that
  // could be device memory.
  const CollTask& planned = comm->plannedTask;
  if (comm->state.load() != static_cast<int>(CommState::kReady) || !repeatable(*comm) || inGroup() ||
      planned.func != a.func || planned.count != a.count || planned.dtype != a.datatype || planned.root != a.root ||
      planned.rawOp != a.op || a.op < 0 || a.op >= ncclNumOps || comm->gpusVisible)
    return false;
  if ((needsSendbuff(*comm, a) && a.sendbuff == nullptr) || (needsRecvbuff(*comm, a) && a.recvbuff == nullptr))
    return false;
  runRepeat(comm, a.sendbuff, a.recvbuff, status);
  return true;
}

Status enqueueP2p(ncclComm_t handle, bool isSend, const void* buff, size_t count, ncclDataType_t datatype, int peer,
                  cudaStream_t stream) {
  Status usable = ensureUsable(handle);
  if (!usable.ok()) return recordInGroup(usable);
  Comm* comm = asComm(handle);
  auto check = [&]() -> Status {
    WEFT_RETURN_IF_ERROR(checkType(datatype));
    WEFT_RETURN_IF_ERROR(checkBytes(count, datatype, 1));
    WEFT_RETURN_IF_ERROR(checkRank("peer", peer, comm->nranks));
    return checkBuffer(*comm, isSend ? "sendbuff" : "recvbuff", buff, count);
  };
  Status checked = check();
  if (!checked.ok()) return recordInGroup(checked.withContext(isSend ? "Send" : "Recv"));
  P2pTask task{isSend,
               peer,
               isSend ? buff : nullptr,
               isSend ? nullptr : const_cast<void*>(buff),
               count * typeSize(datatype),
               stream,
               datatype,
               count};
  comm->p2pTasks.push_back(task);
  return submit(comm);
}

}  // namespace weft::core
