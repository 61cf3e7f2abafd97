// The IB network's test fixture, shared by its test files: the plugin table
// on the verbs emulation (WEFT_IB_EMULATE=2: devices emu0 and emu1, unless
// the file defines WEFT_IB_PAIR_EMULATE and WEFT_IB_PAIR_PCI first) and both
// ends of one connection with registered host buffers.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "common/clock.h"
#include "net_test_util.h"
#include "transport/net/ib/ib_device.h"
#include "transport/net/ib/ib_net.h"

namespace weft::testing {

using transport::ibNetLastError;

#ifndef WEFT_IB_PAIR_EMULATE
#define WEFT_IB_PAIR_EMULATE "2"
#endif
#ifndef WEFT_IB_PAIR_PCI
#define WEFT_IB_PAIR_PCI ""
#endif

// Before anything asks which verbs to use (decided once per process).
inline const bool kEmulated = [] {
  return setenv("WEFT_IB_EMULATE", WEFT_IB_PAIR_EMULATE, 1) == 0 &&
         setenv("WEFT_IB_EMULATE_PCI", WEFT_IB_PAIR_PCI, 1) == 0;
}();

// Port `port`'s cached registration behind an mhandle of the IB network.
inline transport::ib::MrEntry* portEntry(void* mhandle, int port = 0) {
  return static_cast<transport::ib::MrHandle*>(mhandle)->entries[port];
}

inline const weftNet_v8_t& ibApi() {
  static const bool ready = kEmulated && transport::ibNet().init(nullptr) == ncclSuccess;
  EXPECT_TRUE(ready) << ibNetLastError();
  return transport::ibNet();
}

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// Both ends of one connection, sender on network device `sendDev` (emu0 by
// default) and receiver on `recvDev` (emu1), with registered buffers; closed
// on destruction.
struct IbPair {
  const weftNet_v8_t& api = ibApi();
  void* send = nullptr;
  void* recv = nullptr;
  void* sendMr = nullptr;
  void* recvMr = nullptr;
  std::vector<uint8_t> sendBuf, recvBuf;

  int sendDev = 0, recvDev = 1;

  explicit IbPair(size_t bytes = 2 << 20) : sendBuf(bytes), recvBuf(bytes + 64) {}
  IbPair(int sender, int receiver, size_t bytes = 2 << 20)
      : sendBuf(bytes), recvBuf(bytes + 64), sendDev(sender), recvDev(receiver) {}
  ~IbPair() {
    if (sendMr) api.deregMr(send, sendMr);
    if (recvMr) api.deregMr(recv, recvMr);
    if (send) api.closeSend(send);
    if (recv) api.closeRecv(recv);
  }
  void connect() {
    char handle[kNetHandleBytes] = {};
    void* listenComm = nullptr;
    ASSERT_EQ(api.listen(recvDev, handle, &listenComm), ncclSuccess) << ibNetLastError();
    weftNetDeviceHandle_v8_t* dev = nullptr;
    const Deadline deadline = Deadline::afterSec(10);
    while ((send == nullptr || recv == nullptr) && !deadline.expired()) {
      if (!send) {
        ASSERT_EQ(api.connect(sendDev, handle, &send, &dev), ncclSuccess) << ibNetLastError();
      }
      if (!recv) {
        ASSERT_EQ(api.accept(listenComm, &recv, &dev), ncclSuccess) << ibNetLastError();
      }
    }
    EXPECT_EQ(api.closeListen(listenComm), ncclSuccess);
    ASSERT_TRUE(send && recv) << "set-up did not finish in 10 s";
    ASSERT_EQ(api.regMr(send, sendBuf.data(), sendBuf.size(), kNetPtrHost, &sendMr), ncclSuccess) << ibNetLastError();
    ASSERT_EQ(api.regMr(recv, recvBuf.data(), recvBuf.size(), kNetPtrHost, &recvMr), ncclSuccess) << ibNetLastError();
  }
  void* postRecv(int capacity) {
    void* data = recvBuf.data();
    void* request = nullptr;
    int tag = 0;
    EXPECT_EQ(api.irecv(recv, 1, &data, &capacity, &tag, &recvMr, &request), ncclSuccess) << ibNetLastError();
    return request;
  }
  void* postSend(int bytes, int offset = 0) {
    void* request = nullptr;
    EXPECT_EQ(api.isend(send, sendBuf.data() + offset, bytes, 0, sendMr, &request), ncclSuccess) << ibNetLastError();
    return request;
  }
  // Tests `request` until done (true, size in *bytes) or a failure (false).
  ncclResult_t wait(void* request, int* bytes, double seconds = 10) {
    const Deadline deadline = Deadline::afterMs(static_cast<int64_t>(seconds * 1000));
    int done = 0;
    while (!done && !deadline.expired()) {
      ncclResult_t rc = api.test(request, &done, bytes);
      if (rc != ncclSuccess) return rc;
    }
    return done ? ncclSuccess : ncclInProgress;
  }
};

}  // namespace weft::testing
