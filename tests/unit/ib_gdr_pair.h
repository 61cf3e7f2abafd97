// GPUDirect RDMA test fixture of the IB network on the verbs emulation: a
// memfd standing for the dma-buf a CUDA driver would export, and a
// connection whose receiver registers it (ib_gdr_test.cc, ib_merge_test.cc).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <vector>

#include "ib_pair.h"

namespace weft::testing {

// A memfd of `bytes` standing for GPU memory exported as a dma-buf, with the
// test's own view of it.
struct FakeDmaBuf {
  int fd = -1;
  uint8_t* view = nullptr;
  size_t bytes;
  explicit FakeDmaBuf(size_t n) : bytes(n) {
    fd = memfd_create("weft-gpu-memory", 0);
    EXPECT_GE(fd, 0);
    EXPECT_EQ(ftruncate(fd, static_cast<off_t>(n)), 0);
    view = static_cast<uint8_t*>(mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    EXPECT_NE(view, MAP_FAILED);
  }
  ~FakeDmaBuf() {
    munmap(view, bytes);
    close(fd);
  }
};

// The iova the receiver registers: a decoy buffer, so bytes written at the
// iova instead of into the dma-buf are caught.
struct GdrPair : IbPair {
  using IbPair::IbPair;
  FakeDmaBuf gpu{1 << 16};
  std::vector<uint8_t> decoy = std::vector<uint8_t>(1 << 14, 0);
  void* gpuMr = nullptr;
  static constexpr uint64_t kOffset = 8192;  // where the registered range starts in the dma-buf

  ~GdrPair() {
    if (gpuMr) api.deregMr(recv, gpuMr);
  }
  void registerGpu() {
    ASSERT_EQ(api.regMrDmaBuf(recv, decoy.data(), decoy.size(), kNetPtrCuda, kOffset, gpu.fd, &gpuMr), ncclSuccess)
        << ibNetLastError();
  }
  void* receiveIntoGpu() {
    void* data = decoy.data();
    int capacity = static_cast<int>(decoy.size()), tag = 0;
    void* request = nullptr;
    EXPECT_EQ(api.irecv(recv, 1, &data, &capacity, &tag, &gpuMr, &request), ncclSuccess) << ibNetLastError();
    return request;
  }
  ncclResult_t flush(int bytes, void* mr, void** request) {
    void* data = mr == gpuMr ? static_cast<void*>(decoy.data()) : static_cast<void*>(recvBuf.data());
    return api.iflush(recv, 1, &data, &bytes, &mr, request);
  }
};

}  // namespace weft::testing
