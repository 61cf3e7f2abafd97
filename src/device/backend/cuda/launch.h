// Host-side entry into the kernels (implemented in kernels.cu).
#pragma once

#include "device/backend/cuda/kernel_args.h"

struct CUstream_st;

namespace weft::device {

// Launches the kernel for `key` with one block per channel. Returns 0 or a
// cudaError_t value; kNotBuilt when the instantiation was filtered out at
// build time (WEFT_CUDA_TYPES / WEFT_CUDA_OPS).
constexpr int kKernelNotBuilt = -1;
int launchKernel(const KernelKey& key, const KernelArgs& args, int threadsPerBlock, CUstream_st* stream);

}  // namespace weft::device
