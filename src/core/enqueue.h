// Entry of collectives and point-to-point calls: argument checks (each
// failure names the argument, its value and what was expected), then a task
// on the communicator, launched now or at the outermost ncclGroupEnd.
#pragma once

#include <cstddef>

#include "common/status.h"
#include "device/work.h"
#include "nccl.h"

namespace weft::core {

struct Comm;

struct CollArgs {
  device::Func func;
  const void* sendbuff;
  void* recvbuff;
  size_t count;
  ncclDataType_t datatype;
  ncclRedOp_t op;  // ignored by data-only collectives
  int root;        // Broadcast and Reduce
  cudaStream_t stream;
};

Status enqueueColl(ncclComm_t comm, const CollArgs& args);

// The repeat of the comm's last collective by the thread that holds its
// ExecLock's bias, inside the biased section (core/exec_lock.h): runs it
// when the call qualifies (same arguments as the planned call but the
// buffers, none of them null, outside a group, comm ready) and returns
// true with the outcome in *status; otherwise does nothing and returns
// false (the general path then checks and reports).
bool repeatBiased(Comm* comm, const CollArgs& args, Status* status);
Status enqueueP2p(ncclComm_t comm, bool isSend, const void* buff, size_t count, ncclDataType_t datatype, int peer,
                  cudaStream_t stream);

// Blocks until a non-blocking init has finished; fails if the communicator
// failed, was finalized, or is still waiting for its group to end.
Status ensureUsable(ncclComm_t comm);
// The same for a call that also serves a failed communicator
// (ncclCommShrink): waits for init, fails only on the group and finalize.
Status ensureInitialised(Comm* comm);

}  // namespace weft::core
