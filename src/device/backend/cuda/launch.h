// Host-side entry into the kernels (implemented in kernels.cu).
#pragma once

#include <stddef.h>

#include "device/backend/cuda/kernel_args.h"

struct CUstream_st;

namespace weft::device {

// Launches the kernel for `key` with one block per channel. Returns 0 or a
// cudaError_t value; kNotBuilt when the instantiation was filtered out at
// build time (WEFT_CUDA_TYPES / WEFT_CUDA_OPS).
constexpr int kKernelNotBuilt = -1;
int launchKernel(const KernelKey& key, const KernelArgs& args, int threadsPerBlock, CUstream_st* stream);

// The most local memory (stack) per thread that any built kernel needs, in
// bytes, on the current device; 0 when none is built or it cannot be asked.
// Reserved once at init (core/cuda_backend.cc) so that no launch has to
// grow the stack, which the driver may do only once earlier work finished.
size_t kernelStackBytes();

// How many blocks of `threadsPerBlock` threads of every built kernel the
// current device holds at once (the least over the kernels, times the
// multiprocessors); 0 when it cannot be asked. Ranks sharing a GPU wait on
// each other's blocks, so all of them must fit at once.
int residentBlocks(int threadsPerBlock);

}  // namespace weft::device
