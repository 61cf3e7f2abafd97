// Operations queued on a communicator between a call and its launch.
#pragma once

#include <cstddef>

#include "core/redop.h"
#include "device/work.h"
#include "nccl.h"

namespace weft::core {

struct CollTask {
  device::Func func;
  const void* sendbuff;
  void* recvbuff;
  size_t count;  // AllGather: per-rank send count; ReduceScatter: per-rank recv count
  ncclDataType_t dtype;
  ResolvedOp op;
  int root;
  cudaStream_t stream;
  ncclRedOp_t rawOp = ncclSum;  // the op as the caller passed it (a repeat compares it)
};

struct P2pTask {
  bool isSend;
  int peer;
  const void* sendbuff;  // isSend
  void* recvbuff;        // !isSend
  size_t bytes;
  cudaStream_t stream;
  ncclDataType_t dtype = ncclInt8;  // as called (a profiler's event reports them)
  size_t count = 0;
};

}  // namespace weft::core
