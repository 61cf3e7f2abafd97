// The kernels: one block per channel, each running its channel's work items
// in order with the same algorithm templates the host backend runs.
#pragma once

#include "device/backend/cuda/cuda_coop.cuh"
#include "device/backend/cuda/kernel_args.h"
#include "device/run_work.h"

namespace weft::device {

template <typename T, RedOpKind K>
__global__ void __launch_bounds__(1024) reducingKernel(const __grid_constant__ KernelArgs args) {
  __shared__ int scratch[2];
  CudaCoop coop(args.abortFlag, scratch, args.reports + blockIdx.x, args.timeoutNs, args.windows);
  const KernelChannel& channel = args.channels[blockIdx.x];
  for (int i = 0; i < channel.itemCount && !coop.failed(); ++i) {
    if (i > 0) coop.sync();  // the leader's write-back of FIFO positions, before every thread reloads them
    const WorkItem& item = args.items[channel.firstItem + i];
    coop.setCallSignature(itemSignature(item));
    runReducingOp<T, K>(coop, channel.view, item.coll);
  }
}

__global__ void __launch_bounds__(1024) dataOnlyKernel(const __grid_constant__ KernelArgs args);

// Function pointer of the reducing kernel for (T, K), for the launch table.
using KernelFn = void (*)(KernelArgs);

}  // namespace weft::device
