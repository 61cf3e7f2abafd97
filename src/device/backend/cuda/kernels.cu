// The data-only kernel, and the launch table over the per-type reducing
// kernels (generated from kernels_type.cu.in, one translation unit per type
// so the build parallelises and a developer can filter instantiations).
#include <cuda_runtime.h>

#include "device/backend/cuda/kernels.cuh"
#include "device/backend/cuda/launch.h"

namespace weft::device {

__global__ void __launch_bounds__(1024) dataOnlyKernel(const __grid_constant__ KernelArgs args) {
  __shared__ int scratch[2];
  CudaCoop coop(args.abortFlag, scratch, args.reports + blockIdx.x, args.timeoutNs, args.windows);
  const KernelChannel& channel = args.channels[blockIdx.x];
  for (int i = 0; i < channel.itemCount && !coop.failed(); ++i) {
    // Items of one batch can share FIFOs: only the leader writes positions
    // back when an item ends, and every thread reloads them when the next
    // begins, so the block waits for that write first.
    if (i > 0) coop.sync();
    const WorkItem& item = args.items[channel.firstItem + i];
    coop.setCallSignature(itemSignature(item));
    if (item.kind == WorkItem::Kind::kColl)
      runDataOnly(coop, channel.view, item.coll);
    else
      runSendRecv(coop, item.p2p, channel.view.id);
  }
}

#define WEFT_DECLARE_KERNEL_TABLE(kind) KernelFn reducingKernelFor_##kind(RedOpKind op);
WEFT_DECLARE_KERNEL_TABLE(kInt8)
WEFT_DECLARE_KERNEL_TABLE(kUint8)
WEFT_DECLARE_KERNEL_TABLE(kInt32)
WEFT_DECLARE_KERNEL_TABLE(kUint32)
WEFT_DECLARE_KERNEL_TABLE(kInt64)
WEFT_DECLARE_KERNEL_TABLE(kUint64)
WEFT_DECLARE_KERNEL_TABLE(kFloat16)
WEFT_DECLARE_KERNEL_TABLE(kFloat32)
WEFT_DECLARE_KERNEL_TABLE(kFloat64)
WEFT_DECLARE_KERNEL_TABLE(kBfloat16)
WEFT_DECLARE_KERNEL_TABLE(kFp8E4M3)
WEFT_DECLARE_KERNEL_TABLE(kFp8E5M2)

namespace {

KernelFn reducingKernelFor(DataType dtype, RedOpKind op) {
  switch (dtype) {
    case DataType::kInt8: return reducingKernelFor_kInt8(op);
    case DataType::kUint8: return reducingKernelFor_kUint8(op);
    case DataType::kInt32: return reducingKernelFor_kInt32(op);
    case DataType::kUint32: return reducingKernelFor_kUint32(op);
    case DataType::kInt64: return reducingKernelFor_kInt64(op);
    case DataType::kUint64: return reducingKernelFor_kUint64(op);
    case DataType::kFloat16: return reducingKernelFor_kFloat16(op);
    case DataType::kFloat32: return reducingKernelFor_kFloat32(op);
    case DataType::kFloat64: return reducingKernelFor_kFloat64(op);
    case DataType::kBfloat16: return reducingKernelFor_kBfloat16(op);
    case DataType::kFp8E4M3: return reducingKernelFor_kFp8E4M3(op);
    case DataType::kFp8E5M2: return reducingKernelFor_kFp8E5M2(op);
    default: return nullptr;
  }
}

}  // namespace

int launchKernel(const KernelKey& key, const KernelArgs& args, int threadsPerBlock, CUstream_st* stream) {
  KernelFn fn = key.dataOnly ? dataOnlyKernel : reducingKernelFor(key.dtype, key.op);
  if (fn == nullptr) return kKernelNotBuilt;
  void* params[] = {const_cast<KernelArgs*>(&args)};
  cudaError_t err = cudaLaunchKernel(reinterpret_cast<const void*>(fn), dim3(static_cast<unsigned>(args.nchannels)),
                                     dim3(static_cast<unsigned>(threadsPerBlock)), params, 0, stream);
  return static_cast<int>(err);
}

namespace {

template <typename Visit>
void forEachKernel(Visit&& visit) {
  visit(&dataOnlyKernel);
  for (int t = 0; t < static_cast<int>(DataType::kCount); ++t)
    for (int k = 0; k < static_cast<int>(RedOpKind::kCount); ++k) {
      KernelFn fn = reducingKernelFor(static_cast<DataType>(t), static_cast<RedOpKind>(k));
      if (fn != nullptr) visit(fn);
    }
}

}  // namespace

size_t kernelStackBytes() {
  size_t most = 0;
  forEachKernel([&](KernelFn fn) {
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(fn)) == cudaSuccess)
      most = attr.localSizeBytes > most ? attr.localSizeBytes : most;
    else
      cudaGetLastError();
  });
  return most;
}

int residentBlocks(int threadsPerBlock) {
  int device = 0;
  int sms = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  int least = -1;
  forEachKernel([&](KernelFn fn) {
    int perSm = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, reinterpret_cast<const void*>(fn), threadsPerBlock, 0) !=
        cudaSuccess) {
      cudaGetLastError();
      return;
    }
    least = least < 0 || perSm < least ? perSm : least;
  });
  return least < 0 ? 0 : least * sms;
}

}  // namespace weft::device
