// The network FIFO addressed two ways, as on the cuda backend: the proxy at
// host addresses, the data path (a kernel) at another mapping of the same
// bytes. Without a GPU the second mapping is emulated by mapping one memfd
// twice, so the real proxy, the FIFO protocol and the stop flag run through
// two different addresses exactly as they would through pinned host memory
// and its device mapping. What only a GPU can show (PCIe ordering, the
// kernel's system-scope atomics) is left to tests/multirank/net_gpu_test.cc.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <new>

#include "device/backend/cuda/runtime.h"
#include "fake_net.h"
#include "net_test_util.h"
#include "proxy/proxy.h"
#include "transport/net/net_link.h"
#include "transport/net/net_wire.h"
#include "transport/transport.h"

namespace weft::testing {
namespace {

using device::FifoEnd;
using transport::NetFifoMemory;
using transport::NetLink;

constexpr int64_t kStepBytes = 1000;  // not a power of two: offsets must still agree

// One memfd mapped twice: two addresses, the same bytes.
class DoubleMapping {
 public:
  explicit DoubleMapping(size_t bytes) : bytes_(bytes) {
    const int fd = memfd_create("weft-net-fifo-test", 0);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) return;
    host_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    mapped_ = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
  }
  ~DoubleMapping() {
    if (host_ != MAP_FAILED) munmap(host_, bytes_);
    if (mapped_ != MAP_FAILED) munmap(mapped_, bytes_);
  }
  DoubleMapping(const DoubleMapping&) = delete;
  DoubleMapping& operator=(const DoubleMapping&) = delete;

  bool ok() const { return host_ != MAP_FAILED && mapped_ != MAP_FAILED && host_ != nullptr; }
  // As allocateNetFifo describes pinned memory: the proxy's base and the data path's.
  NetFifoMemory memory() const { return NetFifoMemory{nullptr, host_, mapped_}; }
  char* host() const { return static_cast<char*>(host_); }
  char* mapped() const { return static_cast<char*>(mapped_); }

 private:
  size_t bytes_;
  void* host_ = MAP_FAILED;
  void* mapped_ = MAP_FAILED;
};

transport::LinkSpec specOf(int cudaDev) {
  transport::LinkSpec spec;
  spec.channel = 3;
  spec.rank = 0;
  spec.peer = 1;
  spec.stepBytes = kStepBytes;
  spec.cudaDev = cudaDev;
  return spec;
}

template <typename T>
ptrdiff_t offsetIn(const T* ptr, const void* base) {
  return reinterpret_cast<const char*>(ptr) - static_cast<const char*>(base);
}

TEST(NetFifoMemory, HostLinkIsZeroedPageAlignedAndSharedByBothViews) {
  Result<NetFifoMemory> memory = transport::allocateNetFifo(specOf(-1));
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  const NetFifoMemory& m = memory.value();
  EXPECT_EQ(m.proxyBase, m.dataPathBase);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(m.proxyBase) % 4096, 0u);
  const size_t bytes = transport::netFifoBytes(kStepBytes);
  const char* p = static_cast<const char*>(m.proxyBase);
  for (size_t i = 0; i < bytes; ++i) ASSERT_EQ(p[i], 0) << "byte " << i;
}

// The cuda variant needs a device: without one, set-up fails with a message
// that says what it was doing, instead of handing out unusable memory.
TEST(NetFifoMemory, CudaLinkWithoutAUsableDeviceFailsSayingWhat) {
  if (cuda::deviceCount() > 0) GTEST_SKIP() << "a CUDA device is usable here";
  Result<NetFifoMemory> memory = transport::allocateNetFifo(specOf(0));
  ASSERT_FALSE(memory.ok());
  const std::string msg = memory.status().message();
  EXPECT_NE(msg.find("pinned network FIFO"), std::string::npos) << msg;
  EXPECT_NE(msg.find("channel 3"), std::string::npos) << msg;
}

TEST(NetFifoMemory, CudaLinkIsPinnedMappedAndZeroed) {
  if (cuda::deviceCount() == 0) GTEST_SKIP() << "no usable CUDA device";
  Result<NetFifoMemory> memory = transport::allocateNetFifo(specOf(0));
  ASSERT_TRUE(memory.ok()) << memory.status().message();
  const NetFifoMemory& m = memory.value();
  ASSERT_NE(m.dataPathBase, nullptr);
  EXPECT_EQ(cuda::pointerKind(m.proxyBase, nullptr), cuda::MemoryKind::kHostMapped);
  const char* p = static_cast<const char*>(m.proxyBase);
  for (size_t i = 0; i < transport::netFifoBytes(kStepBytes); ++i) ASSERT_EQ(p[i], 0) << "byte " << i;
}

TEST(NetFifoViews, EachViewPointsIntoItsOwnMappingAtTheSameOffsets) {
  DoubleMapping mapping(transport::netFifoBytes(kStepBytes));
  ASSERT_TRUE(mapping.ok());
  FifoEnd proxyView{}, dataPathView{};
  transport::attachNetFifo(mapping.memory(), kStepBytes, 7, &proxyView, &dataPathView);
  const void* hostBase = mapping.host();
  const void* mappedBase = mapping.mapped();
  EXPECT_EQ(offsetIn(proxyView.slots, hostBase), offsetIn(dataPathView.slots, mappedBase));
  EXPECT_EQ(offsetIn(proxyView.tail, hostBase), offsetIn(dataPathView.tail, mappedBase));
  EXPECT_EQ(offsetIn(proxyView.head, hostBase), offsetIn(dataPathView.head, mappedBase));
  EXPECT_EQ(offsetIn(proxyView.sizes, hostBase), offsetIn(dataPathView.sizes, mappedBase));
  EXPECT_NE(proxyView.tail, dataPathView.tail);
  for (const FifoEnd* end : {&proxyView, &dataPathView}) {
    EXPECT_EQ(end->stepBytes, kStepBytes);
    EXPECT_EQ(end->slotGap, transport::kNetSlotGap);
    EXPECT_EQ(end->step, 0u);
    EXPECT_EQ(end->peer, 7);
  }
  // A counter written through one view is read through the other.
  device::storeRelease(proxyView.tail, uint64_t{42});
  EXPECT_EQ(device::loadAcquire(dataPathView.tail), 42u);
}

// A send link and a receive link joined by an in-memory network; each FIFO
// is double-mapped: the proxy uses one mapping, the test (the kernel) the other.
struct MappedLinks {
  MappedLinks() : net(FakeNet::Options{}), sendMemory(bytes()), recvMemory(bytes()) {
    setUp(&send, true, net.sendComm(), sendMemory, &producer);
    setUp(&recv, false, net.recvComm(), recvMemory, &consumer);
  }
  static size_t bytes() { return transport::netFifoBytes(kStepBytes); }

  void setUp(NetLink* link, bool isSend, void* comm, const DoubleMapping& memory, FifoEnd* dataPath) {
    ASSERT_TRUE(memory.ok());
    link->isSend = isSend;
    link->channel = 3;
    link->rank = isSend ? 0 : 1;
    link->peer = isSend ? 1 : 0;
    link->peerName = isSend ? "rank 1 (pid 2 on host far)" : "rank 0 (pid 1 on host near)";
    link->net = &net.network();
    link->comm = comm;
    transport::attachNetFifo(memory.memory(), kStepBytes, link->peer, &link->fifo, dataPath);
    const size_t slots = static_cast<size_t>(kStepBytes + link->fifo.slotGap) * device::kFifoSteps;
    ASSERT_EQ(net.network().api->regMr(comm, link->fifo.slots, slots, kNetPtrHost, &link->mhandle), ncclSuccess);
  }

  // The kernel's side: publish while there is room, up to `limit` steps.
  void produce(uint64_t limit) {
    while (producer.step < limit && device::fifoCanProduce(producer)) {
      const int64_t bytes = 1 + static_cast<int64_t>(producer.step * 37 % kStepBytes);
      for (int64_t i = 0; i < bytes; ++i)
        device::fifoSlot(producer)[i] = static_cast<char>(patternByte(producer.step, i));
      device::fifoPublish(producer, bytes);
    }
  }

  FakeNet net;  // first: the links close their comms through it
  DoubleMapping sendMemory;
  DoubleMapping recvMemory;
  NetLink send;
  NetLink recv;
  FifoEnd producer{};
  FifoEnd consumer{};
};

TEST(NetFifoViews, TheProxyMovesEveryStepWhileTheDataPathUsesTheOtherMapping) {
  MappedLinks links;
  std::atomic<uint32_t> abort{0}, failed{0};
  proxy::ProgressEngine engine(0, &abort, &failed);
  constexpr uint64_t kSteps = 50;
  engine.post(&links.send, {1, kSteps});
  engine.post(&links.recv, {1, kSteps});
  for (int pass = 0; links.consumer.step < kSteps; ++pass) {
    ASSERT_LT(pass, 100000) << "stuck at step " << links.consumer.step;
    links.produce(kSteps);
    Result<bool> moved = engine.progressOnce();
    ASSERT_TRUE(moved.ok()) << moved.status().message();
    while (device::fifoCanConsume(links.consumer)) {
      const uint64_t step = links.consumer.step;
      ASSERT_EQ(firstMismatch(reinterpret_cast<const uint8_t*>(device::fifoSlot(links.consumer)), step,
                              1 + static_cast<int64_t>(step * 37 % kStepBytes)),
                -1)
          << "step " << step;
      device::fifoRelease(links.consumer);
    }
  }
  for (int pass = 0; pass < 10 && !engine.idle(); ++pass) ASSERT_TRUE(engine.progressOnce().ok());
  EXPECT_TRUE(engine.idle());
  EXPECT_EQ(failed.load(), 0u);
}

// The cuda backend hands the proxy the kernels' abort flag as its failure
// flag (core/cuda_backend.cc proxyFailureFlag). Here that flag lives in the
// double-mapped page: the proxy raises it at its address, and a waiter that
// polls it at the other address, as a kernel does, stops; the proxy's
// failure names the link.
TEST(NetFifoViews, ANetworkFailureRaisesTheFlagAWaiterPollsThroughTheOtherMapping) {
  MappedLinks links;
  links.net.injectFault(FakeNet::Call::kTestRecv, ncclRemoteError, 3);
  DoubleMapping flagPage(4096);
  ASSERT_TRUE(flagPage.ok());
  auto* stopFlag = new (flagPage.host()) std::atomic<uint32_t>(0);
  const auto* kernelView = reinterpret_cast<const uint32_t*>(flagPage.mapped());
  std::atomic<uint32_t> abort{0};
  proxy::ProgressEngine engine(0, &abort, stopFlag);
  engine.post(&links.send, {1, 40});
  engine.post(&links.recv, {1, 40});
  bool stopped = false;
  for (int pass = 0; pass < 100000 && !stopped; ++pass) {
    links.produce(40);
    (void)engine.progressOnce();
    // The consumer's wait: data, or the stop flag (cuda_coop.cuh's waitUntil).
    if (device::fifoCanConsume(links.consumer))
      device::fifoRelease(links.consumer);
    else
      stopped = device::loadRelaxed(kernelView) != 0;
  }
  ASSERT_TRUE(stopped) << "the waiter never saw the proxy's failure";
  EXPECT_LT(links.consumer.step, 40u);
  const Status failure = engine.failure();
  EXPECT_EQ(failure.code(), ncclRemoteError);
  EXPECT_NE(failure.message().find("rank 0 (pid 1 on host near)"), std::string::npos) << failure.message();
  EXPECT_NE(failure.message().find("channel 3"), std::string::npos) << failure.message();
}

}  // namespace
}  // namespace weft::testing
