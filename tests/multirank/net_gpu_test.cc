// The cuda backend across nodes: ranks as threads sharing GPU 0, split into
// virtual nodes (WEFT_RANKS_PER_NODE), so every link between nodes is a
// network link: a FIFO in pinned host memory mapped into the GPU, filled and
// drained by the kernel, moved by the proxy over the socket network. Every
// collective and send/recv must carry the data; a peer that aborts must stop
// the others' kernels and fail their next call, naming the link, in bounded
// time. Each test skips itself when no CUDA device is usable.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "multirank/coll_check.h"
#include "weft.h"

namespace weft::test {
namespace {

struct NodeShape {
  int nranks;
  int ranksPerNode;
};

void PrintTo(const NodeShape& s, std::ostream* os) { *os << s.nranks << " ranks, " << s.ranksPerNode << " per node"; }

// Runs body on every rank (threads, GPU 0, own stream) with a cuda communicator.
void runGpuRanks(const NodeShape& shape, const std::function<void(RankContext&, cudaStream_t)>& body) {
  ScopedEnv backend("WEFT_BACKEND", "cuda");
  const std::string perNode = std::to_string(shape.ranksPerNode);
  ScopedEnv nodes("WEFT_RANKS_PER_NODE", perNode.c_str());
  ScopedEnv buff("NCCL_BUFFSIZE", "131072");  // 16 KiB steps: many network messages per call
  ScopedEnv maxChannels("NCCL_MAX_NCHANNELS", "2");
  ScopedEnv minChannels("NCCL_MIN_NCHANNELS", "2");
  runRanksRaw(RankMode::kThreads, shape.nranks, [&](int rank, int n, const ncclUniqueId& id) {
    CUDA_OK(cudaSetDevice(0));
    RankContext ctx{rank, n, nullptr};
    NCCL_OK(ncclCommInitRank(&ctx.comm, n, id, rank), nullptr);
    weftBackend_t chosen;
    NCCL_OK(weftCommGetBackend(ctx.comm, &chosen), ctx.comm);
    EXPECT_EQ(chosen, weftBackendCuda);
    cudaStream_t stream;
    CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    withDeferredFrees(stream, [&] { body(ctx, stream); });  // no cudaFree between collectives
    cudaStreamDestroy(stream);
    if (ctx.comm) {
      EXPECT_EQ(ncclCommDestroy(ctx.comm), ncclSuccess) << ncclGetLastError(ctx.comm);
    }
  });
}

class GpuAcrossNodes : public ::testing::TestWithParam<NodeShape> {};

// Ring collectives, send/recv through
// the proxy, and the same AllReduce launched many times without a sync in
// between (operations queue on the proxy's links in launch order).
TEST_P(GpuAcrossNodes, EveryCollectiveAndSendRecvCarryTheData) {
  WEFT_REQUIRE_GPU();
  runGpuRanks(GetParam(), [](RankContext& ctx, cudaStream_t stream) {
    const int n = ctx.nranks, r = ctx.rank;
    constexpr size_t kCount = 300001;  // crosses step, chunk and channel borders
    std::vector<float> input(kCount);
    for (size_t i = 0; i < kCount; ++i) input[i] = static_cast<float>((r + 1) * static_cast<int>(i % 7 + 1));
    DeviceBuffer<float> send(kCount), sum(kCount), repeated(kCount);
    send.upload(input);
    NCCL_OK(ncclAllReduce(send.get(), sum.get(), kCount, ncclFloat32, ncclSum, ctx.comm, stream), ctx.comm);
    repeated.upload(std::vector<float>(kCount, 1.0f));
    constexpr int kRepeats = 12;  // 1 -> n^12 stays exact in float for n <= 4
    for (int i = 0; i < kRepeats; ++i)
      NCCL_OK(ncclAllReduce(repeated.get(), repeated.get(), 64, ncclFloat32, ncclSum, ctx.comm, stream), ctx.comm);

    DeviceBuffer<int32_t> mine(kCount), gathered(kCount * n), scattered(kCount / n);
    mine.upload(std::vector<int32_t>(kCount, r + 1));
    NCCL_OK(ncclAllGather(mine.get(), gathered.get(), kCount, ncclInt32, ctx.comm, stream), ctx.comm);
    NCCL_OK(ncclReduceScatter(gathered.get(), scattered.get(), kCount / n, ncclInt32, ncclMax, ctx.comm, stream),
            ctx.comm);

    constexpr size_t kBcast = 100003;
    DeviceBuffer<int8_t> bcast(kBcast);
    bcast.upload(std::vector<int8_t>(kBcast, static_cast<int8_t>(r == n - 1 ? 42 : -1)));
    NCCL_OK(ncclBroadcast(bcast.get(), bcast.get(), kBcast, ncclInt8, n - 1, ctx.comm, stream), ctx.comm);

    constexpr size_t kP2p = 70001;
    DeviceBuffer<int64_t> ringOut(kP2p), ringIn(kP2p);
    std::vector<int64_t> ringData(kP2p);
    for (size_t i = 0; i < kP2p; ++i) ringData[i] = r * 1000000 + static_cast<int64_t>(i);
    ringOut.upload(ringData);
    NCCL_OK(ncclGroupStart(), ctx.comm);
    NCCL_OK(ncclSend(ringOut.get(), kP2p, ncclInt64, (r + 1) % n, ctx.comm, stream), ctx.comm);
    NCCL_OK(ncclRecv(ringIn.get(), kP2p, ncclInt64, (r + n - 1) % n, ctx.comm, stream), ctx.comm);
    NCCL_OK(ncclGroupEnd(), ctx.comm);
    CUDA_OK(cudaStreamSynchronize(stream));

    const float ranksSum = static_cast<float>(n * (n + 1) / 2);
    std::vector<float> s = sum.download();
    for (size_t i = 0; i < kCount; ++i)
      ASSERT_EQ(s[i], ranksSum * static_cast<float>(i % 7 + 1)) << "allreduce, rank " << r << " element " << i;
    float expected = 1.0f;
    for (int i = 0; i < kRepeats; ++i) expected *= static_cast<float>(n);
    std::vector<float> rep = repeated.download();
    for (size_t i = 0; i < 64; ++i) ASSERT_EQ(rep[i], expected) << "repeated allreduce, element " << i;
    std::vector<int32_t> g = gathered.download(), m = scattered.download();
    for (size_t i = 0; i < kCount * n; ++i) ASSERT_EQ(g[i], static_cast<int>(i / kCount) + 1) << "allgather " << i;
    for (size_t i = 0; i < kCount / n; ++i)
      ASSERT_EQ(m[i], static_cast<int>((r * (kCount / n) + i) / kCount) + 1) << "reducescatter " << i;
    std::vector<int8_t> b = bcast.download();
    for (size_t i = 0; i < kBcast; ++i) ASSERT_EQ(b[i], 42) << "broadcast " << i;
    std::vector<int64_t> in = ringIn.download();
    const int prev = (r + n - 1) % n;
    for (size_t i = 0; i < kP2p; ++i) ASSERT_EQ(in[i], prev * 1000000 + static_cast<int64_t>(i)) << "recv " << i;
  });
}

INSTANTIATE_TEST_SUITE_P(Shapes, GpuAcrossNodes, ::testing::Values(NodeShape{2, 1}, NodeShape{3, 1}, NodeShape{4, 2}),
                         [](const ::testing::TestParamInfo<NodeShape>& p) {
                           return std::to_string(p.param.nranks) + "ranks" + std::to_string(p.param.ranksPerNode) +
                                  "perNode";
                         });

// Tree AllReduce in the kernels (forced; the cost model picks it for many
// nodes): the up and down passes across nodes through the network FIFOs,
// every reduction kind, sizes across tree chunks and FIFO steps. The TUNING
// log shows the tree was chosen for each size (a fallback to the ring would
// carry the same data).
TEST_P(GpuAcrossNodes, TreeAllReduceInTheKernels) {
  WEFT_REQUIRE_GPU();
  ScopedEnv algo("NCCL_ALGO", "allreduce:Tree");
  const std::string logPath = tempPath("tree-log");
  {
    ScopedEnv debug("NCCL_DEBUG", "INFO");
    ScopedEnv sub("NCCL_DEBUG_SUBSYS", "TUNING");
    ScopedEnv file("NCCL_DEBUG_FILE", logPath.c_str());
    ncclResetDebugInit();
    runGpuRanks(GetParam(), [](RankContext& ctx, cudaStream_t stream) {
      const int n = ctx.nranks, r = ctx.rank;
      for (size_t count : {size_t{1}, size_t{4097}, size_t{300001}}) {
        std::vector<int32_t> input(count);
        for (size_t i = 0; i < count; ++i) input[i] = (r + 1) * static_cast<int>(i % 5 + 1);
        DeviceBuffer<int32_t> send(count), sum(count), max(count);
        send.upload(input);
        NCCL_OK(ncclAllReduce(send.get(), sum.get(), count, ncclInt32, ncclSum, ctx.comm, stream), ctx.comm);
        NCCL_OK(ncclAllReduce(send.get(), max.get(), count, ncclInt32, ncclMax, ctx.comm, stream), ctx.comm);
        CUDA_OK(cudaStreamSynchronize(stream));
        std::vector<int32_t> s = sum.download(), m = max.download();
        for (size_t i = 0; i < count; ++i) {
          ASSERT_EQ(s[i], n * (n + 1) / 2 * static_cast<int>(i % 5 + 1)) << "tree sum, count " << count << " at " << i;
          ASSERT_EQ(m[i], n * static_cast<int>(i % 5 + 1)) << "tree max, count " << count << " at " << i;
        }
      }
    });
  }
  ncclResetDebugInit();
  const std::string log = slurp(logPath);
  std::remove(logPath.c_str());
  for (size_t count : {size_t{1}, size_t{4097}, size_t{300001}}) {
    const std::string line = "AllReduce " + std::to_string(count * sizeof(int32_t)) + " bytes: Tree";
    EXPECT_NE(log.find(line), std::string::npos) << "no '" << line << "' in the TUNING log:\n" << log;
  }
}

// A rank that aborts (closing its sockets): the survivors' proxies fail, the
// proxies raise their kernels' abort flag, so the kernels stop and the
// stream completes; the next call fails naming a peer, and
// ncclCommGetAsyncError reports it. All within a bound.
TEST(GpuAcrossNodesFailures, PeerAbortStopsTheOthersKernelsAndFailsTheirNextCall) {
  WEFT_REQUIRE_GPU();
  runGpuRanks({3, 1}, [](RankContext& ctx, cudaStream_t stream) {
    constexpr size_t kCount = 1 << 20;
    DeviceBuffer<float> data(kCount);
    data.upload(std::vector<float>(kCount, 1.0f));
    NCCL_OK(ncclAllReduce(data.get(), data.get(), kCount, ncclFloat32, ncclSum, ctx.comm, stream), ctx.comm);
    CUDA_OK(cudaStreamSynchronize(stream));
    if (ctx.rank == 1) {
      // Its last sends may still be with the proxy: finalize flushes them, so
      // the others' first call surely completes.
      EXPECT_EQ(ncclCommFinalize(ctx.comm), ncclSuccess) << ncclGetLastError(ctx.comm);
      EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
      ctx.comm = nullptr;
      return;
    }
    const auto t0 = std::chrono::steady_clock::now();
    ncclResult_t rc = ncclSuccess;
    for (int i = 0; i < 50 && rc == ncclSuccess; ++i) {
      rc = ncclAllReduce(data.get(), data.get(), kCount, ncclFloat32, ncclSum, ctx.comm, stream);
      // Returns once the kernel ends: complete, or stopped by the proxy.
      CUDA_OK(cudaStreamSynchronize(stream));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_TRUE(rc == ncclRemoteError || rc == ncclSystemError) << ncclGetErrorString(rc);
    EXPECT_LT(seconds, 20.0) << "the failure took too long to notice";
    expectNetworkFailureNamingAPeer(ctx);
    EXPECT_EQ(ncclCommAbort(ctx.comm), ncclSuccess);
    ctx.comm = nullptr;
  });
}

}  // namespace
}  // namespace weft::test
