// Kernel-level tests of the portable device layer on a GPU, without any
// communicator: the 16-byte reduceCopy path against a scalar reference at
// every misalignment, and a ring allreduce whose ranks are the blocks of one
// kernel, joined by StepFifos in device memory.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "device/backend/cuda/cuda_coop.cuh"
#include "device/run_work.h"
#include "gpu/gpu_util.h"

namespace weft::device {
namespace {

__global__ void sumTwoIntoTwo(const float* a, const float* b, float* x, float* y, int64_t n) {
  __shared__ int scratch[2];
  CudaCoop coop(nullptr, scratch);
  const float* srcs[2] = {a, b};
  float* dsts[2] = {x, y};
  reduceCopy<2, 2, 2, 2>(coop, FuncSum<float>(), srcs, 2, dsts, 2, n, -1, false);
}

TEST(GpuReduceCopy, MatchesScalarReferenceAtEveryAlignment) {
  WEFT_REQUIRE_GPU();
  const int64_t kMax = 1 << 16;
  float *a, *b, *x, *y;
  ASSERT_EQ(cudaMalloc(&a, (kMax + 8) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, (kMax + 8) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&x, (kMax + 8) * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, (kMax + 8) * sizeof(float)), cudaSuccess);
  std::vector<float> ha(kMax + 8), hb(kMax + 8);
  for (size_t i = 0; i < ha.size(); ++i) ha[i] = static_cast<float>(i % 1000), hb[i] = static_cast<float>(i % 7);
  cudaMemcpy(a, ha.data(), ha.size() * sizeof(float), cudaMemcpyHostToDevice);
  cudaMemcpy(b, hb.data(), hb.size() * sizeof(float), cudaMemcpyHostToDevice);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{4}, int64_t{1000}, int64_t{4099}, kMax}) {
    for (int offset = 0; offset < 4; ++offset) {
      cudaMemset(x, 0, (kMax + 8) * sizeof(float));
      sumTwoIntoTwo<<<1, 256>>>(a + offset, b + offset, x + offset, y + offset, n);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess) << "launch";
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
      std::vector<float> hx(kMax + 8), hy(kMax + 8);
      cudaMemcpy(hx.data(), x, hx.size() * sizeof(float), cudaMemcpyDeviceToHost);
      cudaMemcpy(hy.data(), y, hy.size() * sizeof(float), cudaMemcpyDeviceToHost);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(hx[offset + i], ha[offset + i] + hb[offset + i]) << "n " << n << " offset " << offset << " i " << i;
        ASSERT_EQ(hy[offset + i], hx[offset + i]);
      }
      ASSERT_EQ(hx[offset + n], 0.0f) << "wrote past the end";
    }
  }
  cudaFree(a), cudaFree(b), cudaFree(x), cudaFree(y);
}

// Block b plays rank b of a ring of gridDim.x ranks. Bounded like the
// library's kernels: unbounded, ptxas gives it 255 registers, and a launch
// of 512 threads then fails for want of registers (the first GPU run saw the
// launch fail unchecked, and the buffers unchanged).
constexpr int kRingThreads = 512;
__global__ void __launch_bounds__(kRingThreads) ringKernel(const ChannelView* views, const CollWork* works) {
  __shared__ int scratch[2];
  CudaCoop coop(nullptr, scratch);
  runReducing<float>(coop, views[blockIdx.x], works[blockIdx.x]);
}

TEST(GpuPrimitives, RingAllReduceAcrossBlocksOfOneKernel) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 4;
  constexpr int64_t kCount = 1000003;
  constexpr int64_t kStepBytes = 64 * 1024;
  const size_t fifoBytes = 4096 + kStepBytes * kFifoSteps;
  std::vector<char*> fifos(kRanks);  // fifo r carries data from rank r to rank r+1
  for (auto& f : fifos) {
    ASSERT_EQ(cudaMalloc(&f, fifoBytes), cudaSuccess);
    cudaMemset(f, 0, fifoBytes);
  }
  auto endOf = [&](int link, int peer) {
    auto* control = reinterpret_cast<FifoControl*>(fifos[link]);
    FifoEnd end{};  // by field: the struct grows (slot gap, LL region, direct mailbox)
    end.slots = fifos[link] + 4096;
    end.tail = &control->tail;
    end.head = &control->head;
    end.sizes = control->sizes;
    end.stepBytes = kStepBytes;
    end.peer = peer;
    return end;
  };
  std::vector<FifoEnd> ends;  // per rank: [recv from prev, send to next]
  for (int r = 0; r < kRanks; ++r) {
    ends.push_back(endOf((r + kRanks - 1) % kRanks, (r + kRanks - 1) % kRanks));
    ends.push_back(endOf(r, (r + 1) % kRanks));
  }
  FifoEnd* dEnds;
  int32_t* dOrder;
  float* data;
  ASSERT_EQ(cudaMalloc(&dEnds, ends.size() * sizeof(FifoEnd)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dOrder, kRanks * sizeof(int32_t)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&data, kRanks * kCount * sizeof(float)), cudaSuccess);
  cudaMemcpy(dEnds, ends.data(), ends.size() * sizeof(FifoEnd), cudaMemcpyHostToDevice);
  std::vector<int32_t> order = {0, 1, 2, 3};
  cudaMemcpy(dOrder, order.data(), sizeof(int32_t) * kRanks, cudaMemcpyHostToDevice);
  std::vector<float> host(kRanks * kCount);
  for (int r = 0; r < kRanks; ++r)
    for (int64_t i = 0; i < kCount; ++i) host[r * kCount + i] = static_cast<float>((r + 1) * (i % 3));
  cudaMemcpy(data, host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice);
  std::vector<ChannelView> views(kRanks);
  std::vector<CollWork> works(kRanks);
  for (int r = 0; r < kRanks; ++r) {
    views[r] = ChannelView{0, r, RingView{kRanks, r, (r + kRanks - 1) % kRanks, (r + 1) % kRanks, dOrder},
                           dEnds + 2 * r, dEnds + 2 * r + 1};
    CollWork w{};
    w.func = Func::kAllReduce;
    w.dtype = DataType::kFloat32;
    w.op = RedOpKind::kSum;
    w.sendbuff = data + r * kCount;
    w.recvbuff = data + r * kCount;
    w.count = kCount;
    w.channelCount = kCount;
    w.alignElems = 16;
    w.chunkElems = kStepBytes * 2 / sizeof(float);
    works[r] = w;
  }
  ChannelView* dViews;
  CollWork* dWorks;
  cudaMalloc(&dViews, sizeof(ChannelView) * kRanks);
  cudaMalloc(&dWorks, sizeof(CollWork) * kRanks);
  cudaMemcpy(dViews, views.data(), sizeof(ChannelView) * kRanks, cudaMemcpyHostToDevice);
  cudaMemcpy(dWorks, works.data(), sizeof(CollWork) * kRanks, cudaMemcpyHostToDevice);
  ringKernel<<<kRanks, kRingThreads>>>(dViews, dWorks);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess) << "launch";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(host.data(), data, host.size() * sizeof(float), cudaMemcpyDeviceToHost);
  for (int r = 0; r < kRanks; ++r)
    for (int64_t i = 0; i < kCount; ++i) ASSERT_EQ(host[r * kCount + i], 10.0f * (i % 3)) << "rank " << r << " i " << i;
  for (auto f : fifos) cudaFree(f);
  cudaFree(dEnds), cudaFree(dOrder), cudaFree(data), cudaFree(dViews), cudaFree(dWorks);
}

}  // namespace
}  // namespace weft::device
