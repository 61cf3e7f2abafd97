// Collectives and point-to-point entry points. The stream argument is
// ignored on the host backend: operations complete before returning, or at
// the outermost ncclGroupEnd.
#include "core/api.h"
#include "core/api_log.h"
#include "core/comm.h"
#include "core/comm_registry.h"
#include "core/datatypes.h"
#include "core/enqueue.h"
#include "core/group.h"

using namespace weft::core;
using weft::device::Func;

namespace {

// A collective call. The thread that holds the communicator's bias
// (core/exec_lock.h) runs a repeat of its last call without the lock or
// the API call count: on x86 no locked instruction at all, so the call's
// stores to the peers' lines complete while the caller goes on. Anything
// else, and any call that does not qualify, takes the general path.
ncclResult_t collectiveCall(const char* api, ncclComm_t comm, const CollArgs& args) noexcept {
  if (callLogging())
    logCall({api + 4, args.sendbuff, args.recvbuff, args.count, args.datatype, static_cast<int>(args.op), args.root,
             comm, args.stream});
  Comm* c = asComm(comm);
  if (isLiveComm(c) && c->execMutex.tryEnterBiased()) {
    weft::Status status;
    bool ran = false;
    try {
      ran = repeatBiased(c, args, &status);
    } catch (...) {  // only a failure's message can throw (out of memory)
      ran = true;
      status = weft::Status(ncclSystemError, "out of host memory");
    }
    if (!ran) {
      c->execMutex.leaveBiased();
    } else if (status.ok()) {
      c->execMutex.leaveBiased();
      return ncclSuccess;
    } else {
      // Counted before leaving: an abort waiting for the section must not
      // free the comm while its error is recorded.
      const ApiCallScope scope(comm);
      c->execMutex.leaveBiased();
      return finishApiCall(api, comm, status);
    }
  }
  return apiCall<false>(api, comm, [&] { return enqueueColl(comm, args); });
}

}  // namespace

WEFT_NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collectiveCall("ncclAllReduce", comm, {Func::kAllReduce, sendbuff, recvbuff, count, datatype, op, 0, stream});
}

WEFT_NCCL_API(ncclResult_t, ncclReduce, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream) {
  return collectiveCall("ncclReduce", comm, {Func::kReduce, sendbuff, recvbuff, count, datatype, op, root, stream});
}

WEFT_NCCL_API(ncclResult_t, ncclBroadcast, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  return collectiveCall("ncclBroadcast", comm,
                        {Func::kBroadcast, sendbuff, recvbuff, count, datatype, ncclSum, root, stream});
}

WEFT_NCCL_API(ncclResult_t, ncclBcast, void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
              cudaStream_t stream) {
  return collectiveCall("ncclBcast", comm, {Func::kBroadcast, buff, buff, count, datatype, ncclSum, root, stream});
}

WEFT_NCCL_API(ncclResult_t, ncclAllGather, const void* sendbuff, void* recvbuff, size_t sendcount,
              ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return collectiveCall("ncclAllGather", comm,
                        {Func::kAllGather, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0, stream});
}

WEFT_NCCL_API(ncclResult_t, ncclReduceScatter, const void* sendbuff, void* recvbuff, size_t recvcount,
              ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return collectiveCall("ncclReduceScatter", comm,
                        {Func::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, op, 0, stream});
}

WEFT_NCCL_API(ncclResult_t, ncclSend, const void* sendbuff, size_t count, ncclDataType_t datatype, int peer,
              ncclComm_t comm, cudaStream_t stream) {
  if (callLogging()) logCall({"Send", sendbuff, nullptr, count, datatype, ncclSum, peer, comm, stream});
  return apiCall<false>("ncclSend", comm,
                        [&] { return enqueueP2p(comm, true, sendbuff, count, datatype, peer, stream); });
}

WEFT_NCCL_API(ncclResult_t, ncclRecv, void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
              cudaStream_t stream) {
  if (callLogging()) logCall({"Recv", nullptr, recvbuff, count, datatype, ncclSum, peer, comm, stream});
  return apiCall<false>("ncclRecv", comm,
                        [&] { return enqueueP2p(comm, false, recvbuff, count, datatype, peer, stream); });
}

namespace {

// Byte offset of rank `r`'s block of `count` elements.
size_t blockOffset(int r, size_t count, ncclDataType_t datatype) {
  return static_cast<size_t>(r) * count * typeSize(datatype);
}

weft::Status checkRoot(ncclComm_t comm, int root) {
  WEFT_RETURN_IF_ERROR(ensureUsable(comm));
  const int nranks = asComm(comm)->nranks;
  if (root < 0 || root >= nranks)
    return weft::errorStatus(ncclInvalidArgument, "root is %d, expected a rank in 0..%d", root, nranks - 1);
  return weft::okStatus();
}

weft::Status checkTypeArg(ncclDataType_t datatype) {
  if (!validDataType(datatype))
    return weft::errorStatus(ncclInvalidArgument, "datatype is %d, expected an ncclDataType_t in 0..%d",
                             static_cast<int>(datatype), ncclNumTypes - 1);
  return weft::okStatus();
}

}  // namespace

WEFT_NCCL_API(ncclResult_t, ncclAlltoAll, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              ncclComm_t comm, cudaStream_t stream) {
  if (callLogging()) logCall({"AlltoAll", sendbuff, recvbuff, count, datatype, ncclSum, 0, comm, stream});
  return apiCall<false>("ncclAlltoAll", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(ensureUsable(comm));
    WEFT_RETURN_IF_ERROR(checkTypeArg(datatype));
    const int nranks = asComm(comm)->nranks;
    GroupScope group;
    for (int r = 0; r < nranks; ++r) {
      WEFT_RETURN_IF_ERROR(enqueueP2p(comm, true, static_cast<const char*>(sendbuff) + blockOffset(r, count, datatype),
                                      count, datatype, r, stream));
      WEFT_RETURN_IF_ERROR(enqueueP2p(comm, false, static_cast<char*>(recvbuff) + blockOffset(r, count, datatype),
                                      count, datatype, r, stream));
    }
    return group.end();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclGather, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  if (callLogging()) logCall({"Gather", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
  return apiCall<false>("ncclGather", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkRoot(comm, root));
    WEFT_RETURN_IF_ERROR(checkTypeArg(datatype));
    const Comm* c = asComm(comm);
    GroupScope group;
    WEFT_RETURN_IF_ERROR(enqueueP2p(comm, true, sendbuff, count, datatype, root, stream));
    if (c->rank == root) {
      for (int r = 0; r < c->nranks; ++r)
        WEFT_RETURN_IF_ERROR(enqueueP2p(comm, false, static_cast<char*>(recvbuff) + blockOffset(r, count, datatype),
                                        count, datatype, r, stream));
    }
    return group.end();
  });
}

WEFT_NCCL_API(ncclResult_t, ncclScatter, const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
              int root, ncclComm_t comm, cudaStream_t stream) {
  if (callLogging()) logCall({"Scatter", sendbuff, recvbuff, count, datatype, ncclSum, root, comm, stream});
  return apiCall<false>("ncclScatter", comm, [&]() -> weft::Status {
    WEFT_RETURN_IF_ERROR(checkRoot(comm, root));
    WEFT_RETURN_IF_ERROR(checkTypeArg(datatype));
    const Comm* c = asComm(comm);
    GroupScope group;
    if (c->rank == root) {
      for (int r = 0; r < c->nranks; ++r)
        WEFT_RETURN_IF_ERROR(enqueueP2p(comm, true,
                                        static_cast<const char*>(sendbuff) + blockOffset(r, count, datatype), count,
                                        datatype, r, stream));
    }
    WEFT_RETURN_IF_ERROR(enqueueP2p(comm, false, recvbuff, count, datatype, root, stream));
    return group.end();
  });
}
