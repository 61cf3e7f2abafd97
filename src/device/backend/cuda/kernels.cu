// CUDA kernels: the portable algorithms instantiated with the block team.
// One block per channel; the launch path arrives with the cuda backend.
#include "device/backend/cuda/cuda_coop.cuh"
#include "device/run_work.h"

namespace weft::device {

template <typename T>
__global__ void reducingKernel(const ChannelView* channels, const CollWork* works, const uint32_t* abortFlag) {
  __shared__ int scratch[2];
  CudaCoop coop(abortFlag, scratch);
  runReducing<T>(coop, channels[blockIdx.x], works[blockIdx.x]);
}

__global__ void dataOnlyKernel(const ChannelView* channels, const CollWork* works, const uint32_t* abortFlag) {
  __shared__ int scratch[2];
  CudaCoop coop(abortFlag, scratch);
  runDataOnly(coop, channels[blockIdx.x], works[blockIdx.x]);
}

__global__ void sendRecvKernel(const ChannelView* channels, const P2pWork* works, const uint32_t* abortFlag) {
  __shared__ int scratch[2];
  CudaCoop coop(abortFlag, scratch);
  runSendRecv(coop, works[blockIdx.x], channels[blockIdx.x].id);
}

// The instantiation list (a developer filter arrives with the launch path).
template __global__ void reducingKernel<float>(const ChannelView*, const CollWork*, const uint32_t*);
template __global__ void reducingKernel<half_t>(const ChannelView*, const CollWork*, const uint32_t*);
template __global__ void reducingKernel<int32_t>(const ChannelView*, const CollWork*, const uint32_t*);

}  // namespace weft::device
