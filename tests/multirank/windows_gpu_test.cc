// Registered windows on the cuda backend between processes: 2 and 3 ranks
// as processes sharing GPU 0 (CUDA IPC), direct mode on (WEFT_DIRECT=1).
// Outputs inside windows registered with ncclCommWindowRegister are written
// by the peers' kernels through their IPC mappings (weftCommDescribe counts
// those link-calls); an output outside every window takes the slots; both
// give the reference's results, in and out of place; windows registered in
// a group are exchanged at its end. Skips without a GPU
// (checked without initialising CUDA before the fork).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "multirank/coll_check.h"
#include "weft.h"

namespace weft::test {
namespace {

int32_t input(int rank, size_t i) { return static_cast<int32_t>((i % 977) + 1) * (rank + 1); }

// "... N link-calls into mapped windows ..." of weftCommDescribe.
uint64_t mappedCalls(ncclComm_t comm) {
  char text[16384];
  if (weftCommDescribe(comm, text, sizeof text) != ncclSuccess) return 0;
  const std::string s(text);
  const size_t at = s.find(" link-calls into mapped windows");
  if (at == std::string::npos) return 0;
  const size_t start = s.rfind(' ', at - 1);
  return std::stoull(s.substr(start + 1, at - start - 1));
}

// Whether an MPS control daemon runs (its pipe exists), or the ranks may
// take turns without it (WEFT_SHARE_GPU_WITHOUT_MPS=1, time slices): ranks of
// several processes on one GPU need one or the other (Weft refuses them
// otherwise). Asked without CUDA: the parent must not make a context before
// it forks the ranks.
bool processesMayShareGpu() {
  const char* share = std::getenv("WEFT_SHARE_GPU_WITHOUT_MPS");
  if (share != nullptr && std::string(share) == "1") return true;
  const char* dir = std::getenv("CUDA_MPS_PIPE_DIRECTORY");
  return access((std::string(dir != nullptr ? dir : "/tmp/nvidia-mps") + "/control").c_str(), F_OK) == 0;
}

TEST(GpuWindows, ProcessesWriteIntoThePeersWindows) {
  if (access("/dev/nvidiactl", F_OK) != 0) GTEST_SKIP() << "no NVIDIA device here";
  if (!processesMayShareGpu())
    GTEST_SKIP() << "processes sharing GPU 0 need MPS (nvidia-cuda-mps-control -d) or WEFT_SHARE_GPU_WITHOUT_MPS=1";
  ScopedEnv backend("WEFT_BACKEND", "cuda");
  ScopedEnv direct("WEFT_DIRECT", "1");
  ScopedEnv algo("NCCL_ALGO", "Ring");
  for (int n : {2, 3}) {
    runRanksRaw(RankMode::kProcesses, n, [&](int rank, int nranks, const ncclUniqueId& id) {
      CUDA_OK(cudaSetDevice(0));
      ncclComm_t comm = nullptr;
      NCCL_OK(ncclCommInitRank(&comm, nranks, id, rank), nullptr);
      cudaStream_t stream;
      CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      const size_t count = size_t{1} << 20;
      std::vector<int32_t> host(count);
      for (size_t i = 0; i < count; ++i) host[i] = input(rank, i);
      DeviceBuffer<int32_t> send(count), inWin(count), outside(count), gathered(count * static_cast<size_t>(nranks));
      send.upload(host);
      // Two windows, one after the other at 2 ranks, in one group at 3 (the
      // exchanges then run at ncclGroupEnd, in order).
      ncclWindow_t recvWin = nullptr, gatherWin = nullptr;
      const bool grouped = nranks == 3;
      if (grouped) {
        NCCL_OK(ncclGroupStart(), comm);
      }
      NCCL_OK(ncclCommWindowRegister(comm, inWin.get(), count * sizeof(int32_t), &recvWin, NCCL_WIN_COLL_SYMMETRIC),
              comm);
      NCCL_OK(ncclCommWindowRegister(comm, gathered.get(), count * static_cast<size_t>(nranks) * sizeof(int32_t),
                                     &gatherWin, NCCL_WIN_DEFAULT),
              comm);
      if (grouped) {
        NCCL_OK(ncclGroupEnd(), comm);
      }
      const uint64_t before = mappedCalls(comm);
      NCCL_OK(ncclAllReduce(send.get(), inWin.get(), count, ncclInt32, ncclSum, comm, stream), comm);
      CUDA_OK(cudaStreamSynchronize(stream));
      const uint64_t afterWindow = mappedCalls(comm);
      NCCL_OK(ncclAllReduce(send.get(), outside.get(), count, ncclInt32, ncclSum, comm, stream), comm);
      CUDA_OK(cudaStreamSynchronize(stream));
      const uint64_t afterOutside = mappedCalls(comm);
      NCCL_OK(ncclAllGather(send.get(), gathered.get(), count, ncclInt32, comm, stream), comm);
      NCCL_OK(ncclAllReduce(inWin.get(), inWin.get(), count, ncclInt32, ncclSum, comm, stream), comm);  // in place
      CUDA_OK(cudaStreamSynchronize(stream));
      const int32_t ranksSum = nranks * (nranks + 1) / 2;
      const std::vector<int32_t> a = outside.download(), b = inWin.download(), g = gathered.download();
      for (size_t i = 0; i < count; ++i) {
        ASSERT_EQ(a[i], static_cast<int32_t>((i % 977) + 1) * ranksSum) << "outside the windows, element " << i;
        ASSERT_EQ(b[i], a[i] * nranks) << "in a window, reduced twice, element " << i;
      }
      for (int q = 0; q < nranks; ++q)
        for (size_t i = 0; i < count; i += 13)
          ASSERT_EQ(g[static_cast<size_t>(q) * count + i], input(q, i)) << "allgather into a window, rank " << q;
      EXPECT_GT(afterWindow, before) << "rank " << rank << ": no link-call wrote into a peer's window";
      EXPECT_EQ(afterOutside, afterWindow) << "rank " << rank << ": an output outside every window went direct";
      EXPECT_GT(mappedCalls(comm), afterOutside) << "rank " << rank << ": allgather / in place went by the slots";
      NCCL_OK(ncclCommWindowDeregister(comm, recvWin), comm);
      NCCL_OK(ncclCommWindowDeregister(comm, gatherWin), comm);
      cudaStreamDestroy(stream);
      EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess) << ncclGetLastError(comm);
    });
  }
}

}  // namespace
}  // namespace weft::test
