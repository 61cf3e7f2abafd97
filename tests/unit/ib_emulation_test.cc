// The verbs emulation the IB network's tests run on, held to the verbs
// semantics the network relies on: the QP state machine and the attributes
// each transition needs, RDMA WRITE / WRITE WITH IMM / SEND delivery in
// order, key and bounds checks, flushing on error, and a vanished peer
// failing with a retry error after the bound and not before; RDMA READ and
// dma-buf regions (a memfd standing for the dma-buf). Also the IB
// network's pure helpers: NCCL_IB_HCA parsing, port speed, GID choice.
#include <arpa/inet.h>
#include <endian.h>
#include <gtest/gtest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "transport/net/ib/ib_device.h"
#include "transport/net/ib/ib_emulation.h"

namespace weft::testing {
namespace {

using namespace transport::ib;  // NOLINT: the code under test

// ---- NCCL_IB_HCA, speeds, GIDs ---------------------------------------------

TEST(IbHcaFilter, PrefixesPortsExclusionAndExactNames) {
  const HcaFilter list = parseHcaFilter("mlx5_0:1,mlx5_1");
  EXPECT_TRUE(hcaSelected(list, "mlx5_0", 1));
  EXPECT_FALSE(hcaSelected(list, "mlx5_0", 2)) << "mlx5_0:1 names port 1 only";
  EXPECT_TRUE(hcaSelected(list, "mlx5_1", 2));
  EXPECT_TRUE(hcaSelected(list, "mlx5_10", 1)) << "names are prefixes without =";
  EXPECT_FALSE(hcaSelected(list, "mlx5_2", 1));

  const HcaFilter exact = parseHcaFilter("=mlx5_1");
  EXPECT_TRUE(hcaSelected(exact, "mlx5_1", 1));
  EXPECT_FALSE(hcaSelected(exact, "mlx5_10", 1));

  const HcaFilter excluded = parseHcaFilter("^mlx5_3");
  EXPECT_FALSE(hcaSelected(excluded, "mlx5_3", 1));
  EXPECT_FALSE(hcaSelected(excluded, "mlx5_30", 1));
  EXPECT_TRUE(hcaSelected(excluded, "mlx5_0", 1));

  const HcaFilter excludedExact = parseHcaFilter("^=mlx5_3:2");
  EXPECT_TRUE(excludedExact.exclude && excludedExact.exact);
  EXPECT_FALSE(hcaSelected(excludedExact, "mlx5_3", 2));
  EXPECT_TRUE(hcaSelected(excludedExact, "mlx5_3", 1));
  EXPECT_TRUE(hcaSelected(excludedExact, "mlx5_30", 2));

  EXPECT_TRUE(hcaSelected(parseHcaFilter(""), "anything", 7));
}

TEST(IbPortSpeed, SpeedTimesWidth) {
  EXPECT_EQ(portSpeedMbps(32, 2), 100000);   // EDR 4x
  EXPECT_EQ(portSpeedMbps(64, 2), 200000);   // HDR 4x
  EXPECT_EQ(portSpeedMbps(128, 2), 400000);  // NDR 4x
  EXPECT_EQ(portSpeedMbps(16, 1), 14000);    // FDR 1x
  EXPECT_EQ(portSpeedMbps(1, 8), 30000);     // SDR 12x
  EXPECT_EQ(portSpeedMbps(3, 2), 0) << "unknown speed code";
  EXPECT_EQ(portSpeedMbps(32, 3), 0) << "unknown width code";
}

ibv_gid gidFrom(const char* v6) {
  ibv_gid g{};
  EXPECT_EQ(inet_pton(AF_INET6, v6, g.raw), 1) << v6;
  return g;
}

TEST(IbGidChoice, FamilyAndRoceVersionPickTheEntry) {
  const std::vector<GidCandidate> table = {{0, gidFrom("fe80::1"), 1},         {1, gidFrom("fe80::1"), 2},
                                           {2, gidFrom("::ffff:10.0.0.1"), 1}, {3, gidFrom("::ffff:10.0.0.1"), 2},
                                           {4, gidFrom("2001:db8::1"), 2},     {5, ibv_gid{}, 2}};
  EXPECT_EQ(chooseGidIndex(table, AF_INET, 2), 3);
  EXPECT_EQ(chooseGidIndex(table, AF_INET, 1), 2);
  EXPECT_EQ(chooseGidIndex(table, AF_INET6, 2), 4) << "a global IPv6 GID before a link-local one";
  EXPECT_EQ(chooseGidIndex(table, AF_INET6, 1), 0) << "link-local when nothing else matches";
  const std::vector<GidCandidate> unknownTypes = {{0, ibv_gid{}, 0}, {1, gidFrom("::ffff:10.0.0.2"), 0}};
  EXPECT_EQ(chooseGidIndex(unknownTypes, AF_INET, 2), 1) << "a GID whose type the kernel does not say is usable";
  EXPECT_EQ(chooseGidIndex(unknownTypes, AF_INET6, 2), -1);
}

// ---- the emulation -------------------------------------------------------------

const Verbs& emulated() { return *emulationVerbs(2); }

// Two QPs on emu0 and emu1 joined RC, each with its own CQ and a registered
// 64 KiB buffer.
struct Pair {
  const Verbs& v = emulated();
  ibv_context* ctx[2] = {};
  ibv_pd* pd[2] = {};
  ibv_cq* cq[2] = {};
  ibv_qp* qp[2] = {};
  std::vector<char> buf[2] = {std::vector<char>(65536), std::vector<char>(65536)};
  ibv_mr* mr[2] = {};

  int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;  // of the QPs and the buffers

  explicit Pair(uint8_t timeout = 14, uint8_t retry = 7, bool remoteRead = false) {
    if (remoteRead) access |= IBV_ACCESS_REMOTE_READ;
    int count = 0;
    ibv_device** list = v.getDeviceList(&count);
    EXPECT_EQ(count, 2);
    for (int i = 0; i < 2; ++i) {
      ctx[i] = v.openDevice(list[i]);
      pd[i] = v.allocPd(ctx[i]);
      cq[i] = v.createCq(ctx[i], 256, nullptr, nullptr, 0);
      ibv_qp_init_attr init{};
      init.send_cq = init.recv_cq = cq[i];
      init.qp_type = IBV_QPT_RC;
      init.cap.max_send_wr = init.cap.max_recv_wr = 64;
      qp[i] = v.createQp(pd[i], &init);
      mr[i] = v.regMr(pd[i], buf[i].data(), buf[i].size(), access);
    }
    for (int i = 0; i < 2; ++i) EXPECT_EQ(toRts(i, timeout, retry), 0);
  }
  ~Pair() {
    for (int i = 0; i < 2; ++i) {
      v.destroyQp(qp[i]);
      v.destroyCq(cq[i]);
      v.deregMr(mr[i]);
      v.deallocPd(pd[i]);
      v.closeDevice(ctx[i]);
    }
  }
  int toInit(int i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_INIT;
    a.port_num = 1;
    a.qp_access_flags = static_cast<unsigned>(access);
    return v.modifyQp(qp[i], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  }
  int toRtr(int i) {
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = qp[1 - i]->qp_num;
    ibv_port_attr pa{};
    v.queryPort(ctx[1 - i], 1, &pa);
    a.ah_attr.dlid = pa.lid;
    a.ah_attr.port_num = 1;
    return v.modifyQp(qp[i], &a,
                      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  }
  int toRts(int i, uint8_t timeout, uint8_t retry) {
    if (int rc = toInit(i)) return rc;
    if (int rc = toRtr(i)) return rc;
    ibv_qp_attr a{};
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry;
    a.rnr_retry = 7;
    return v.modifyQp(
        qp[i], &a,
        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }
  // Posts one request from side 0 (`bytes` from buf[0]+from to side 1's buffer at `to`).
  int post(ibv_wr_opcode op, uint32_t from, uint32_t bytes, uint64_t to, uint32_t rkey, uint64_t id, uint32_t imm = 0) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf[0].data()) + from, bytes, mr[0]->lkey};
    ibv_send_wr wr{};
    wr.wr_id = id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htobe32(imm);
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(buf[1].data()) + to;
    wr.wr.rdma.rkey = rkey;
    ibv_send_wr* bad = nullptr;
    return v.postSend(qp[0], &wr, &bad);
  }
  int postRecv(int side, uint64_t id, uint32_t bytes = 0) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(buf[side].data()), bytes, mr[side]->lkey};
    ibv_recv_wr wr{};
    wr.wr_id = id;
    wr.sg_list = bytes ? &sge : nullptr;
    wr.num_sge = bytes ? 1 : 0;
    ibv_recv_wr* bad = nullptr;
    return v.postRecv(qp[side], &wr, &bad);
  }
  std::vector<ibv_wc> poll(int side) {
    std::vector<ibv_wc> out;
    ibv_wc wc[8];
    for (int n; (n = v.pollCq(cq[side], 8, wc)) > 0;) out.insert(out.end(), wc, wc + n);
    return out;
  }
};

TEST(IbEmulation, TransitionsNeedTheirAttributesAndOrder) {
  Pair p;
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = p.cq[0];
  init.qp_type = IBV_QPT_RC;
  ibv_qp* qp = p.v.createQp(p.pd[0], &init);
  ASSERT_NE(qp, nullptr);
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RTR;
  EXPECT_NE(p.v.modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN), 0)
      << "RESET to RTR skips INIT";
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  EXPECT_NE(p.v.modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PORT), 0) << "INIT needs pkey index and access flags";
  EXPECT_EQ(p.v.modifyQp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0);
  ibv_sge sge{reinterpret_cast<uintptr_t>(p.buf[0].data()), 8, p.mr[0]->lkey};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  ibv_send_wr* bad = nullptr;
  EXPECT_EQ(p.v.postSend(qp, &wr, &bad), EINVAL) << "sending before RTS";
  EXPECT_EQ(bad, &wr);
  p.v.destroyQp(qp);
}

TEST(IbEmulation, WriteWithImmCompletesTheReceiveInOrder) {
  Pair p;
  for (int i = 0; i < 3; ++i) ASSERT_EQ(p.postRecv(1, 100 + i), 0);
  for (int i = 0; i < 3; ++i) {
    std::memset(p.buf[0].data() + 1000 * i, 'a' + i, 1000);
    ASSERT_EQ(p.post(IBV_WR_RDMA_WRITE_WITH_IMM, 1000 * i, 1000, 2000 * i, p.mr[1]->rkey, i, 7 + i), 0);
  }
  const std::vector<ibv_wc> sent = p.poll(0), received = p.poll(1);
  ASSERT_EQ(sent.size(), 3u);
  ASSERT_EQ(received.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(sent[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(sent[i].wr_id, static_cast<uint64_t>(i));
    EXPECT_EQ(received[i].status, IBV_WC_SUCCESS);
    EXPECT_EQ(received[i].wr_id, static_cast<uint64_t>(100 + i)) << "receives are consumed in order";
    EXPECT_EQ(received[i].opcode, IBV_WC_RECV_RDMA_WITH_IMM);
    EXPECT_TRUE(received[i].wc_flags & IBV_WC_WITH_IMM);
    EXPECT_EQ(be32toh(received[i].imm_data), static_cast<uint32_t>(7 + i));
    EXPECT_EQ(received[i].byte_len, 1000u);
    EXPECT_EQ(p.buf[1][2000 * i], 'a' + i);
    EXPECT_EQ(p.buf[1][2000 * i + 999], 'a' + i);
  }
  EXPECT_EQ(p.buf[1][1000], 0) << "nothing written past the message";
}

TEST(IbEmulation, SendLandsInThePostedReceiveBuffer) {
  Pair p;
  ASSERT_EQ(p.postRecv(1, 5, 100), 0);
  std::memcpy(p.buf[0].data(), "hello", 5);
  ASSERT_EQ(p.post(IBV_WR_SEND, 0, 5, 0, 0, 1), 0);
  const std::vector<ibv_wc> received = p.poll(1);
  ASSERT_EQ(received.size(), 1u);
  EXPECT_EQ(received[0].opcode, IBV_WC_RECV);
  EXPECT_EQ(received[0].byte_len, 5u);
  EXPECT_EQ(std::string(p.buf[1].data(), 5), "hello");
}

TEST(IbEmulation, BadRemoteKeyOrRangeFailsBothQpsAndFlushes) {
  for (int variant = 0; variant < 2; ++variant) {
    Pair p;
    ASSERT_EQ(p.postRecv(1, 77), 0);
    const uint32_t rkey = variant == 0 ? p.mr[1]->rkey + 1000 : p.mr[1]->rkey;
    const uint64_t to = variant == 0 ? 0 : 65536 - 4;  // variant 1: 8 bytes, 4 past the end
    ASSERT_EQ(p.post(IBV_WR_RDMA_WRITE, 0, 8, to, rkey, 9), 0);
    const std::vector<ibv_wc> sent = p.poll(0);
    ASSERT_EQ(sent.size(), 1u);
    EXPECT_EQ(sent[0].status, IBV_WC_REM_ACCESS_ERR) << "variant " << variant;
    EXPECT_EQ(p.qp[0]->state, IBV_QPS_ERR);
    EXPECT_EQ(p.qp[1]->state, IBV_QPS_ERR);
    const std::vector<ibv_wc> flushed = p.poll(1);
    ASSERT_EQ(flushed.size(), 1u);
    EXPECT_EQ(flushed[0].status, IBV_WC_WR_FLUSH_ERR);
    EXPECT_EQ(flushed[0].wr_id, 77u);
    ASSERT_EQ(p.post(IBV_WR_RDMA_WRITE, 0, 8, 0, p.mr[1]->rkey, 10), 0);
    const std::vector<ibv_wc> later = p.poll(0);
    ASSERT_EQ(later.size(), 1u);
    EXPECT_EQ(later[0].status, IBV_WC_WR_FLUSH_ERR) << "a QP in ERR flushes what is posted later";
  }
}

TEST(IbEmulation, BadLocalKeyIsALocalProtectionError) {
  Pair p;
  ibv_sge sge{reinterpret_cast<uintptr_t>(p.buf[0].data()), 16, p.mr[0]->lkey + 1};
  ibv_send_wr wr{};
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(p.buf[1].data());
  wr.wr.rdma.rkey = p.mr[1]->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(p.v.postSend(p.qp[0], &wr, &bad), 0);
  const std::vector<ibv_wc> sent = p.poll(0);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_LOC_PROT_ERR);
}

TEST(IbEmulation, UnreachablePeerFailsWithRetryExceededAfterTheBound) {
  const uint8_t timeout = 12, retry = 2;
  const int64_t boundNs = 4096ll * (1 << timeout) * (retry + 1);  // ~50 ms
  Pair p(timeout, retry);
  emu::makeUnreachable(p.qp[1]->qp_num);
  const int64_t start = nowNs();
  ASSERT_EQ(p.post(IBV_WR_RDMA_WRITE, 0, 8, 0, p.mr[1]->rkey, 1), 0);
  ASSERT_EQ(p.post(IBV_WR_RDMA_WRITE, 0, 8, 8, p.mr[1]->rkey, 2), 0);
  std::vector<ibv_wc> got;
  while (got.empty() && nowNs() - start < 10 * boundNs) {
    got = p.poll(0);
    if (got.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const int64_t elapsed = nowNs() - start;
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].status, IBV_WC_RETRY_EXC_ERR);
  EXPECT_EQ(got[0].wr_id, 1u);
  EXPECT_EQ(got[1].status, IBV_WC_WR_FLUSH_ERR) << "requests behind the failed one flush";
  EXPECT_GE(elapsed, boundNs) << "failed before the retries were spent";
  EXPECT_LT(elapsed, 10 * boundNs);
  EXPECT_EQ(p.buf[1][0], 0) << "nothing reached the unreachable side";
}

TEST(IbEmulation, ForcedErrorFlushesPostedReceives) {
  Pair p;
  ASSERT_EQ(p.postRecv(1, 1), 0);
  ASSERT_EQ(p.postRecv(1, 2), 0);
  emu::forceError(p.qp[1]);
  const std::vector<ibv_wc> flushed = p.poll(1);
  ASSERT_EQ(flushed.size(), 2u);
  EXPECT_EQ(flushed[0].status, IBV_WC_WR_FLUSH_ERR);
  EXPECT_EQ(flushed[1].wr_id, 2u);
}

TEST(IbEmulation, WriteWithImmWithoutAReceiveIsCaught) {
  Pair p;
  ASSERT_EQ(p.post(IBV_WR_RDMA_WRITE_WITH_IMM, 0, 8, 0, p.mr[1]->rkey, 3), 0);
  const std::vector<ibv_wc> sent = p.poll(0);
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].status, IBV_WC_RNR_RETRY_EXC_ERR);
}

// ---- RDMA READ and dma-buf regions (GPUDirect RDMA's verbs) ----------------------

TEST(IbEmulation, ReadCopiesTheRemoteBytesIntoTheLocalList) {
  Pair p(14, 7, /*remoteRead=*/true);
  for (size_t i = 0; i < p.buf[1].size(); ++i) p.buf[1][i] = static_cast<char>(i * 7 + 1);
  const int64_t readsBefore = emu::counters().reads;
  ASSERT_EQ(p.post(IBV_WR_RDMA_READ, 0, 100, 8, p.mr[1]->rkey, 5), 0);
  const std::vector<ibv_wc> done = p.poll(0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(done[0].opcode, IBV_WC_RDMA_READ);
  EXPECT_EQ(done[0].wr_id, 5u);
  EXPECT_EQ(std::memcmp(p.buf[0].data(), p.buf[1].data() + 8, 100), 0);
  EXPECT_EQ(emu::counters().reads, readsBefore + 1);
  EXPECT_TRUE(p.poll(1).empty()) << "a READ consumes no receive and completes nothing at the responder";
}

TEST(IbEmulation, ReadWithoutRemoteReadAccessFails) {
  Pair p;  // QPs and regions allow remote writes only
  ASSERT_EQ(p.post(IBV_WR_RDMA_READ, 0, 16, 0, p.mr[1]->rkey, 6), 0);
  const std::vector<ibv_wc> done = p.poll(0);
  ASSERT_FALSE(done.empty());
  EXPECT_EQ(done[0].status, IBV_WC_REM_ACCESS_ERR);
}

// A memfd stands for the dma-buf; the iova names a decoy buffer: the bytes
// must land in the fd's memory (seen through the test's own mapping), never
// at the iova.
TEST(IbEmulation, DmaBufRegionIsTheFdsBytesNotTheIovas) {
  Pair p;
  const int fd = memfd_create("weft-dmabuf", 0);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(ftruncate(fd, 8192), 0);
  auto* view = static_cast<char*>(mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
  ASSERT_NE(view, MAP_FAILED);
  std::vector<char> decoy(256, 0);
  const int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  const int64_t before = emu::counters().dmaBufRegistrations;
  ibv_mr* mr = p.v.regDmabufMr(p.pd[1], 4096 + 16, decoy.size(), reinterpret_cast<uintptr_t>(decoy.data()), fd, access);
  ASSERT_NE(mr, nullptr) << std::strerror(errno);
  EXPECT_EQ(emu::counters().dmaBufRegistrations, before + 1);
  for (int i = 0; i < 64; ++i) p.buf[0][static_cast<size_t>(i)] = static_cast<char>(0x40 + i);
  ibv_sge sge{reinterpret_cast<uintptr_t>(p.buf[0].data()), 64, p.mr[0]->lkey};
  ibv_send_wr wr{};
  wr.wr_id = 9;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(decoy.data()) + 32;
  wr.wr.rdma.rkey = mr->rkey;
  ibv_send_wr* bad = nullptr;
  ASSERT_EQ(p.v.postSend(p.qp[0], &wr, &bad), 0);
  const std::vector<ibv_wc> done = p.poll(0);
  ASSERT_EQ(done.size(), 1u);
  EXPECT_EQ(done[0].status, IBV_WC_SUCCESS);
  EXPECT_EQ(std::memcmp(view + 4096 + 16 + 32, p.buf[0].data(), 64), 0) << "the bytes are not in the dma-buf";
  EXPECT_EQ(std::count(decoy.begin(), decoy.end(), 0), 256) << "the iova was written as if it were an address";
  EXPECT_EQ(p.v.deregMr(mr), 0);
  munmap(view, 8192);
  close(fd);
}

TEST(IbEmulation, DmaBufRegistrationRefusals) {
  const Verbs& v = emulated();
  Pair p;
  errno = 0;
  EXPECT_EQ(v.regDmabufMr(p.pd[0], 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EBADF) << "fd -1 is no dma-buf";
  emu::setDmaBufSupport(emu::DmaBufSupport::kKernelRefuses);
  errno = 0;
  EXPECT_EQ(v.regDmabufMr(p.pd[0], 0, 4096, 0, -1, IBV_ACCESS_LOCAL_WRITE), nullptr);
  EXPECT_EQ(errno, EOPNOTSUPP) << "a kernel without dma-buf regions refuses before looking at the fd";
  emu::setDmaBufSupport(emu::DmaBufSupport::kVerbAbsent);
  EXPECT_EQ(v.regDmabufMr, nullptr) << "an rdma-core before v34 has no such verb";
  emu::setDmaBufSupport(emu::DmaBufSupport::kSupported);
  EXPECT_NE(v.regDmabufMr, nullptr);
}

// ---- the real library ---------------------------------------------------------

// libibverbs through dlopen: every verb resolved when the library is there
// (the machine may have no RDMA device: listing them must still work), a
// reason naming it when not.
TEST(IbSystemVerbs, LoadsEveryVerbOrSaysWhy) {
  std::string why;
  const Verbs* v = loadSystemVerbs(&why);
  if (v == nullptr) {
    EXPECT_NE(why.find("libibverbs.so.1"), std::string::npos) << why;
    GTEST_SKIP() << "no libibverbs here: " << why;
  }
  EXPECT_STREQ(v->source, "libibverbs.so.1");
  const void* verbsUsed[] = {
      reinterpret_cast<const void*>(v->getDeviceList), reinterpret_cast<const void*>(v->openDevice),
      reinterpret_cast<const void*>(v->queryPort),     reinterpret_cast<const void*>(v->regMr),
      reinterpret_cast<const void*>(v->createQp),      reinterpret_cast<const void*>(v->modifyQp),
      reinterpret_cast<const void*>(v->postSend),      reinterpret_cast<const void*>(v->pollCq),
      reinterpret_cast<const void*>(v->wcStatusStr)};
  for (const void* fn : verbsUsed) EXPECT_NE(fn, nullptr);
  EXPECT_STREQ(v->wcStatusStr(IBV_WC_SUCCESS), "success");
  int count = -1;
  ibv_device** list = v->getDeviceList(&count);
  EXPECT_GE(count, 0);
  if (list) v->freeDeviceList(list);
}

}  // namespace
}  // namespace weft::testing
