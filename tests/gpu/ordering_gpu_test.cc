// Order on the cuda backend: work items of one kernel that share FIFOs,
// calls of one communicator on different streams, and a connection made for
// the first time while the thread captures a graph.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"

namespace weft::test {
namespace {

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * static_cast<float>(i % 1000);
  return v;
}

// Two allreduces of one type in one group are two work items of one kernel
// on the same channels: the second must start where the first left the FIFOs.
TEST(GpuOrdering, TwoAllReducesInOneGroup) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 2;
  constexpr size_t kA = (1 << 20) + 3, kB = (1 << 18) + 11;
  onRanks(kRanks, [](int r, ncclComm_t comm, cudaStream_t stream) {
    DeviceBuffer<float> a(kA), b(kB);
    a.upload(ramp(kA, 1.0f + static_cast<float>(r)));
    b.upload(ramp(kB, 10.0f * static_cast<float>(r + 1)));
    NCCL_OK(ncclGroupStart(), comm);
    NCCL_OK(ncclAllReduce(a.get(), a.get(), kA, ncclFloat, ncclSum, comm, stream), comm);
    NCCL_OK(ncclAllReduce(b.get(), b.get(), kB, ncclFloat, ncclSum, comm, stream), comm);
    NCCL_OK(ncclGroupEnd(), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<float> gotA = a.download(), gotB = b.download();
    for (size_t i = 0; i < kA; i += 37) ASSERT_EQ(gotA[i], 3.0f * static_cast<float>(i % 1000)) << "a at " << i;
    for (size_t i = 0; i < kB; i += 37) ASSERT_EQ(gotB[i], 30.0f * static_cast<float>(i % 1000)) << "b at " << i;
  });
}

// Three sends to one peer in a group are three work items on one FIFO.
TEST(GpuOrdering, SeveralSendsToOnePeerInOneGroup) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 2;
  constexpr size_t kCount = 300007;
  onRanks(kRanks, [](int r, ncclComm_t comm, cudaStream_t stream) {
    const int peer = 1 - r;
    std::vector<DeviceBuffer<float>*> sends, recvs;
    for (int k = 0; k < 3; ++k) {
      sends.push_back(new DeviceBuffer<float>(kCount));
      recvs.push_back(new DeviceBuffer<float>(kCount));
      sends[k]->upload(ramp(kCount, static_cast<float>(100 * r + k + 1)));
    }
    NCCL_OK(ncclGroupStart(), comm);
    for (int k = 0; k < 3; ++k) {
      NCCL_OK(ncclSend(sends[k]->get(), kCount, ncclFloat, peer, comm, stream), comm);
      NCCL_OK(ncclRecv(recvs[k]->get(), kCount, ncclFloat, peer, comm, stream), comm);
    }
    NCCL_OK(ncclGroupEnd(), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    for (int k = 0; k < 3; ++k) {
      std::vector<float> got = recvs[k]->download();
      const float scale = static_cast<float>(100 * peer + k + 1);
      for (size_t i = 0; i < kCount; i += 41)
        ASSERT_EQ(got[i], scale * static_cast<float>(i % 1000)) << "message " << k << " at " << i;
    }
    for (int k = 0; k < 3; ++k) delete sends[k], delete recvs[k];
  });
}

// Calls on two streams share the communicator's FIFOs: the second waits for
// the first, whatever the streams, as NCCL's do.
TEST(GpuOrdering, CallsOnTwoStreamsRunInCallOrder) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 2;
  constexpr size_t kBig = 1 << 24, kSmall = (1 << 16) + 5;
  onRanks(kRanks, [](int r, ncclComm_t comm, cudaStream_t stream) {
    cudaStream_t other;
    CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    DeviceBuffer<float> big(kBig), small(kSmall);
    big.upload(std::vector<float>(kBig, 1.0f));
    small.upload(std::vector<float>(kSmall, static_cast<float>(r + 1)));
    for (int round = 0; round < 3; ++round) {
      NCCL_OK(ncclAllReduce(big.get(), big.get(), kBig, ncclFloat, ncclSum, comm, stream), comm);
      NCCL_OK(ncclAllReduce(small.get(), small.get(), kSmall, ncclFloat, ncclSum, comm, other), comm);
    }
    CUDA_OK(cudaStreamSynchronize(stream));
    CUDA_OK(cudaStreamSynchronize(other));
    std::vector<float> gotBig = big.download(), gotSmall = small.download();
    for (size_t i = 0; i < kBig; i += 4099) ASSERT_EQ(gotBig[i], 8.0f) << "1 doubled three times, at " << i;
    for (size_t i = 0; i < kSmall; i += 17) ASSERT_EQ(gotSmall[i], 12.0f) << "1+2, then doubled twice, at " << i;
    cudaStreamDestroy(other);
  });
}

std::string readWhole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// With three ranks a rank's ring sends only to its next rank: the send to its
// previous one connects a new FIFO, here inside a capture. The connection's
// set-up must neither break the capture nor be captured. The INIT log shows
// the receive from the next rank connected during the capture, not before.
// Init connects the trees' links too (on the host backend, with three ranks,
// rank 0's and rank 1's receive from their next rank, not rank 2's): a rank
// whose receive was connected at init says so instead of checking.
TEST(GpuOrdering, FirstSendToAPeerInsideACapture) {
  WEFT_REQUIRE_GPU();
  constexpr int kRanks = 3;
  constexpr size_t kCount = 50021;
  const std::string logPath = "/tmp/weft-capture-connect-" + std::to_string(getpid()) + ".log";
  setenv("NCCL_DEBUG", "INFO", 1);
  setenv("NCCL_DEBUG_SUBSYS", "INIT", 1);
  setenv("NCCL_DEBUG_FILE", logPath.c_str(), 1);
  ncclResetDebugInit();
  RankBarrier barrier(kRanks);
  onRanks(kRanks, [&logPath, &barrier](int r, ncclComm_t comm, cudaStream_t stream) {
    const int prev = (r + kRanks - 1) % kRanks, next = (r + 1) % kRanks;
    // "Channel NN : next[next] -> r[r] via ...": this rank's receive from next.
    const std::string connected = " : " + std::to_string(next) + "[" + std::to_string(next) + "] -> " +
                                  std::to_string(r) + "[" + std::to_string(r) + "] via";
    const bool connectedAtInit = readWhole(logPath).find(connected) != std::string::npos;
    DeviceBuffer<float> send(kCount), recv(kCount);
    send.upload(ramp(kCount, static_cast<float>(r + 1)));
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    barrier.arriveAndWait();  // no rank's upload during another's capture (RankBarrier)
    CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    ncclResult_t rc = ncclGroupStart();
    if (rc == ncclSuccess) rc = ncclSend(send.get(), kCount, ncclFloat, prev, comm, stream);
    if (rc == ncclSuccess) rc = ncclRecv(recv.get(), kCount, ncclFloat, next, comm, stream);
    const ncclResult_t ended = ncclGroupEnd();
    if (rc == ncclSuccess) rc = ended;
    const cudaError_t captured = cudaStreamEndCapture(stream, &graph);
    barrier.arriveAndWait();  // and no replay or read-back during another's capture
    NCCL_OK(rc, comm);
    CUDA_OK(captured);
    if (connectedAtInit)
      std::printf("rank %d: init already connected the receive from rank %d; not a connection inside a capture\n", r,
                  next);
    else
      EXPECT_NE(readWhole(logPath).find(connected), std::string::npos)
          << "rank " << r << ": no '" << connected << "' in the INIT log after the capture";
    CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) CUDA_OK(cudaGraphLaunch(exec, stream));
    CUDA_OK(cudaStreamSynchronize(stream));
    std::vector<float> got = recv.download();
    for (size_t i = 0; i < kCount; i += 53)
      ASSERT_EQ(got[i], static_cast<float>(next + 1) * static_cast<float>(i % 1000)) << "at " << i;
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  });
  for (const char* name : {"NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"}) unsetenv(name);
  ncclResetDebugInit();
  std::remove(logPath.c_str());
}

}  // namespace
}  // namespace weft::test
