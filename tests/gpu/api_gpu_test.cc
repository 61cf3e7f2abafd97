// The cuda backend's contract beyond plain collectives: point-to-point,
// reductions of other types, CUDA graph capture, abort of a spinning kernel,
// the kernel-side timeout on a silent peer,
// buffers of the wrong kind, ncclMemAlloc.
#include <chrono>
#include <string>
#include <thread>

#include "gpu/gpu_util.h"
#include "weft.h"

namespace weft::test {
namespace {

TEST(GpuP2p, AlltoAllAndRing) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 4;
  constexpr size_t kCount = 100003;
  onRanks(kRanks, [](int r, ncclComm_t comm, cudaStream_t stream) {
    std::vector<int64_t> host(kCount * kRanks);
    for (size_t i = 0; i < host.size(); ++i) host[i] = r * 1000000 + static_cast<int64_t>(i);
    DeviceBuffer<int64_t> send(kCount * kRanks), recv(kCount * kRanks), ring(kCount);
    send.upload(host);
    NCCL_OK(ncclAlltoAll(send.get(), recv.get(), kCount, ncclInt64, comm, stream), comm);
    NCCL_OK(ncclGroupStart(), comm);
    NCCL_OK(ncclSend(send.get(), kCount, ncclInt64, (r + 1) % kRanks, comm, stream), comm);
    NCCL_OK(ncclRecv(ring.get(), kCount, ncclInt64, (r + kRanks - 1) % kRanks, comm, stream), comm);
    NCCL_OK(ncclGroupEnd(), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<int64_t> got = recv.download(), fromPrev = ring.download();
    for (int p = 0; p < kRanks; ++p)
      for (size_t i = 0; i < kCount; i += 97)
        ASSERT_EQ(got[p * kCount + i], p * 1000000 + static_cast<int64_t>(r * kCount + i)) << "from " << p;
    const int prev = (r + kRanks - 1) % kRanks;
    for (size_t i = 0; i < kCount; i += 101) ASSERT_EQ(fromPrev[i], prev * 1000000 + static_cast<int64_t>(i));
  });
}

TEST(GpuReduce, HalfAvgAndIntPreMulSumToRoot) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 4;
  constexpr size_t kCount = 50001;
  onRanks(kRanks, [](int r, ncclComm_t comm, cudaStream_t stream) {
    DeviceBuffer<int32_t> ints(kCount), out(kCount);
    ints.upload(std::vector<int32_t>(kCount, r + 1));
    int32_t scalar = 3;
    ncclRedOp_t premul;
    NCCL_OK(ncclRedOpCreatePreMulSum(&premul, &scalar, ncclInt32, ncclScalarHostImmediate, comm), comm);
    NCCL_OK(ncclReduce(ints.get(), out.get(), kCount, ncclInt32, premul, 1, comm, stream), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    NCCL_OK(ncclRedOpDestroy(premul, comm), comm);
    if (r == 1) {
      std::vector<int32_t> got = out.download();
      for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(got[i], 3 * (1 + 2 + 3 + 4)) << i;
    }
    DeviceBuffer<uint16_t> h(kCount);
    // float16 avg over 4 ranks is PreMulSum by 0.25 (exact): 4.0 everywhere stays 4.0.
    std::vector<uint16_t> fours(kCount, 0x4400);
    h.upload(fours);
    NCCL_OK(ncclAllReduce(h.get(), h.get(), kCount, ncclFloat16, ncclAvg, comm, stream), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<uint16_t> avg = h.download();
    for (size_t i = 0; i < kCount; ++i) ASSERT_EQ(avg[i], 0x4400) << "avg of 4.0 must be 4.0 at " << i;
  });
}

TEST(GpuGraph, CapturedAllReduceReplays) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 2;
  constexpr size_t kCount = 1 << 16;
  RankBarrier barrier(kRanks);
  onRanks(kRanks, [&barrier](int r, ncclComm_t comm, cudaStream_t stream) {
    DeviceBuffer<float> buf(kCount);
    buf.upload(std::vector<float>(kCount, 1.0f));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    barrier.arriveAndWait();  // no rank's upload during another's capture
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    const ncclResult_t rc = ncclAllReduce(buf.get(), buf.get(), kCount, ncclFloat, ncclSum, comm, stream);
    const cudaError_t ended = cudaStreamEndCapture(stream, &graph);
    barrier.arriveAndWait();  // and no replay or read-back during another's capture
    NCCL_OK(rc, comm);
    CUDA_OK(ended);
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 3; ++replay) CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<float> got = buf.download();
    for (size_t i = 0; i < kCount; i += 31) ASSERT_EQ(got[i], 8.0f) << "1 doubled three times, at " << i;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  });
}

// Two ranks on GPU 0 initialised from two threads; the caller drives them
// from its own thread (rank 1 may stay silent).
void initPairOnGpu0(ncclComm_t comms[2]) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::thread other([&] {
    cudaSetDevice(0);
    ASSERT_EQ(ncclCommInitRank(&comms[1], 2, id, 1), ncclSuccess);
  });
  CUDA_OK(cudaSetDevice(0));
  NCCL_OK(ncclCommInitRank(&comms[0], 2, id, 0), nullptr);
  other.join();
}

TEST(GpuAbort, StopsAKernelWaitingForAPeerThatNeverComes) {
  WEFT_REQUIRE_GPU();
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_NO_FATAL_FAILURE(initPairOnGpu0(comms));
  DeviceBuffer<float> buf(1 << 20);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  NCCL_OK(ncclAllReduce(buf.get(), buf.get(), 1 << 20, ncclFloat, ncclSum, comms[0], stream), comms[0]);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady) << "rank 0 must still be waiting for rank 1";
  const auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(ncclCommAbort(comms[0]), ncclSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  cudaStreamDestroy(stream);
}

// A kernel waiting on a peer that never calls gives up after WEFT_TIMEOUT by
// itself (cuda_coop.cuh): the stream completes with nobody aborting, and the
// communicator's error names the peer.
TEST(GpuTimeout, KernelWaitingOnASilentPeerFailsNamingIt) {
  WEFT_REQUIRE_GPU();
  setenv("WEFT_TIMEOUT", "1", 1);
  ncclComm_t comms[2] = {nullptr, nullptr};
  ASSERT_NO_FATAL_FAILURE(initPairOnGpu0(comms));
  unsetenv("WEFT_TIMEOUT");
  DeviceBuffer<float> buf(1 << 20);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  const auto start = std::chrono::steady_clock::now();
  NCCL_OK(ncclAllReduce(buf.get(), buf.get(), 1 << 20, ncclFloat, ncclSum, comms[0], stream), comms[0]);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(20)) << "the kernel did not time out";
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(comms[0], &async), ncclSuccess);
  EXPECT_EQ(async, ncclRemoteError);
  EXPECT_EQ(ncclAllReduce(buf.get(), buf.get(), 1, ncclFloat, ncclSum, comms[0], stream), ncclRemoteError);
  const std::string message = ncclGetLastError(comms[0]);
  EXPECT_NE(message.find("for rank 1"), std::string::npos) << message;
  EXPECT_NE(message.find("WEFT_TIMEOUT"), std::string::npos) << message;
  EXPECT_EQ(ncclCommDestroy(comms[0]), ncclSuccess);
  EXPECT_EQ(ncclCommDestroy(comms[1]), ncclSuccess);
  cudaStreamDestroy(stream);
}

TEST(GpuBuffers, HostPointerOnCudaCommIsRejectedAndCommStaysUsable) {
  WEFT_REQUIRE_GPU();
  onRanks(1, [](int, ncclComm_t comm, cudaStream_t stream) {
    std::vector<float> host(1024, 1.0f);
    EXPECT_EQ(ncclAllReduce(host.data(), host.data(), host.size(), ncclFloat, ncclSum, comm, stream),
              ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("sendbuff"), std::string::npos) << ncclGetLastError(comm);
    void* mem = nullptr;
    NCCL_OK(ncclMemAlloc(&mem, 4096), comm);
    cudaPointerAttributes attr{};
    CUDA_OK(cudaPointerGetAttributes(&attr, mem));
    EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
    NCCL_OK(ncclAllReduce(mem, mem, 1024, ncclFloat, ncclSum, comm, stream), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    NCCL_OK(ncclMemFree(mem), comm);
  });
}

}  // namespace
}  // namespace weft::test
