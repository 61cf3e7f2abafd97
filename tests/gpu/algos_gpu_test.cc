// The butterfly, halving-doubling, hierarchical ring, 2D torus and one-shot
// on the cuda backend (ranks as threads sharing GPU 0), each named in NCCL_ALGO as
// the cuda backend requires: AllReduce sums in and out of place at sizes
// below, across and far beyond a chunk, ReduceScatter and AllGather where
// halving-doubling serves them, and a max, which the cuda kernels run on
// the ring (their extra algorithms are built for the sum only). And direct
// mode between ranks of one process on the GPU.
#include <stdlib.h>

#include <initializer_list>
#include <string>

#include "core/comm.h"
#include "gpu/gpu_util.h"
#include "unit/scoped_env.h"
#include "weft.h"

namespace weft::test {
namespace {

using Env = weft::testing::ScopedEnv;

struct AlgoCase {
  const char* algo;     // NCCL_ALGO
  const char* perNode;  // WEFT_RANKS_PER_NODE (null: one node)
  const char* torus;    // WEFT_TORUS (null: derived)
  int nranks;
};

// Whether the named algorithm really ran (its connections were made on a
// channel), not a fallback to the ring.
bool ranNamed(ncclComm_t handle, const std::string& algo) {
  for (const core::Channel& channel : core::asComm(handle)->channels) {
    if (algo.find("Butterfly") != std::string::npos || algo.find("HalvingDoubling") != std::string::npos) {
      if (channel.exchangeConnected) return true;
    } else if (algo.find("HierarchicalRing") != std::string::npos) {
      if (channel.hierConnected) return true;
    } else if (channel.torusConnected) {
      return true;
    }
  }
  return false;
}

// A sum over the device copies of the communicator's FIFO ends (the kernels
// advance those, not the host ends); 0 when one cannot be read.
template <typename Count>
uint64_t sumDeviceEnds(ncclComm_t handle, Count count) {
  uint64_t sum = 0;
  for (const core::Channel& channel : core::asComm(handle)->channels)
    for (const auto* side : {&channel.send, &channel.recv})
      for (const auto& conn : *side) {
        if (!conn || conn->deviceEnd == nullptr) continue;
        device::FifoEnd end{};
        if (cudaMemcpy(&end, conn->deviceEnd, sizeof end, cudaMemcpyDeviceToHost) != cudaSuccess) return 0;
        sum += count(end);
      }
  return sum;
}

// Direct calls the kernels made.
uint64_t deviceDirectCalls(ncclComm_t handle) {
  return sumDeviceEnds(handle, [](const device::FifoEnd& end) { return end.directCalls; });
}

// LL128 steps the kernels completed: nonzero only if some call really ran LL128.
uint64_t deviceLL128Steps(ncclComm_t handle) {
  return sumDeviceEnds(handle, [](const device::FifoEnd& end) { return end.ll128.step; });
}

std::string caseName(const ::testing::TestParamInfo<AlgoCase>& info) {
  std::string name = std::string(info.param.algo).substr(std::string(info.param.algo).find(':') + 1);
  name = name.substr(0, name.find(';'));
  return name + "_" + std::to_string(info.param.nranks) + "ranks";
}

class GpuAlgos : public ::testing::TestWithParam<AlgoCase> {};

int32_t input(int rank, size_t i) { return static_cast<int32_t>((i % 1000) + 1) * (rank + 1); }

// The collectives the named algorithms serve, checked against the
// reference at each of `counts`: AllReduce sums in and out of place, a max
// (the ring on the cuda backend, whatever NCCL_ALGO names: the kernels have
// the extra algorithms for the sum only), AllGather, ReduceScatter (every
// rank gives the same gathered vector: segment r times n), and with
// `broadcast` a Broadcast from every root.
void checkCalls(int n, int r, ncclComm_t comm, cudaStream_t stream, std::initializer_list<size_t> counts,
                const char* label, bool broadcast) {
  const int32_t ranksSum = n * (n + 1) / 2;
  for (size_t count : counts) {
    std::vector<int32_t> host(count);
    for (size_t i = 0; i < count; ++i) host[i] = input(r, i);
    DeviceBuffer<int32_t> send(count), recv(count), inplace(count);
    send.upload(host);
    inplace.upload(host);
    NCCL_OK(ncclAllReduce(send.get(), recv.get(), count, ncclInt32, ncclSum, comm, stream), comm);
    NCCL_OK(ncclAllReduce(inplace.get(), inplace.get(), count, ncclInt32, ncclSum, comm, stream), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<int32_t> out = recv.download(), in = inplace.download();
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(out[i], static_cast<int32_t>((i % 1000) + 1) * ranksSum) << label << ", rank " << r << " " << i;
      ASSERT_EQ(in[i], out[i]) << "in place, " << label << ", rank " << r << " element " << i;
    }
    NCCL_OK(ncclAllReduce(send.get(), recv.get(), count, ncclInt32, ncclMax, comm, stream), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<int32_t> top = recv.download();
    for (size_t i = 0; i < count; ++i) ASSERT_EQ(top[i], input(n - 1, i)) << "max, " << label << ", rank " << r;
    DeviceBuffer<int32_t> all(count * static_cast<size_t>(n)), mine(count);
    NCCL_OK(ncclAllGather(send.get(), all.get(), count, ncclInt32, comm, stream), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<int32_t> gathered = all.download();
    for (int q = 0; q < n; ++q)
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(gathered[static_cast<size_t>(q) * count + i], input(q, i)) << "allgather, " << label;
    NCCL_OK(ncclReduceScatter(all.get(), mine.get(), count, ncclInt32, ncclSum, comm, stream), comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    const std::vector<int32_t> scattered = mine.download();
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(scattered[i], input(r, i) * n) << "reducescatter, " << label << ", rank " << r << " " << i;
    for (int root = 0; broadcast && root < n; ++root) {
      DeviceBuffer<int32_t> bcast(count);
      NCCL_OK(ncclBroadcast(send.get(), bcast.get(), count, ncclInt32, root, comm, stream), comm);
      CUDA_OK(cudaStreamSynchronize(stream));
      const std::vector<int32_t> got = bcast.download();
      for (size_t i = 0; i < count; ++i)
        ASSERT_EQ(got[i], input(root, i)) << "broadcast from " << root << ", " << label << ", rank " << r;
    }
  }
}

TEST_P(GpuAlgos, ResultsMatchTheReference) {
  WEFT_REQUIRE_GPU();
  const AlgoCase c = GetParam();
  Env algo("NCCL_ALGO", c.algo);
  Env perNode("WEFT_RANKS_PER_NODE", c.perNode);
  Env torus("WEFT_TORUS", c.torus);
  Env buff("NCCL_BUFFSIZE", "65536");  // chunks of a few KiB: the sizes below cross them
  const int n = c.nranks;
  onRanks(n, [&](int r, ncclComm_t comm, cudaStream_t stream) {
    checkCalls(n, r, comm, stream, {1, 1001, 300007}, c.algo, false);
    EXPECT_TRUE(ranNamed(comm, c.algo)) << c.algo << ": no channel connected it, rank " << r;
  });
}

// Direct mode (WEFT_DIRECT=1) between ranks sharing the GPU: large ring
// AllReduce, AllGather and Broadcast write into the next rank's output;
// in place and out of place, two calls back to back (the second call's
// post must not let a write land in the first call's buffer).
TEST(GpuDirect, RingCallsWriteIntoThePeersBuffers) {
  WEFT_REQUIRE_GPU();
  Env direct("WEFT_DIRECT", "1");
  Env algo("NCCL_ALGO", "Ring");
  for (int n : {2, 3, 4}) {
    const int32_t ranksSum = n * (n + 1) / 2;
    onRanks(n, [&](int r, ncclComm_t comm, cudaStream_t stream) {
      for (size_t count : {size_t{1} << 16, size_t{1000003}}) {
        std::vector<int32_t> host(count);
        for (size_t i = 0; i < count; ++i) host[i] = input(r, i);
        DeviceBuffer<int32_t> send(count), recv(count), again(count), inplace(count);
        send.upload(host);
        inplace.upload(host);
        NCCL_OK(ncclAllReduce(send.get(), recv.get(), count, ncclInt32, ncclSum, comm, stream), comm);
        NCCL_OK(ncclAllReduce(send.get(), again.get(), count, ncclInt32, ncclSum, comm, stream), comm);
        NCCL_OK(ncclAllReduce(inplace.get(), inplace.get(), count, ncclInt32, ncclSum, comm, stream), comm);
        CUDA_OK(cudaStreamSynchronize(stream));
        const std::vector<int32_t> out = recv.download(), out2 = again.download(), in = inplace.download();
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(out[i], static_cast<int32_t>((i % 1000) + 1) * ranksSum) << n << " ranks, rank " << r << " " << i;
          ASSERT_EQ(out2[i], out[i]) << "second call, " << n << " ranks, rank " << r << " element " << i;
          ASSERT_EQ(in[i], out[i]) << "in place, " << n << " ranks, rank " << r << " element " << i;
        }
        DeviceBuffer<int32_t> all(count * static_cast<size_t>(n)), bcast(count);
        NCCL_OK(ncclAllGather(send.get(), all.get(), count, ncclInt32, comm, stream), comm);
        NCCL_OK(ncclBroadcast(send.get(), bcast.get(), count, ncclInt32, n - 1, comm, stream), comm);
        CUDA_OK(cudaStreamSynchronize(stream));
        const std::vector<int32_t> gathered = all.download(), root = bcast.download();
        for (int q = 0; q < n; ++q)
          for (size_t i = 0; i < count; i += 7)
            ASSERT_EQ(gathered[static_cast<size_t>(q) * count + i], input(q, i)) << "allgather, rank " << r;
        for (size_t i = 0; i < count; ++i) ASSERT_EQ(root[i], input(n - 1, i)) << "broadcast, rank " << r << " " << i;
      }
      EXPECT_GT(deviceDirectCalls(comm), 0u) << n << " ranks, rank " << r << ": no call ran in direct mode";
    });
  }
}

// One-shot on 2 to 4 ranks sharing the GPU, under Simple and LL, named in
// NCCL_ALGO for one collective at a time (as the cuda backend requires), so
// that its flat connections prove that collective ran one-shot: AllReduce at
// every rank count, the others from 3 ranks (at 2 they are the ring).
TEST(GpuOneShot, EachCollectiveRunsItUnderBothProtocols) {
  WEFT_REQUIRE_GPU();
  Env buff("NCCL_BUFFSIZE", "65536");
  for (const char* coll : {"allreduce", "allgather", "reducescatter", "broadcast"}) {
    const std::string named = std::string(coll) + ":OneShot";
    Env algo("NCCL_ALGO", named.c_str());
    for (const char* proto : {"Simple", "LL"}) {
      Env protocol("NCCL_PROTO", proto);
      for (int n : {2, 3, 4}) {
        const std::string label = named + ", " + proto + ", " + std::to_string(n) + " ranks";
        const bool expectFlat = std::string(coll) == "allreduce" || n >= 3;
        onRanks(n, [&](int r, ncclComm_t comm, cudaStream_t stream) {
          checkCalls(n, r, comm, stream, {1, 2, 1001, 20011}, label.c_str(), true);
          bool flat = false;
          for (const core::Channel& channel : core::asComm(comm)->channels) flat = flat || channel.flatConnected;
          EXPECT_EQ(flat, expectFlat) << label << ", rank " << r;
        });
      }
    }
  }
}

// LL128 (NCCL_PROTO=LL128) on 2 to 4 ranks sharing the GPU, on rings (the
// cuda kernels have no LL128 trees): every collective against the reference
// at sizes inside one line, across lines, steps and chunks
// (NCCL_BUFFSIZE=65536: 8 KiB steps of 7680 payload bytes), and the device
// FIFO ends show LL128 steps, so it was not Simple. Unnamed and named ring
// alike (NCCL_PROTO=LL128 keeps the planner off algorithms without LL128).
TEST(GpuLL128, RingsMatchTheReference) {
  WEFT_REQUIRE_GPU();
  Env buff("NCCL_BUFFSIZE", "65536");
  Env protocol("NCCL_PROTO", "LL128");
  for (const char* algo : {"", "Ring"}) {
    Env algoEnv("NCCL_ALGO", *algo ? algo : nullptr);
    for (int n : {2, 3, 4}) {
      const std::string label = std::string(*algo ? algo : "any") + ", LL128, " + std::to_string(n) + " ranks";
      onRanks(n, [&](int r, ncclComm_t comm, cudaStream_t stream) {
        checkCalls(n, r, comm, stream, {1, 2, 29, 31, 1001, 20011, 300007}, label.c_str(), true);
        EXPECT_GT(deviceLL128Steps(comm), 0u) << label << ", rank " << r << ": no LL128 step ran";
      });
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Named, GpuAlgos,
    ::testing::Values(AlgoCase{"allreduce:Butterfly", nullptr, nullptr, 2},
                      AlgoCase{"allreduce:Butterfly", nullptr, nullptr, 5},
                      AlgoCase{"allreduce:Butterfly", nullptr, nullptr, 8},
                      AlgoCase{"allreduce:HalvingDoubling;reducescatter:HalvingDoubling;allgather:HalvingDoubling",
                               nullptr, nullptr, 3},
                      AlgoCase{"allreduce:HalvingDoubling;reducescatter:HalvingDoubling;allgather:HalvingDoubling",
                               nullptr, nullptr, 4},
                      AlgoCase{"allreduce:HalvingDoubling;reducescatter:HalvingDoubling;allgather:HalvingDoubling",
                               nullptr, nullptr, 6},
                      AlgoCase{"allreduce:HierarchicalRing", "2", nullptr, 4},
                      AlgoCase{"allreduce:HierarchicalRing", "3", nullptr, 6},
                      AlgoCase{"allreduce:Torus2D", nullptr, "2x2", 4},
                      AlgoCase{"allreduce:Torus2D", nullptr, "2x3", 6}),
    caseName);

}  // namespace
}  // namespace weft::test
