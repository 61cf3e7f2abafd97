// Collectives on the cuda backend, several ranks sharing the one GPU: as
// threads (each rank its own stream) and as one thread driving every rank in
// a group (ncclCommInitAll with a devlist that repeats device 0).
#include <thread>

#include "gpu/gpu_util.h"
#include "weft.h"

namespace weft::test {
namespace {

// Inputs are small integers, so float sums are exact in any order.
float input(int rank, size_t i) { return static_cast<float>((rank + 1) * ((i % 5) + 1)); }

struct Case {
  int nranks;
  size_t count;
};

class GpuAllReduce : public ::testing::TestWithParam<Case> {};

TEST_P(GpuAllReduce, ThreadsShareOneGpu) {
  WEFT_REQUIRE_GPU();
  const Case c = GetParam();
  ncclUniqueId id;
  NCCL_OK(ncclGetUniqueId(&id), nullptr);
  std::vector<std::thread> threads;
  for (int r = 0; r < c.nranks; ++r) {
    threads.emplace_back([&, r] {
      CUDA_OK(cudaSetDevice(0));
      ncclComm_t comm = nullptr;
      NCCL_OK(ncclCommInitRank(&comm, c.nranks, id, r), nullptr);
      weftBackend_t backend;
      NCCL_OK(weftCommGetBackend(comm, &backend), comm);
      EXPECT_EQ(backend, weftBackendCuda);
      cudaStream_t stream;
      CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      std::vector<float> host(c.count);
      for (size_t i = 0; i < c.count; ++i) host[i] = input(r, i);
      DeviceBuffer<float> send(c.count), recv(c.count);
      send.upload(host);
      NCCL_OK(ncclAllReduce(send.get(), recv.get(), c.count, ncclFloat, ncclSum, comm, stream), comm);
      NCCL_OK(ncclAllReduce(send.get(), send.get(), c.count, ncclFloat, ncclSum, comm, stream), comm);  // in place
      CUDA_OK(cudaStreamSynchronize(stream));
      const float ranksSum = static_cast<float>(c.nranks * (c.nranks + 1) / 2);
      std::vector<float> out = recv.download(), inplace = send.download();
      for (size_t i = 0; i < c.count; ++i) {
        ASSERT_EQ(out[i], ranksSum * static_cast<float>((i % 5) + 1)) << "rank " << r << " element " << i;
        ASSERT_EQ(inplace[i], out[i]) << "in place, rank " << r << " element " << i;
      }
      cudaStreamDestroy(stream);
      NCCL_OK(ncclCommDestroy(comm), nullptr);
    });
  }
  for (auto& t : threads) t.join();
}

INSTANTIATE_TEST_SUITE_P(Sizes, GpuAllReduce,
                         ::testing::Values(Case{1, 1000}, Case{2, 1}, Case{2, 1000003}, Case{3, 77777},
                                           Case{4, 4 << 20}, Case{8, 65536}));

TEST(GpuGroup, OneThreadDrivesEveryRankWithEveryCollective) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 4;
  constexpr size_t kCount = 300001;
  int devs[kRanks] = {0, 0, 0, 0};
  ncclComm_t comms[kRanks];
  NCCL_OK(ncclCommInitAll(comms, kRanks, devs), nullptr);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));  // one stream for all ranks: Weft must not serialize them
  std::vector<DeviceBuffer<int>*> send, gathered, reduced, bcast;
  for (int r = 0; r < kRanks; ++r) {
    send.push_back(new DeviceBuffer<int>(kCount));
    gathered.push_back(new DeviceBuffer<int>(kCount * kRanks));
    reduced.push_back(new DeviceBuffer<int>(kCount));
    bcast.push_back(new DeviceBuffer<int>(kCount));
    send[r]->upload(std::vector<int>(kCount, r + 1));
  }
  NCCL_OK(ncclGroupStart(), nullptr);
  for (int r = 0; r < kRanks; ++r) {
    NCCL_OK(ncclAllGather(send[r]->get(), gathered[r]->get(), kCount, ncclInt32, comms[r], stream), comms[r]);
    NCCL_OK(ncclReduceScatter(gathered[r]->get(), reduced[r]->get(), kCount / kRanks, ncclInt32, ncclMax, comms[r],
                              stream),
            comms[r]);
    NCCL_OK(ncclBroadcast(send[r]->get(), bcast[r]->get(), kCount, ncclInt32, 2, comms[r], stream), comms[r]);
  }
  NCCL_OK(ncclGroupEnd(), nullptr);
  CUDA_OK(cudaStreamSynchronize(stream));
  for (int r = 0; r < kRanks; ++r) {
    std::vector<int> g = gathered[r]->download(), m = reduced[r]->download(), b = bcast[r]->download();
    for (size_t i = 0; i < kCount * kRanks; ++i) ASSERT_EQ(g[i], static_cast<int>(i / kCount) + 1) << "allgather " << i;
    // Every rank contributes the same gathered vector: the max is that vector's segment r.
    for (size_t i = 0; i < kCount / kRanks; ++i)
      ASSERT_EQ(m[i], static_cast<int>((r * (kCount / kRanks) + i) / kCount) + 1) << "reducescatter " << i;
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(b[i], 3) << "broadcast " << i;
  }
  for (int r = 0; r < kRanks; ++r) {
    delete send[r];
    delete gathered[r];
    delete reduced[r];
    delete bcast[r];
    NCCL_OK(ncclCommDestroy(comms[r]), nullptr);
  }
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace weft::test
