// GPUDirect RDMA on the IB network, on the verbs emulation: a memfd stands
// for the dma-buf a CUDA driver would export (nothing here touches a GPU).
// Receives land in the dma-buf's bytes (not at the iova), iflush is a real
// loopback READ the emulation performs and completes, NCCL_GDR_FLUSH_DISABLE
// and host buffers need no flush, and every refusal says why: rdma-core
// without ibv_reg_dmabuf_mr, a kernel without dma-buf regions, a build or
// driver that cannot export GPU memory.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "device/backend/cuda/runtime.h"
#include "ib_gdr_pair.h"
#include "ib_pair.h"
#include "transport/net/ib/ib_comm.h"
#include "transport/net/ib/ib_emulation.h"
#include "transport/net/ib/ib_gdr.h"

namespace weft::testing {
namespace {

namespace ib = transport::ib;

TEST(IbGdr, ReceiveLandsInTheDmaBufAndIflushReadsItBack) {
  GdrPair p;
  p.connect();
  p.registerGpu();
  const int kBytes = 5000;
  const std::vector<uint8_t> pattern = patternMessage(7, kBytes);
  std::copy(pattern.begin(), pattern.end(), p.sendBuf.begin());
  void* r = p.receiveIntoGpu();
  ASSERT_NE(r, nullptr);
  void* s = p.postSend(kBytes);
  ASSERT_NE(s, nullptr);
  int bytes = 0;
  ASSERT_EQ(p.wait(s, &bytes), ncclSuccess) << ibNetLastError();
  ASSERT_EQ(p.wait(r, &bytes), ncclSuccess) << ibNetLastError();
  EXPECT_EQ(bytes, kBytes);
  EXPECT_EQ(firstMismatch(p.gpu.view + GdrPair::kOffset, 7, kBytes), -1) << "the message is not in the dma-buf";
  EXPECT_EQ(std::count(p.decoy.begin(), p.decoy.end(), 0), static_cast<long>(p.decoy.size()))
      << "bytes were written at the iova";

  auto* comm = static_cast<ib::IbComm*>(p.recv);
  EXPECT_EQ(comm->flushQpNumber(), 0u) << "the loopback QP is made at the first flush";
  const int64_t readsBefore = ib::emu::counters().reads;
  void* flush = nullptr;
  ASSERT_EQ(p.flush(kBytes, p.gpuMr, &flush), ncclSuccess) << ibNetLastError();
  ASSERT_NE(flush, nullptr) << "a receive into GPU memory needs a flush";
  EXPECT_NE(comm->flushQpNumber(), 0u);
  ASSERT_EQ(p.wait(flush, &bytes), ncclSuccess) << ibNetLastError();
  EXPECT_EQ(ib::emu::counters().reads, readsBefore + 1) << "the flush is one RDMA READ";

  // A second message and flush reuse the loopback QP.
  const uint32_t flushQp = comm->flushQpNumber();
  r = p.receiveIntoGpu();
  s = p.postSend(100);
  ASSERT_TRUE(r && s);
  ASSERT_EQ(p.wait(s, &bytes), ncclSuccess);
  ASSERT_EQ(p.wait(r, &bytes), ncclSuccess);
  ASSERT_EQ(p.flush(100, p.gpuMr, &flush), ncclSuccess) << ibNetLastError();
  ASSERT_NE(flush, nullptr);
  ASSERT_EQ(p.wait(flush, &bytes), ncclSuccess) << ibNetLastError();
  EXPECT_EQ(comm->flushQpNumber(), flushQp);
  EXPECT_EQ(ib::emu::counters().reads, readsBefore + 2);
}

TEST(IbGdr, NoFlushForHostMemoryEmptyReceivesOrWhenDisabled) {
  GdrPair p;
  p.connect();
  p.registerGpu();
  const int64_t readsBefore = ib::emu::counters().reads;
  void* flush = &p;
  ASSERT_EQ(p.flush(100, p.recvMr, &flush), ncclSuccess);
  EXPECT_EQ(flush, nullptr) << "host memory is visible to the CPU once the receive completed";
  flush = &p;
  ASSERT_EQ(p.flush(0, p.gpuMr, &flush), ncclSuccess);
  EXPECT_EQ(flush, nullptr) << "an empty receive wrote nothing";
  {
    ScopedEnv off("NCCL_GDR_FLUSH_DISABLE", "1");
    flush = &p;
    ASSERT_EQ(p.flush(100, p.gpuMr, &flush), ncclSuccess);
    EXPECT_EQ(flush, nullptr) << "NCCL_GDR_FLUSH_DISABLE=1";
  }
  EXPECT_EQ(ib::emu::counters().reads, readsBefore);
  EXPECT_EQ(static_cast<ib::IbComm*>(p.recv)->flushQpNumber(), 0u);
}

TEST(IbGdr, DmaBufRegistrationsAreCachedLikeHostOnes) {
  GdrPair p;
  p.connect();
  const int64_t before = ib::emu::counters().dmaBufRegistrations;
  p.registerGpu();
  void* inside = nullptr;
  ASSERT_EQ(p.api.regMrDmaBuf(p.recv, p.decoy.data() + 64, 128, kNetPtrCuda, GdrPair::kOffset + 64, p.gpu.fd, &inside),
            ncclSuccess);
  EXPECT_EQ(portEntry(inside), portEntry(p.gpuMr));
  EXPECT_EQ(ib::emu::counters().dmaBufRegistrations, before + 1);
  EXPECT_EQ(p.api.deregMr(p.recv, inside), ncclSuccess);
  EXPECT_TRUE(static_cast<ib::MrHandle*>(p.gpuMr)->dmaBuf);
  EXPECT_TRUE(portEntry(p.gpuMr)->dmaBuf);
}

TEST(IbGdr, RefusalsSayWhy) {
  IbPair p;
  p.connect();
  FakeDmaBuf gpu(4096);
  void* mr = nullptr;
  EXPECT_EQ(p.api.regMrDmaBuf(p.recv, gpu.view, 4096, kNetPtrCuda, 0, -1, &mr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ibNetLastError(), "fd -1")) << ibNetLastError();
  EXPECT_EQ(p.api.regMrDmaBuf(p.recv, gpu.view, 4096, kNetPtrHost, 0, gpu.fd, &mr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ibNetLastError(), "type 1")) << ibNetLastError();
  EXPECT_EQ(p.api.regMr(p.recv, p.recvBuf.data(), 100, 0x40, &mr), ncclInvalidArgument);
  EXPECT_TRUE(contains(ibNetLastError(), "type 64")) << ibNetLastError();

  // CUDA memory needs the driver to export it: a build without the cuda
  // backend says so; one with it, on this machine (no GPU, no driver), says
  // the driver is missing.
  EXPECT_EQ(p.api.regMr(p.recv, gpu.view, 4096, kNetPtrCuda, &mr), ncclInvalidUsage);
  EXPECT_TRUE(contains(ibNetLastError(), "dma-buf")) << ibNetLastError();
  if (cuda::built() && cuda::deviceCount() > 0) {
    // A machine with a GPU: the fake pointer is not CUDA memory; the driver says so.
  } else if (cuda::built()) {
    EXPECT_TRUE(contains(ibNetLastError(), "CUDA driver")) << ibNetLastError();
  } else {
    EXPECT_TRUE(contains(ibNetLastError(), "cuda backend")) << ibNetLastError();
  }

  ib::emu::setDmaBufSupport(ib::emu::DmaBufSupport::kKernelRefuses);
  EXPECT_EQ(p.api.regMrDmaBuf(p.recv, gpu.view, 4096, kNetPtrCuda, 0, gpu.fd, &mr), ncclInvalidUsage);
  EXPECT_TRUE(contains(ibNetLastError(), "does not support dma-buf memory regions")) << ibNetLastError();
  const ib::GdrFacts refused = ib::gatherGdrFacts(*ib::ibPorts(nullptr)[0]);
  EXPECT_TRUE(contains(ib::decideGdr(refused).why, "refuses dma-buf")) << ib::decideGdr(refused).why;

  ib::emu::setDmaBufSupport(ib::emu::DmaBufSupport::kVerbAbsent);
  EXPECT_EQ(p.api.regMrDmaBuf(p.recv, gpu.view, 4096, kNetPtrCuda, 0, gpu.fd, &mr), ncclInvalidUsage);
  EXPECT_TRUE(contains(ibNetLastError(), "lacks ibv_reg_dmabuf_mr")) << ibNetLastError();
  EXPECT_EQ(p.api.regMr(p.recv, gpu.view, 4096, kNetPtrCuda, &mr), ncclInvalidUsage);
  EXPECT_TRUE(contains(ibNetLastError(), "lacks ibv_reg_dmabuf_mr")) << ibNetLastError();
  weftNetProperties_v8_t props{};
  ASSERT_EQ(p.api.getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.ptrSupport, kNetPtrHost);
  ib::emu::setDmaBufSupport(ib::emu::DmaBufSupport::kSupported);
}

// The emulated HCA does dma-buf; what is missing here is the GPU side: the
// cuda backend (a host-only build) or a visible GPU (a cuda build on a
// machine without one).
TEST(IbGdr, PropertiesOfferHostMemoryOnlyWithoutTheCudaBackendOrAGpu) {
  if (cuda::built() && cuda::deviceCount() > 0) GTEST_SKIP() << "a GPU is visible: GDR then depends on its driver";
  const weftNet_v8_t& api = ibApi();
  weftNetProperties_v8_t props{};
  ASSERT_EQ(api.getProperties(0, &props), ncclSuccess);
  EXPECT_EQ(props.ptrSupport, kNetPtrHost);
  const ib::GdrFacts facts = ib::gatherGdrFacts(*ib::ibPorts(nullptr)[0]);
  EXPECT_TRUE(facts.dmaBufVerb);
  EXPECT_EQ(facts.kernelProbeErrno, EBADF);
  EXPECT_EQ(facts.cudaBuilt, cuda::built());
  const ib::GdrVerdict verdict = ib::decideGdr(facts);
  EXPECT_FALSE(verdict.usable);
  const char* missing = cuda::built() ? "no CUDA device is visible" : "without the cuda backend";
  EXPECT_TRUE(contains(verdict.why, missing)) << verdict.why;
}

// The decision itself, each missing piece in turn.
TEST(IbGdr, DecisionNamesTheFirstMissingPiece) {
  ib::GdrFacts all;
  all.verbsSource = "libibverbs.so.1";
  all.dmaBufVerb = true;
  all.kernelProbeErrno = EBADF;
  all.cudaBuilt = true;
  all.gpus = 2;
  EXPECT_TRUE(ib::decideGdr(all).usable) << ib::decideGdr(all).why;

  struct Case {
    const char* expect;
    void (*change)(ib::GdrFacts*);
  };
  const Case cases[] = {
      {"libibverbs.so.1 lacks ibv_reg_dmabuf_mr", [](ib::GdrFacts* f) { f->dmaBufVerb = false; }},
      {"refuses dma-buf memory regions", [](ib::GdrFacts* f) { f->kernelProbeErrno = EOPNOTSUPP; }},
      {"refuses dma-buf memory regions", [](ib::GdrFacts* f) { f->kernelProbeErrno = EPROTONOSUPPORT; }},
      {"without the cuda backend", [](ib::GdrFacts* f) { f->cudaBuilt = false; }},
      {"no CUDA device", [](ib::GdrFacts* f) { f->gpus = 0; }},
      {"cannot export device 1's memory as a dma-buf (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0)",
       [](ib::GdrFacts* f) { f->gpuWithoutDmaBuf = 1; }},
      {"could not say whether it exports dma-bufs: libcuda.so.1 lacks cuMemGetHandleForAddressRange",
       [](ib::GdrFacts* f) { f->gpuQueryError = "libcuda.so.1 lacks cuMemGetHandleForAddressRange"; }},
  };
  for (const Case& c : cases) {
    ib::GdrFacts f = all;
    c.change(&f);
    const ib::GdrVerdict v = ib::decideGdr(f);
    EXPECT_FALSE(v.usable) << c.expect;
    EXPECT_TRUE(contains(v.why, c.expect)) << v.why;
  }
  ib::GdrFacts peermemOnly = all;
  peermemOnly.dmaBufVerb = false;
  peermemOnly.peerMemoryModule = true;
  EXPECT_FALSE(ib::decideGdr(peermemOnly).usable) << "nv_peermem alone is not used";
}

}  // namespace
}  // namespace weft::testing
