// GPUDirect RDMA on the IB network: whether the HCA may read and write GPU
// memory directly on this machine, and registering GPU memory through
// dma-buf. What must hold, each checked (docs/network.md, "GPUDirect RDMA"):
//   - libibverbs has ibv_reg_dmabuf_mr (rdma-core v34 and later);
//   - the kernel and the HCA's driver accept dma-buf regions: a probe
//     registration of fd -1 fails with EBADF-like errors, not with
//     EOPNOTSUPP / EPROTONOSUPPORT;
//   - this Weft has the cuda backend, sees a GPU, and the CUDA driver can
//     export every visible GPU's memory (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED).
// The older peer-memory path (nv_peermem, ibv_reg_mr on a CUDA pointer) is
// only reported, never used.
#pragma once

#include <string>

#include "common/status.h"
#include "transport/net/ib/ib_device.h"

namespace weft::transport::ib {

struct GdrFacts {
  std::string verbsSource;        // "libibverbs.so.1" or "emulation", for messages
  bool dmaBufVerb = false;        // the verbs table has ibv_reg_dmabuf_mr
  int kernelProbeErrno = 0;       // errno of the probe registration (fd -1)
  bool cudaBuilt = false;         // this Weft has the cuda backend
  int gpus = 0;                   // visible CUDA devices
  int gpuWithoutDmaBuf = -1;      // the first one whose driver cannot export dma-bufs; -1: none
  std::string gpuQueryError;      // the driver could not be asked (empty: it answered)
  bool peerMemoryModule = false;  // nv_peermem is loaded (reported only)
};

struct GdrVerdict {
  bool usable = false;
  std::string why;  // when not usable: the first missing piece, in words
};

// The decision alone, from facts gathered elsewhere (tests feed it directly).
GdrVerdict decideGdr(const GdrFacts& facts);

// This machine's facts for `device` (the kernel probe runs on its PD).
GdrFacts gatherGdrFacts(const IbDevice& device);

// kNetPtrHost, plus kNetPtrCuda | kNetPtrDmaBuf when GPUDirect RDMA is
// usable on `device`. The first verdict is logged at INFO with its reason.
int gdrPtrSupport(const IbDevice& device);

// Registers GPU memory [data, data+size): exported as a dma-buf by the
// CUDA driver, registered with ibv_reg_dmabuf_mr, the fd closed again (the
// region holds its own reference). A cached registration covering the range
// is reused without exporting.
Result<MrEntry*> registerCudaMemory(IbDevice& device, void* data, size_t size);

}  // namespace weft::transport::ib
