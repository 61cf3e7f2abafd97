// The IB network through its plugin table, on the verbs emulation
// (WEFT_IB_EMULATE=2: devices emu0 and emu1): set-up, messages of every
// interesting size byte for byte over 1 to 4 QPs, the sender waiting for an
// offered buffer, requests in flight, the registration cache, and failures:
// an oversized message, a peer that exits, a peer that vanishes (retry
// error after the NCCL_IB_TIMEOUT/RETRY_CNT bound). GPUDirect RDMA: ib_gdr_test.cc.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "ib_pair.h"
#include "net_test_util.h"
#include "transport/net/ib/ib_comm.h"
#include "transport/net/ib/ib_connect.h"
#include "transport/net/ib/ib_emulation.h"
#include "transport/net/ib/ib_net.h"

namespace weft::testing {
namespace {

TEST(IbNet, FindsTheEmulatedDevicesAndDescribesThem) {
  const weftNet_v8_t& api = ibApi();
  EXPECT_STREQ(api.name, "IB");
  int ndev = 0;
  ASSERT_EQ(api.devices(&ndev), ncclSuccess);
  EXPECT_EQ(ndev, 2);
  weftNetProperties_v8_t props{};
  ASSERT_EQ(api.getProperties(1, &props), ncclSuccess);
  EXPECT_STREQ(props.name, "emu1");
  EXPECT_EQ(props.port, 1);
  EXPECT_EQ(props.speed, 100000) << "EDR x 4 lanes";
  EXPECT_EQ(props.ptrSupport, kNetPtrHost);
  EXPECT_EQ(props.regIsGlobal, 1);
  EXPECT_EQ(props.maxRecvs, 1);
  EXPECT_EQ(props.netDeviceType, WEFT_NET_DEVICE_HOST);
  EXPECT_EQ(api.getProperties(2, &props), ncclInvalidArgument);
  EXPECT_TRUE(contains(ibNetLastError(), "no network device 2")) << ibNetLastError();
}

class IbNetQps : public ::testing::TestWithParam<int> {};

TEST_P(IbNetQps, MessagesOfEverySizeArriveWhole) {
  ScopedEnv qps("NCCL_IB_QPS_PER_CONNECTION", std::to_string(GetParam()).c_str());
  IbPair p;
  p.connect();
  const int sizes[] = {0, 1, 127, 128, 129, 4095, 65536, (1 << 20) + 3};
  uint64_t message = 0;
  for (int bytes : sizes) {
    SCOPED_TRACE(::testing::Message() << bytes << " bytes over " << GetParam() << " QPs");
    const std::vector<uint8_t> pattern = patternMessage(++message, bytes);
    std::copy(pattern.begin(), pattern.end(), p.sendBuf.begin());
    std::fill(p.recvBuf.begin(), p.recvBuf.end(), 0xee);
    void* r = p.postRecv(static_cast<int>(p.recvBuf.size()) - 64);
    ASSERT_NE(r, nullptr);
    void* s = p.postSend(bytes);
    ASSERT_NE(s, nullptr) << "the receive was offered: the send must go";
    int sent = -1, received = -1;
    ASSERT_EQ(p.wait(s, &sent), ncclSuccess) << ibNetLastError();
    ASSERT_EQ(p.wait(r, &received), ncclSuccess) << ibNetLastError();
    EXPECT_EQ(sent, bytes);
    EXPECT_EQ(received, bytes);
    EXPECT_EQ(firstMismatch(p.recvBuf.data(), message, bytes), -1);
    EXPECT_EQ(p.recvBuf[static_cast<size_t>(bytes)], 0xee) << "a byte written past the message";
  }
}

INSTANTIATE_TEST_SUITE_P(IbNet, IbNetQps, ::testing::Values(1, 3, 4));

TEST(IbNet, SenderWaitsUntilTheReceiverOffersABuffer) {
  IbPair p;
  p.connect();
  EXPECT_EQ(p.postSend(100), nullptr) << "nothing offered yet: the send must report busy";
  void* r = p.postRecv(1000);
  void* s = p.postSend(100);
  ASSERT_NE(s, nullptr);
  int bytes = 0;
  EXPECT_EQ(p.wait(s, &bytes), ncclSuccess);
  EXPECT_EQ(p.wait(r, &bytes), ncclSuccess);
  EXPECT_EQ(bytes, 100);
}

TEST(IbNet, ThirtyTwoRequestsInFlightCompleteInOrder) {
  constexpr int kInFlight = kNetMaxRequests, kBytes = 4096;
  IbPair p(kInFlight * kBytes);
  p.connect();
  void* recvs[kInFlight];
  void* sends[kInFlight];
  for (int i = 0; i < kInFlight; ++i) {
    void* data = p.recvBuf.data() + i * kBytes;
    int capacity = kBytes, tag = 0;
    ASSERT_EQ(p.api.irecv(p.recv, 1, &data, &capacity, &tag, &p.recvMr, &recvs[i]), ncclSuccess);
    ASSERT_NE(recvs[i], nullptr) << i;
  }
  EXPECT_EQ(p.postRecv(kBytes), nullptr) << "a 33rd receive must report busy";
  for (int i = 0; i < kInFlight; ++i) {
    const std::vector<uint8_t> pattern = patternMessage(100 + i, kBytes);
    std::copy(pattern.begin(), pattern.end(), p.sendBuf.begin() + i * kBytes);
    sends[i] = p.postSend(kBytes - i, i * kBytes);
    ASSERT_NE(sends[i], nullptr) << i;
  }
  for (int i = 0; i < kInFlight; ++i) {
    int sent = 0, received = 0;
    ASSERT_EQ(p.wait(sends[i], &sent), ncclSuccess);
    ASSERT_EQ(p.wait(recvs[i], &received), ncclSuccess);
    EXPECT_EQ(received, kBytes - i);
    EXPECT_EQ(firstMismatch(p.recvBuf.data() + i * kBytes, 100 + i, kBytes - i), -1) << "message " << i;
  }
}

TEST(IbNet, RegisteringOneRangeTwiceRegistersItOnce) {
  IbPair p;
  p.connect();
  std::vector<char> buffer(1 << 16);
  const transport::ib::emu::Counters before = transport::ib::emu::counters();
  void* first = nullptr;
  void* second = nullptr;
  void* inside = nullptr;
  ASSERT_EQ(p.api.regMr(p.send, buffer.data(), buffer.size(), kNetPtrHost, &first), ncclSuccess);
  ASSERT_EQ(p.api.regMr(p.send, buffer.data(), buffer.size(), kNetPtrHost, &second), ncclSuccess);
  ASSERT_EQ(p.api.regMr(p.send, buffer.data() + 100, 1000, kNetPtrHost, &inside), ncclSuccess);
  const transport::ib::emu::Counters after = transport::ib::emu::counters();
  EXPECT_EQ(after.memoryRegistrations - before.memoryRegistrations, 1);
  EXPECT_EQ(portEntry(first), portEntry(second));
  EXPECT_EQ(portEntry(first), portEntry(inside)) << "a range inside a registration reuses it";
  for (void* mr : {first, second, inside}) EXPECT_EQ(p.api.deregMr(p.send, mr), ncclSuccess);
  EXPECT_EQ(transport::ib::emu::counters().liveRegions, before.liveRegions) << "the last deregistration releases it";
}

TEST(IbNet, AMessageLargerThanTheOfferedBufferIsAnError) {
  IbPair p;
  p.connect();
  ASSERT_NE(p.postRecv(100), nullptr);
  void* request = nullptr;
  EXPECT_EQ(p.api.isend(p.send, p.sendBuf.data(), 200, 0, p.sendMr, &request), ncclInternalError);
  EXPECT_TRUE(contains(ibNetLastError(), "200 bytes")) << ibNetLastError();
  EXPECT_TRUE(contains(ibNetLastError(), "100-byte")) << ibNetLastError();
}

TEST(IbNet, ReceiverSeesAPeerThatExitedAtOnce) {
  IbPair p;
  p.connect();
  void* r = p.postRecv(1000);
  ASSERT_NE(r, nullptr);
  ASSERT_EQ(p.api.deregMr(p.send, p.sendMr), ncclSuccess);
  p.sendMr = nullptr;
  ASSERT_EQ(p.api.closeSend(p.send), ncclSuccess);  // as its process exiting would
  p.send = nullptr;
  const int64_t start = nowNs();
  int bytes = 0;
  EXPECT_EQ(p.wait(r, &bytes, 5), ncclRemoteError);
  EXPECT_LT(nowNs() - start, 2000000000ll);
  const std::string why = ibNetLastError();
  EXPECT_TRUE(contains(why, "closed it")) << why;
  EXPECT_TRUE(contains(why, "emu1:1")) << why;
}

TEST(IbNet, VanishedPeerFailsTheSendAfterTheRetryBound) {
  ScopedEnv timeout("NCCL_IB_TIMEOUT", "12");
  ScopedEnv retries("NCCL_IB_RETRY_CNT", "2");
  const int64_t boundNs = 4096ll * (1 << 12) * 3;  // ~50 ms
  IbPair p;
  p.connect();
  ASSERT_NE(p.postRecv(1000), nullptr);
  for (uint32_t qpn : static_cast<transport::ib::IbComm*>(p.recv)->qpNumbers())
    transport::ib::emu::makeUnreachable(qpn);  // its host lost power: nothing answers, nothing closes
  const int64_t start = nowNs();
  void* s = p.postSend(100);
  ASSERT_NE(s, nullptr);
  int bytes = 0;
  EXPECT_EQ(p.wait(s, &bytes, 5), ncclRemoteError);
  const int64_t elapsed = nowNs() - start;
  EXPECT_GE(elapsed, boundNs);
  EXPECT_LT(elapsed, 2000000000ll);
  const std::string why = ibNetLastError();
  const uint32_t qpn = static_cast<transport::ib::IbComm*>(p.send)->qpNumbers()[0];
  EXPECT_TRUE(contains(why, "transport retry counter exceeded")) << why;
  EXPECT_TRUE(contains(why, "QP " + std::to_string(qpn))) << why;
  EXPECT_TRUE(contains(why, "emu0:1")) << why;
  EXPECT_TRUE(contains(why, "NCCL_IB_TIMEOUT=12")) << why;
  EXPECT_TRUE(contains(why, "sending to ")) << why;
}

// A connection to the set-up address that does not present the handle's
// cookie is dropped, and the real sender still connects.
TEST(IbNet, StrangerAtTheListenAddressIsDropped) {
  const weftNet_v8_t& api = ibApi();
  char handle[kNetHandleBytes] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(api.listen(0, handle, &listenComm), ncclSuccess) << ibNetLastError();
  Result<Socket> stranger = Socket::connect(transport::ib::handleAddress(handle), Deadline::afterSec(5));
  ASSERT_TRUE(stranger.ok()) << stranger.status().message();
  const std::vector<char> junk(sizeof(transport::ib::QpInfo), 0x5a);
  ASSERT_TRUE(stranger.value().sendAll(junk.data(), junk.size(), Deadline::afterSec(5)).ok());
  void* send = nullptr;
  void* recv = nullptr;
  weftNetDeviceHandle_v8_t* dev = nullptr;
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the junk is in the receive buffer
  for (int i = 0; i < 100 && recv == nullptr; ++i) {
    ASSERT_EQ(api.accept(listenComm, &recv, &dev), ncclSuccess) << ibNetLastError();
  }
  EXPECT_EQ(recv, nullptr) << "the stranger's connection became a comm";
  const Deadline deadline = Deadline::afterSec(10);
  while ((send == nullptr || recv == nullptr) && !deadline.expired()) {
    if (!send) {
      ASSERT_EQ(api.connect(1, handle, &send, &dev), ncclSuccess) << ibNetLastError();
    }
    if (!recv) {
      ASSERT_EQ(api.accept(listenComm, &recv, &dev), ncclSuccess) << ibNetLastError();
    }
  }
  EXPECT_TRUE(send && recv) << "the real connection did not complete after the stranger";
  EXPECT_EQ(api.closeListen(listenComm), ncclSuccess);
  if (send) {
    EXPECT_EQ(api.closeSend(send), ncclSuccess);
  }
  if (recv) {
    EXPECT_EQ(api.closeRecv(recv), ncclSuccess);
  }
}

}  // namespace
}  // namespace weft::testing
