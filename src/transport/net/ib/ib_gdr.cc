#include "transport/net/ib/ib_gdr.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <mutex>

#include "common/log.h"
#include "device/backend/cuda/runtime.h"
#include "transport/net/net_v8.h"

namespace weft::transport::ib {
namespace {

bool exists(const char* path) { return access(path, F_OK) == 0; }

bool kernelRefused(int err) { return err == EOPNOTSUPP || err == EPROTONOSUPPORT; }

}  // namespace

GdrVerdict decideGdr(const GdrFacts& f) {
  GdrVerdict v;
  if (!f.dmaBufVerb) {
    v.why = f.verbsSource + " lacks ibv_reg_dmabuf_mr (rdma-core before v34)";
  } else if (kernelRefused(f.kernelProbeErrno)) {
    v.why = strFormat("the kernel or the HCA's driver refuses dma-buf memory regions (ibv_reg_dmabuf_mr: %s)",
                      std::strerror(f.kernelProbeErrno));
  } else if (!f.cudaBuilt) {
    v.why = "this Weft was built without the cuda backend";
  } else if (!f.gpuQueryError.empty()) {
    v.why = "the CUDA driver could not say whether it exports dma-bufs: " + f.gpuQueryError;
  } else if (f.gpus == 0) {
    v.why = "no CUDA device is visible";
  } else if (f.gpuWithoutDmaBuf >= 0) {
    v.why = strFormat(
        "the CUDA driver cannot export device %d's memory as a dma-buf "
        "(CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)",
        f.gpuWithoutDmaBuf);
  } else {
    v.usable = true;
  }
  return v;
}

GdrFacts gatherGdrFacts(const IbDevice& device) {
  GdrFacts f;
  const Verbs* v = verbs(nullptr);
  f.verbsSource = v->source;
  f.dmaBufVerb = v->regDmabufMr != nullptr;
  if (f.dmaBufVerb) {
    // fd -1 is never a dma-buf: a kernel that knows dma-buf regions fails
    // on the fd, one that does not fails before looking at it.
    errno = 0;
    ibv_mr* probe = v->regDmabufMr(device.pd, 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE);
    f.kernelProbeErrno = errno;
    if (probe != nullptr) (void)v->deregMr(probe);
  }
  f.cudaBuilt = cuda::built();
  f.gpus = f.cudaBuilt ? cuda::deviceCount() : 0;
  for (int d = 0; d < f.gpus && f.gpuWithoutDmaBuf < 0 && f.gpuQueryError.empty(); ++d) {
    Result<bool> supported = cuda::dmaBufSupported(d);
    if (!supported.ok())
      f.gpuQueryError = supported.status().message();
    else if (!supported.value())
      f.gpuWithoutDmaBuf = d;
  }
  f.peerMemoryModule = exists("/sys/kernel/mm/memory_peers/nv_mem/version") || exists("/sys/module/nvidia_peermem");
  return f;
}

int gdrPtrSupport(const IbDevice& device) {
  const GdrFacts facts = gatherGdrFacts(device);
  const GdrVerdict verdict = decideGdr(facts);
  static std::once_flag logged;
  std::call_once(logged, [&] {
    if (verdict.usable)
      WEFT_INFO(log::kNet | log::kInit, "NET/IB: GPUDirect RDMA through dma-buf is available on %s",
                device.label().c_str());
    else
      WEFT_INFO(
          log::kNet | log::kInit, "NET/IB: GPUDirect RDMA unavailable (%s)%s; host memory only", verdict.why.c_str(),
          facts.peerMemoryModule ? "; nv_peermem is loaded, but Weft registers GPU memory only through dma-buf" : "");
  });
  return verdict.usable ? (kNetPtrHost | kNetPtrCuda | kNetPtrDmaBuf) : kNetPtrHost;
}

Result<MrEntry*> registerCudaMemory(IbDevice& device, void* data, size_t size) {
  if (MrEntry* reused = device.reuseDmaBuf(data, size)) return reused;
  if (verbs(nullptr)->regDmabufMr == nullptr)
    return errorStatus(ncclInvalidUsage,
                       "IB: GPU memory at %p cannot be registered: %s lacks ibv_reg_dmabuf_mr (rdma-core before "
                       "v34), so GPUDirect RDMA is unavailable and buffers must be in host memory",
                       data, verbs(nullptr)->source);
  Result<cuda::DmaBuf> exported = cuda::dmaBufExport(data, size);
  if (!exported.ok())
    return exported.status().withContext(
        strFormat("IB: GPU memory at %p (%zu bytes) cannot be registered through dma-buf", data, size));
  Result<MrEntry*> mr = device.registerDmaBuf(data, size, exported.value().offset, exported.value().fd);
  close(exported.value().fd);  // the region keeps the dma-buf alive
  return mr;
}

}  // namespace weft::transport::ib
