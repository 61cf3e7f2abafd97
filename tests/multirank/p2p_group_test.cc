// Point-to-point and groups: ring shifts, pairwise exchange, sends to self,
// several messages to one peer in one group, zero bytes, collectives and
// send/recv mixed in one group, nested groups, and several communicators
// driven from one thread.
#include <gtest/gtest.h>

#include <numeric>
#include <string>
#include <vector>

#include "multirank/coll_check.h"

namespace weft::test {
namespace {

std::vector<int32_t> pattern(int rank, size_t n, int salt = 0) {
  std::vector<int32_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = rank * 1000003 + static_cast<int32_t>(i) * 7 + salt;
  return v;
}

class P2p : public ::testing::TestWithParam<RankMode> {};

TEST_P(P2p, RingShiftAtManySizes) {
  ScopedEnv buff("NCCL_BUFFSIZE", "65536");
  runRanks(GetParam(), 4, [](RankContext& ctx) {
    const int next = (ctx.rank + 1) % ctx.nranks, prev = (ctx.rank + ctx.nranks - 1) % ctx.nranks;
    for (size_t n : {size_t{0}, size_t{1}, size_t{2047}, size_t{2048}, size_t{2049}, size_t{100003}}) {
      std::vector<int32_t> send = pattern(ctx.rank, n), recv(n + 1, -1);
      ASSERT_EQ(ncclGroupStart(), ncclSuccess);
      ASSERT_EQ(ncclSend(send.data(), n, ncclInt32, next, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRecv(recv.data(), n, ncclInt32, prev, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(ctx.comm);
      const std::vector<int32_t> want = pattern(prev, n);
      ASSERT_TRUE(std::equal(want.begin(), want.end(), recv.begin())) << "count " << n;
      EXPECT_EQ(recv[n], -1) << "wrote past the receive buffer, count " << n;
    }
  });
}

TEST_P(P2p, EveryPairAndSelfInOneGroup) {
  runRanks(GetParam(), 5, [](RankContext& ctx) {
    const size_t n = 3001;
    std::vector<std::vector<int32_t>> send(5), recv(5);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int p = 0; p < ctx.nranks; ++p) {
      send[p] = pattern(ctx.rank, n, p);
      recv[p].assign(n, -1);
      ASSERT_EQ(ncclSend(send[p].data(), n, ncclInt32, p, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRecv(recv[p].data(), n, ncclInt32, p, ctx.comm, nullptr), ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(ctx.comm);
    for (int p = 0; p < ctx.nranks; ++p) EXPECT_EQ(recv[p], pattern(p, n, ctx.rank)) << "from rank " << p;
  });
}

TEST_P(P2p, SeveralMessagesToOnePeerArriveInOrder) {
  runRanks(GetParam(), 2, [](RankContext& ctx) {
    const int peer = 1 - ctx.rank;
    const size_t sizes[] = {5, 70000, 0, 1};
    std::vector<std::vector<int32_t>> send, recv;
    for (int i = 0; i < 4; ++i) {
      send.push_back(pattern(ctx.rank, sizes[i], i));
      recv.emplace_back(sizes[i], -1);
    }
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    for (int i = 0; i < 4; ++i) {
      ASSERT_EQ(ncclSend(send[i].data(), sizes[i], ncclInt32, peer, ctx.comm, nullptr), ncclSuccess);
      ASSERT_EQ(ncclRecv(recv[i].data(), sizes[i], ncclInt32, peer, ctx.comm, nullptr), ncclSuccess);
    }
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(ctx.comm);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(recv[i], pattern(peer, sizes[i], i)) << "message " << i;
  });
}

TEST_P(P2p, CollectivesAndSendRecvMixedInNestedGroups) {
  runRanks(GetParam(), 3, [](RankContext& ctx) {
    const size_t n = 10007;
    std::vector<int32_t> a(n, ctx.rank + 1), sum(n, 0), gathered(n * 3, 0);
    std::vector<int32_t> send = pattern(ctx.rank, n), recv(n, -1);
    const int next = (ctx.rank + 1) % 3, prev = (ctx.rank + 2) % 3;
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);
    ASSERT_EQ(ncclAllReduce(a.data(), sum.data(), n, ncclInt32, ncclSum, ctx.comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupStart(), ncclSuccess);  // nested: only the outermost end launches
    ASSERT_EQ(ncclSend(send.data(), n, ncclInt32, next, ctx.comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(recv.data(), n, ncclInt32, prev, ctx.comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
    EXPECT_EQ(sum[0], 0) << "an inner ncclGroupEnd ran the group";
    ASSERT_EQ(ncclAllGather(a.data(), gathered.data(), n, ncclInt32, ctx.comm, nullptr), ncclSuccess);
    ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(ctx.comm);
    EXPECT_EQ(sum, std::vector<int32_t>(n, 6));
    EXPECT_EQ(recv, pattern(prev, n));
    for (int r = 0; r < 3; ++r) EXPECT_EQ(gathered[static_cast<size_t>(r) * n], r + 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Modes, P2p, ::testing::Values(RankMode::kThreads, RankMode::kProcesses),
                         [](const ::testing::TestParamInfo<RankMode>& p) { return std::string(modeName(p.param)); });

// ncclCommInitAll: one thread drives four communicators through groups.
TEST(OneThreadManyComms, InitAllThenGroupedCollectivesAndSendRecv) {
  setenv("WEFT_BACKEND", "host", 0);
  constexpr int kRanks = 4;
  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclCommInitAll(comms, kRanks, nullptr), ncclSuccess) << ncclGetLastError(nullptr);
  const size_t n = 50000;
  std::vector<std::vector<float>> in(kRanks), out(kRanks), ring(kRanks);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    int rank = -1, count = 0;
    ASSERT_EQ(ncclCommUserRank(comms[r], &rank), ncclSuccess);
    ASSERT_EQ(ncclCommCount(comms[r], &count), ncclSuccess);
    ASSERT_EQ(rank, r);
    ASSERT_EQ(count, kRanks);
    in[r].assign(n, static_cast<float>(r + 1));
    out[r].assign(n, 0);
    ring[r].assign(n, -1);
    ASSERT_EQ(ncclAllReduce(in[r].data(), out[r].data(), n, ncclFloat32, ncclSum, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclSend(in[r].data(), n, ncclFloat32, (r + 1) % kRanks, comms[r], nullptr), ncclSuccess);
    ASSERT_EQ(ncclRecv(ring[r].data(), n, ncclFloat32, (r + kRanks - 1) % kRanks, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(comms[0]);
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(out[r], std::vector<float>(n, 10.0f)) << "rank " << r;
    EXPECT_EQ(ring[r], std::vector<float>(n, static_cast<float>((r + kRanks - 1) % kRanks + 1))) << "rank " << r;
  }
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

// The nccl-tests pattern: InitRank for every rank inside one group.
TEST(OneThreadManyComms, InitRankInsideAGroup) {
  setenv("WEFT_BACKEND", "host", 0);
  constexpr int kRanks = 3;
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  ncclComm_t comms[kRanks];
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) ASSERT_EQ(ncclCommInitRank(&comms[r], kRanks, id, r), ncclSuccess);
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess) << ncclGetLastError(nullptr);
  std::vector<std::vector<int64_t>> data(kRanks);
  ASSERT_EQ(ncclGroupStart(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) {
    data[r].assign(999, r == 1 ? 42 : 0);
    ASSERT_EQ(ncclBroadcast(data[r].data(), data[r].data(), 999, ncclInt64, 1, comms[r], nullptr), ncclSuccess);
  }
  ASSERT_EQ(ncclGroupEnd(), ncclSuccess);
  for (int r = 0; r < kRanks; ++r) EXPECT_EQ(data[r], std::vector<int64_t>(999, 42)) << "rank " << r;
  for (ncclComm_t c : comms) EXPECT_EQ(ncclCommDestroy(c), ncclSuccess);
}

}  // namespace
}  // namespace weft::test
