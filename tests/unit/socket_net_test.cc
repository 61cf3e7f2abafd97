// The socket network through its plugin table: how messages are split over
// data sockets, messages of every interesting size in order and byte for
// byte under several thread/socket settings, many messages in flight, the
// "busy" contract, oversized messages, and strangers at the listen address.
// Both ends run in the test's thread: the API never blocks.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ostream>
#include <thread>

#include "net_test_util.h"
#include "transport/net/socket_comm.h"

namespace weft::testing {
namespace {

using transport::socketNetLastError;
using transport::socknet::kMinPieceBytes;
using transport::socknet::pieceLayout;
using transport::socknet::PieceLayout;

constexpr int64_t kKiB = 1024;
constexpr int64_t kMiB = 1024 * kKiB;

// ---- pieceLayout ------------------------------------------------------------

TEST(PieceLayout, PiecesCoverTheMessageAtLeastMinimumSizeOnAtMostEverySocket) {
  const int64_t sizes[] = {1,
                           4095,
                           kMinPieceBytes - 1,
                           kMinPieceBytes,
                           kMinPieceBytes + 1,
                           2 * kMinPieceBytes - 1,
                           2 * kMinPieceBytes,
                           3 * kMinPieceBytes + 5,
                           kMiB + 3,
                           8 * kMiB,
                           64 * kMiB + 63,
                           1LL << 31};
  for (int nSockets = 1; nSockets <= transport::socknet::kMaxDataSockets; ++nSockets) {
    for (int64_t bytes : sizes) {
      const PieceLayout layout = pieceLayout(bytes, nSockets, 0);
      SCOPED_TRACE(::testing::Message() << bytes << " bytes over " << nSockets << " sockets");
      ASSERT_GE(layout.count, 1);
      EXPECT_LE(layout.count, nSockets);
      int64_t covered = 0;
      std::vector<bool> socketUsed(static_cast<size_t>(nSockets));
      for (int i = 0; i < layout.count; ++i) {
        const transport::socknet::Piece piece = pieceAt(layout, bytes, nSockets, i);
        ASSERT_TRUE(piece.socket >= 0 && piece.socket < nSockets) << "piece " << i;
        EXPECT_FALSE(socketUsed[static_cast<size_t>(piece.socket)]) << "two pieces on socket " << piece.socket;
        socketUsed[static_cast<size_t>(piece.socket)] = true;
        EXPECT_EQ(piece.offset, covered) << "piece " << i << " leaves a gap or overlaps";
        EXPECT_GT(piece.bytes, 0) << "piece " << i;
        if (bytes >= kMinPieceBytes) {
          EXPECT_GE(piece.bytes, kMinPieceBytes) << "piece " << i;
        }
        covered = piece.offset + piece.bytes;
      }
      EXPECT_EQ(covered, bytes);
      if (bytes < kMinPieceBytes) {
        EXPECT_EQ(layout.count, 1);
      }
      // Large messages use every socket.
      if (bytes >= nSockets * kMinPieceBytes) {
        EXPECT_EQ(layout.count, nSockets);
      }
    }
  }
}

TEST(PieceLayout, FirstSocketRotatesWithTheSequence) {
  for (int nSockets = 1; nSockets <= 16; ++nSockets) {
    for (uint64_t sequence = 0; sequence < 40; ++sequence) {
      const PieceLayout layout = pieceLayout(8 * kMiB, nSockets, sequence);
      EXPECT_EQ(layout.first, static_cast<int>(sequence % static_cast<uint64_t>(nSockets)));
      if (nSockets > 1) {
        EXPECT_NE(layout.first, pieceLayout(8 * kMiB, nSockets, sequence + 1).first);
      }
    }
  }
}

TEST(PieceLayout, NothingToSplit) {
  EXPECT_EQ(pieceLayout(0, 4, 3).count, 0);
  EXPECT_EQ(pieceLayout(-5, 4, 3).count, 0);
  EXPECT_EQ(pieceLayout(kMiB, 0, 3).count, 0);
}

// ---- transfers ----------------------------------------------------------------

// Moves messages of `sizes` from pair.send to pair.recv with up to `window`
// posted on each side before the oldest is tested. Receive i is posted with
// room for sizes[i] + extra[i % n] bytes and guarded by canary bytes.
void transfer(CommPair& pair, const std::vector<int64_t>& sizes, int window, uint64_t firstMessage = 0) {
  const weftNet_v8_t& api = *pair.api;
  constexpr int64_t kCanary = 64;
  constexpr int64_t kExtra[] = {0, 4096, 1};
  const size_t n = sizes.size();
  std::vector<std::vector<uint8_t>> out(n), in(n);
  std::vector<void*> sendReq(n), recvReq(n);
  size_t sendsPosted = 0, sendsDone = 0, recvsPosted = 0, recvsDone = 0;
  auto capacity = [&](size_t m) { return sizes[m] + kExtra[m % 3]; };
  const Deadline deadline = Deadline::afterSec(30);
  while (sendsDone < n || recvsDone < n) {
    ASSERT_FALSE(deadline.expired()) << "sends done " << sendsDone << ", receives done " << recvsDone << " of " << n;
    for (; sendsPosted < n && sendsPosted - sendsDone < static_cast<size_t>(window); ++sendsPosted) {
      const size_t m = sendsPosted;
      if (out[m].empty()) out[m] = patternMessage(firstMessage + m, sizes[m]);
      ASSERT_EQ(api.isend(pair.send, out[m].data(), static_cast<int>(sizes[m]), 0, pair.sendMr, &sendReq[m]),
                ncclSuccess);
      if (sendReq[m] == nullptr) break;  // busy: retry later
    }
    for (; recvsPosted < n && recvsPosted - recvsDone < static_cast<size_t>(window); ++recvsPosted) {
      const size_t m = recvsPosted;
      if (in[m].empty()) in[m].assign(static_cast<size_t>(capacity(m) + kCanary), 0xA5);
      void* data = in[m].data();
      int bytes = static_cast<int>(capacity(m));
      int tag = 0;
      ASSERT_EQ(api.irecv(pair.recv, 1, &data, &bytes, &tag, &pair.recvMr, &recvReq[m]), ncclSuccess);
      if (recvReq[m] == nullptr) break;
    }
    int done = 0, size = -1;
    if (sendsDone < sendsPosted) {
      ASSERT_EQ(api.test(sendReq[sendsDone], &done, &size), ncclSuccess) << socketNetLastError();
      if (done) {
        EXPECT_EQ(size, sizes[sendsDone]) << "send " << sendsDone;
        out[sendsDone++] = {};  // the network is done with it
      }
    }
    if (recvsDone < recvsPosted) {
      size = -1;
      ASSERT_EQ(api.test(recvReq[recvsDone], &done, &size), ncclSuccess) << socketNetLastError();
      if (done) {
        const size_t m = recvsDone++;
        EXPECT_EQ(size, sizes[m]) << "receive " << m << " posted for " << capacity(m) << " bytes";
        EXPECT_EQ(firstMismatch(in[m].data(), firstMessage + m, sizes[m]), -1) << "message " << m;
        for (int64_t i = sizes[m]; i < capacity(m) + kCanary; ++i)
          ASSERT_EQ(in[m][static_cast<size_t>(i)], 0xA5) << "message " << m << " wrote past its end at " << i;
        in[m] = {};
      }
    }
  }
}

const std::vector<int64_t>& interestingSizes() {
  static const std::vector<int64_t> sizes = {0,        1,        4095, 64 * kKiB - 1, 64 * kKiB, 64 * kKiB + 1,
                                             kMiB + 3, 8 * kMiB, 1,    64 * kKiB + 1, kMiB + 3,  0};
  return sizes;
}

struct SocketSetting {
  const char* threads;  // NCCL_SOCKET_NTHREADS, or null: unset
  const char* perThread;
  int dataSockets;  // what the setting should give; -1: the default for this machine
};

int expectedDataSockets(const SocketSetting& setting) {
  return setting.dataSockets >= 0 ? setting.dataSockets
                                  : transport::socketDefaultThreads(std::thread::hardware_concurrency());
}

// Short, readable parameter text in test names and failures.
void PrintTo(const SocketSetting& setting, std::ostream* os) {
  *os << "NTHREADS=" << (setting.threads ? setting.threads : "unset")
      << " PERTHREAD=" << (setting.perThread ? setting.perThread : "unset");
}

std::string settingName(const ::testing::TestParamInfo<SocketSetting>& setting) {
  if (setting.param.dataSockets < 0) return "DefaultDataSockets";
  return std::to_string(setting.param.dataSockets) + "DataSockets";
}

class SocketTransfer : public ::testing::TestWithParam<SocketSetting> {
 protected:
  void SetUp() override {
    ScopedEnv threads("NCCL_SOCKET_NTHREADS", GetParam().threads);
    ScopedEnv perThread("NCCL_NSOCKS_PERTHREAD", GetParam().perThread);
    loopbackNet();  // its own descriptors are not the pair's
    const int before = openFdCount();
    ASSERT_NO_FATAL_FAILURE(connectPair(&pair_));
    // Each end holds a control socket and the data sockets.
    EXPECT_EQ(openFdCount() - before, 2 * (1 + expectedDataSockets(GetParam())));
  }
  CommPair pair_;
};

TEST_P(SocketTransfer, EverySizeArrivesInOrderByteForByte) {
  ASSERT_NO_FATAL_FAILURE(transfer(pair_, interestingSizes(), 8));
  // The same comm keeps working: a second round continues the sequence.
  ASSERT_NO_FATAL_FAILURE(transfer(pair_, interestingSizes(), 3, 1000));
}

TEST_P(SocketTransfer, OneMessageAtATime) { ASSERT_NO_FATAL_FAILURE(transfer(pair_, interestingSizes(), 1)); }

TEST_P(SocketTransfer, ManyLargeMessagesInFlight) {
  // 8 x 8 MiB posted at once: far beyond the socket buffers, so every send
  // and receive is cut into partial writes and reads.
  ASSERT_NO_FATAL_FAILURE(transfer(pair_, std::vector<int64_t>(16, 8 * kMiB + 1), 8));
}

INSTANTIATE_TEST_SUITE_P(Settings, SocketTransfer,
                         ::testing::Values(SocketSetting{"0", "1", 0}, SocketSetting{"1", "1", 1},
                                           SocketSetting{nullptr, nullptr, -1}, SocketSetting{"2", nullptr, 2},
                                           SocketSetting{"3", "2", 6}, SocketSetting{"4", "4", 16}),
                         settingName);

TEST(SocketNet, HelperThreadsByDefaultOnlyWhereThereAreCoresForThem) {
  EXPECT_EQ(transport::socketDefaultThreads(1), 0);
  EXPECT_EQ(transport::socketDefaultThreads(2), 0);
  EXPECT_EQ(transport::socketDefaultThreads(7), 0);
  EXPECT_EQ(transport::socketDefaultThreads(8), 2);
  EXPECT_EQ(transport::socketDefaultThreads(15), 2);
  EXPECT_EQ(transport::socketDefaultThreads(16), 4);
  EXPECT_EQ(transport::socketDefaultThreads(128), 4);
}

// ---- the busy contract -----------------------------------------------------------

TEST(SocketNet, MoreThanMaxRequestsInFlightIsBusyNotACrash) {
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", "2");
  CommPair pair;
  ASSERT_NO_FATAL_FAILURE(connectPair(&pair));
  const weftNet_v8_t& api = *pair.api;
  const int64_t bytes = 100 * kKiB;  // over the data sockets
  std::vector<std::vector<uint8_t>> out, in;
  std::vector<void*> sends, recvs;
  for (int m = 0; m < kNetMaxRequests; ++m) {
    out.push_back(patternMessage(static_cast<uint64_t>(m), bytes));
    in.emplace_back(static_cast<size_t>(bytes));
    void* request = nullptr;
    ASSERT_EQ(api.isend(pair.send, out.back().data(), static_cast<int>(bytes), 0, pair.sendMr, &request), ncclSuccess);
    ASSERT_NE(request, nullptr) << "send " << m;
    sends.push_back(request);
    void* data = in.back().data();
    int size = static_cast<int>(bytes), tag = 0;
    ASSERT_EQ(api.irecv(pair.recv, 1, &data, &size, &tag, &pair.recvMr, &request), ncclSuccess);
    ASSERT_NE(request, nullptr) << "receive " << m;
    recvs.push_back(request);
  }
  uint8_t spare[16];
  void* request = &spare;
  EXPECT_EQ(api.isend(pair.send, spare, sizeof(spare), 0, pair.sendMr, &request), ncclSuccess);
  EXPECT_EQ(request, nullptr) << "a send beyond kNetMaxRequests";
  request = &spare;
  void* data = spare;
  int size = sizeof(spare), tag = 0;
  EXPECT_EQ(api.irecv(pair.recv, 1, &data, &size, &tag, &pair.recvMr, &request), ncclSuccess);
  EXPECT_EQ(request, nullptr) << "a receive beyond kNetMaxRequests";
  // Everything posted still arrives; then there is room again.
  const Deadline deadline = Deadline::afterSec(20);
  for (size_t s = 0, r = 0; s < sends.size() || r < recvs.size();) {
    ASSERT_FALSE(deadline.expired());
    int done = 0;
    if (s < sends.size()) {
      ASSERT_EQ(api.test(sends[s], &done, &size), ncclSuccess) << socketNetLastError();
      s += done;
    }
    if (r < recvs.size()) {
      ASSERT_EQ(api.test(recvs[r], &done, &size), ncclSuccess) << socketNetLastError();
      if (done) {
        EXPECT_EQ(firstMismatch(in[r].data(), r, bytes), -1) << "message " << r;
      }
      r += done;
    }
  }
  ASSERT_NO_FATAL_FAILURE(transfer(pair, {5, 200 * kKiB}, 2, 77));
}

// ---- a message larger than its receive ----------------------------------------------

class Oversized : public ::testing::TestWithParam<int64_t> {};

TEST_P(Oversized, IsAnErrorOnTheReceiverNotACrash) {
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", "2");
  const int64_t bytes = GetParam();
  // Before the comms, so the buffers outlive them: the failed receive
  // comm's helper threads may still be using them until it closes.
  std::vector<uint8_t> out = patternMessage(0, bytes), in(static_cast<size_t>(bytes / 2) + 64, 0xA5);
  CommPair pair;
  ASSERT_NO_FATAL_FAILURE(connectPair(&pair));
  const weftNet_v8_t& api = *pair.api;
  void* send = nullptr;
  void* recv = nullptr;
  ASSERT_EQ(api.isend(pair.send, out.data(), static_cast<int>(bytes), 0, pair.sendMr, &send), ncclSuccess);
  void* data = in.data();
  int capacity = static_cast<int>(bytes / 2), tag = 0;
  ASSERT_EQ(api.irecv(pair.recv, 1, &data, &capacity, &tag, &pair.recvMr, &recv), ncclSuccess);
  ncclResult_t rc = ncclSuccess;
  int done = 0, size = 0;
  const Deadline deadline = Deadline::afterSec(10);
  while (rc == ncclSuccess && !done && !deadline.expired()) {
    int sent = 0;
    ASSERT_EQ(api.test(send, &sent, &size), ncclSuccess);
    rc = api.test(recv, &done, &size);
  }
  EXPECT_NE(rc, ncclSuccess) << (done ? "the receive completed" : "no answer in 10 s");
  EXPECT_NE(socketNetLastError().find(std::to_string(bytes)), std::string::npos) << socketNetLastError();
  for (size_t i = static_cast<size_t>(capacity); i < in.size(); ++i)
    ASSERT_EQ(in[i], 0xA5) << "wrote past the receive at " << i;
}

INSTANTIATE_TEST_SUITE_P(Sizes, Oversized, ::testing::Values(int64_t{4096}, 8 * kMiB));

// ---- strangers at the listen address ----------------------------------------------------

// The address a listening socket of this process is bound to (the plugin's
// handle is opaque; a stranger would find the port by scanning).
SocketAddress listeningAddress() {
  SocketAddress found;
  for (int fd = 3; fd < 4096; ++fd) {
    int listening = 0;
    socklen_t len = sizeof(listening);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 || !listening) continue;
    len = sizeof(found.u);
    getsockname(fd, &found.u.sa, &len);
  }
  return found;
}

TEST(SocketNet, StrangersWithoutTheCookieAreDroppedAndThePeerStillConnects) {
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", "2");
  const weftNet_v8_t& api = loopbackNet();
  char handle[kNetHandleBytes] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(api.listen(0, handle, &listenComm), ncclSuccess);
  const SocketAddress address = listeningAddress();
  ASSERT_TRUE(address.valid());
  // A stranger who says hello as control socket 0 with the wrong cookie, one
  // who claims a data socket, and one who hangs up without a word.
  struct {
    uint64_t cookie;
    int32_t index;
    int32_t pad;
  } hellos[] = {{0x0123456789abcdefull, 0, 0}, {0, 1, 0}};
  std::vector<Socket> strangers;
  for (const auto& hello : hellos) {
    Result<Socket> s = Socket::connect(address, Deadline::afterSec(5));
    ASSERT_TRUE(s.ok()) << s.status().message();
    ASSERT_TRUE(s.value().sendAll(&hello, sizeof(hello), Deadline::afterSec(5)).ok());
    strangers.push_back(std::move(s).value());
  }
  ASSERT_TRUE(Socket::connect(address, Deadline::afterSec(5)).ok());  // closed at once

  CommPair pair;
  pair.api = &api;
  weftNetDeviceHandle_v8_t* devComm = nullptr;
  ASSERT_EQ(api.connect(0, handle, &pair.send, &devComm), ncclSuccess) << socketNetLastError();
  const Deadline deadline = Deadline::afterSec(10);
  while (pair.recv == nullptr && !deadline.expired())
    ASSERT_EQ(api.accept(listenComm, &pair.recv, &devComm), ncclSuccess) << socketNetLastError();
  EXPECT_EQ(api.closeListen(listenComm), ncclSuccess);
  ASSERT_NE(pair.recv, nullptr);
  ASSERT_EQ(api.regMr(pair.send, nullptr, 0, kNetPtrHost, &pair.sendMr), ncclSuccess);
  ASSERT_EQ(api.regMr(pair.recv, nullptr, 0, kNetPtrHost, &pair.recvMr), ncclSuccess);
  // Had a stranger taken the control or a data slot, this would fail or hang.
  ASSERT_NO_FATAL_FAILURE(transfer(pair, {3, kMiB + 3, 64 * kKiB, 8 * kMiB}, 4));
}

// accept never blocks (the plugin contract): a stranger who connects and
// says nothing, or half a hello, must not hold up the peer's connections.
TEST(SocketNet, SilentStrangersDoNotHoldUpAccept) {
  ScopedEnv threads("NCCL_SOCKET_NTHREADS", "2");
  const weftNet_v8_t& api = loopbackNet();
  char handle[kNetHandleBytes] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(api.listen(0, handle, &listenComm), ncclSuccess);
  const SocketAddress address = listeningAddress();
  ASSERT_TRUE(address.valid());
  Result<Socket> silent = Socket::connect(address, Deadline::afterSec(5));
  Result<Socket> halting = Socket::connect(address, Deadline::afterSec(5));
  ASSERT_TRUE(silent.ok() && halting.ok());
  const char halfHello[5] = {1, 2, 3, 4, 5};
  ASSERT_TRUE(halting.value().sendAll(halfHello, sizeof(halfHello), Deadline::afterSec(5)).ok());

  CommPair pair;
  pair.api = &api;
  weftNetDeviceHandle_v8_t* devComm = nullptr;
  ASSERT_EQ(api.connect(0, handle, &pair.send, &devComm), ncclSuccess) << socketNetLastError();
  const Deadline deadline = Deadline::afterSec(20);
  int64_t longestCallNs = 0;
  while (pair.recv == nullptr && !deadline.expired()) {
    const int64_t start = nowNs();
    ASSERT_EQ(api.accept(listenComm, &pair.recv, &devComm), ncclSuccess) << socketNetLastError();
    longestCallNs = std::max(longestCallNs, nowNs() - start);
  }
  EXPECT_EQ(api.closeListen(listenComm), ncclSuccess);
  ASSERT_NE(pair.recv, nullptr);
  EXPECT_LT(longestCallNs, 2000000000) << "an accept call blocked for " << longestCallNs / 1000000 << " ms";
  ASSERT_EQ(api.regMr(pair.send, nullptr, 0, kNetPtrHost, &pair.sendMr), ncclSuccess);
  ASSERT_EQ(api.regMr(pair.recv, nullptr, 0, kNetPtrHost, &pair.recvMr), ncclSuccess);
  ASSERT_NO_FATAL_FAILURE(transfer(pair, {3, kMiB + 3}, 2));
}

}  // namespace
}  // namespace weft::testing
