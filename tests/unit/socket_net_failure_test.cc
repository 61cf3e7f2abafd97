// The socket network when the other end goes away: a comm closed in this
// process, or a peer process that exits or is killed mid-transfer. The side
// left behind must see an error (ncclRemoteError or ncclSystemError) from
// `test` within a bounded time, with words in socketNetLastError().
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <optional>

#include "net_test_util.h"
#include "transport/net/socket_comm.h"

namespace weft::testing {
namespace {

using transport::socketNetLastError;

constexpr int64_t kMessageBytes = 4 * 1024 * 1024;
constexpr int kWindow = 8;
constexpr int kDeadlineSec = 10;

// One side of an endless stream of messages (all with message 0's pattern),
// kWindow in flight, progressed by pump(): what it did, and the error that
// ended it.
class Stream {
 public:
  Stream(const weftNet_v8_t& api, void* comm, void* mhandle, bool isSend, int64_t messageBytes = kMessageBytes)
      : api_(api),
        comm_(comm),
        mhandle_(mhandle),
        isSend_(isSend),
        bytes_(messageBytes),
        pattern_(patternMessage(0, messageBytes)) {
    if (!isSend_) buffers_.assign(kWindow, std::vector<uint8_t>(static_cast<size_t>(bytes_)));
  }

  // Posts what fits and tests the oldest request once; false once failed.
  bool pump() {
    while (inFlight_.size() < kWindow) {
      void* request = nullptr;
      ncclResult_t rc;
      if (isSend_) {
        rc = api_.isend(comm_, pattern_.data(), static_cast<int>(bytes_), 0, mhandle_, &request);
      } else {
        std::vector<uint8_t>& buffer = buffers_[posted_ % kWindow];
        std::fill(buffer.begin(), buffer.end(), 0);  // so a complete receive must have written it all
        void* data = buffer.data();
        int size = static_cast<int>(bytes_), tag = 0;
        rc = api_.irecv(comm_, 1, &data, &size, &tag, &mhandle_, &request);
      }
      if (rc != ncclSuccess) return finish(rc);
      if (request == nullptr) break;
      inFlight_.push_back(request);
      ++posted_;
    }
    int done = 0, size = 0;
    const ncclResult_t rc = api_.test(inFlight_.front(), &done, &size);
    if (rc != ncclSuccess) return finish(rc);
    if (done) {
      inFlight_.pop_front();
      EXPECT_EQ(size, bytes_);
      if (!isSend_) checkReceived(buffers_[completed_ % kWindow]);
      ++completed_;
    }
    return true;
  }

  // Pumps until the stream fails or kDeadlineSec pass; true when it failed.
  bool pumpUntilError() {
    const Deadline deadline = Deadline::afterSec(kDeadlineSec);
    while (!deadline.expired())
      if (!pump()) return true;
    return false;
  }

  ncclResult_t error() const { return error_; }
  int64_t completed() const { return completed_; }
  std::string lastError() const { return lastError_; }

 private:
  bool finish(ncclResult_t rc) {
    error_ = rc;
    lastError_ = socketNetLastError();  // per thread: read it where the call failed
    return false;
  }

  // A complete receive is whole.
  void checkReceived(const std::vector<uint8_t>& buffer) const {
    if (std::memcmp(buffer.data(), pattern_.data(), pattern_.size()) == 0) return;
    ADD_FAILURE() << "receive " << completed_ << " completed with bytes missing from offset "
                  << firstMismatch(buffer.data(), 0, bytes_);
  }

  const weftNet_v8_t& api_;
  void* comm_;
  void* mhandle_;
  bool isSend_;
  int64_t bytes_;
  std::vector<uint8_t> pattern_;               // what the sender sends
  std::vector<std::vector<uint8_t>> buffers_;  // receives
  std::deque<void*> inFlight_;
  int64_t posted_ = 0;
  int64_t completed_ = 0;
  ncclResult_t error_ = ncclSuccess;
  std::string lastError_;
};

void expectPeerGoneError(const Stream& survivor) {
  EXPECT_TRUE(survivor.error() == ncclRemoteError || survivor.error() == ncclSystemError) << "got " << survivor.error();
  EXPECT_FALSE(survivor.lastError().empty());
}

std::string threadsName(const ::testing::TestParamInfo<const char*>& threads) {
  return std::string(threads.param) + "Threads";
}

class PeerVanishes : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    ScopedEnv threads("NCCL_SOCKET_NTHREADS", GetParam());
    ASSERT_NO_FATAL_FAILURE(connectPair(&pair_));
    sender_.emplace(*pair_.api, pair_.send, pair_.sendMr, true);
    receiver_.emplace(*pair_.api, pair_.recv, pair_.recvMr, false);
  }
  // Declared before the comms, so their buffers outlive them: a failed
  // comm's helper threads may write into posted receives until it closes.
  std::optional<Stream> sender_, receiver_;
  CommPair pair_;
};

TEST_P(PeerVanishes, ReceiverClosedWhileMessagesAreInFlight) {
  Stream& sender = *sender_;
  Stream& receiver = *receiver_;
  while (receiver.completed() < 3) {
    ASSERT_TRUE(sender.pump()) << sender.lastError();
    ASSERT_TRUE(receiver.pump()) << receiver.lastError();
  }
  pair_.closeRecv();  // with receives posted and sends under way
  ASSERT_TRUE(sender.pumpUntilError()) << "the sender saw nothing wrong in " << kDeadlineSec << " s";
  expectPeerGoneError(sender);
}

TEST_P(PeerVanishes, SenderClosedWhileMessagesAreInFlight) {
  Stream& sender = *sender_;
  Stream& receiver = *receiver_;
  while (receiver.completed() < 3) {
    ASSERT_TRUE(sender.pump()) << sender.lastError();
    ASSERT_TRUE(receiver.pump()) << receiver.lastError();
  }
  pair_.closeSend();
  ASSERT_TRUE(receiver.pumpUntilError()) << "the receiver saw nothing wrong in " << kDeadlineSec << " s";
  expectPeerGoneError(receiver);
}

// A piece whose socket fails is not counted as moved, so its message never
// completes. (It once was: a `test` that had just checked for failure could
// then see every piece "done" and report a receive complete with bytes
// missing; a peer killed mid-transfer showed it now and then.) Driven on a
// receive comm over socket pairs, so the peer's half piece is exact.
TEST(SocketComm, AFailedPieceDoesNotCountAsMoved) {
  int control[2], data[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, control), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, data), 0);
  constexpr int64_t kBytes = 1024 * 1024;
  std::vector<uint8_t> buffer(kBytes);  // outlives the comm and its helper
  std::vector<Socket> dataSockets;
  dataSockets.emplace_back(data[0]);
  transport::socknet::SocketComm comm(false, Socket(control[0]), std::move(dataSockets), 1, "a test peer");
  Socket peerControl(control[1]);
  Socket peerData(data[1]);
  transport::socknet::Request* request = comm.post(buffer.data(), kBytes);
  ASSERT_NE(request, nullptr);
  const int64_t header = kBytes;
  ASSERT_TRUE(peerControl.sendAll(&header, sizeof(header), Deadline::afterSec(5)).ok());
  bool done = false;
  int64_t bytes = 0;
  Status status = comm.test(request, &done, &bytes);  // takes the header and hands the piece to the helper
  ASSERT_TRUE(status.ok()) << status.message();
  const std::vector<uint8_t> half = patternMessage(0, kBytes / 2);
  ASSERT_TRUE(peerData.sendAll(half.data(), half.size(), Deadline::afterSec(5)).ok());
  peerData.close();  // the peer vanishes halfway through the only piece
  const Deadline deadline = Deadline::afterSec(kDeadlineSec);
  while (status.ok() && !done && !deadline.expired()) status = comm.test(request, &done, &bytes);
  EXPECT_FALSE(done) << "a receive completed with half its bytes";
  ASSERT_FALSE(status.ok()) << "no error in " << kDeadlineSec << " s";
  EXPECT_EQ(status.code(), ncclRemoteError) << status.message();
  // The helper thread has failed the comm; give it time to (wrongly) count the piece.
  for (int i = 0; i < 100 && request->piecesLeft.load() > 0; ++i) usleep(1000);
  EXPECT_EQ(request->piecesLeft.load(), 1) << "the failed piece was counted as moved";
}

TEST_P(PeerVanishes, ReceiverClosedBeforeReceivingAnything) {
  Stream& sender = *sender_;
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(sender.pump());
  pair_.closeRecv();
  ASSERT_TRUE(sender.pumpUntilError()) << "the sender saw nothing wrong in " << kDeadlineSec << " s";
  expectPeerGoneError(sender);
}

INSTANTIATE_TEST_SUITE_P(HelperThreads, PeerVanishes, ::testing::Values("0", "2", "4"), threadsName);

// A child process connects and streams messages until it dies: by _exit
// after a few messages, or killed by the parent mid-transfer.
enum class Death { kExit, kKill };

void childSender(const char* handle, int messagesBeforeExit) {
  const weftNet_v8_t& api = loopbackNet();
  void* send = nullptr;
  void* mhandle = nullptr;
  weftNetDeviceHandle_v8_t* devComm = nullptr;
  char copy[kNetHandleBytes];
  std::memcpy(copy, handle, sizeof(copy));
  if (api.connect(0, copy, &send, &devComm) != ncclSuccess || send == nullptr) _exit(2);
  if (api.regMr(send, nullptr, 0, kNetPtrHost, &mhandle) != ncclSuccess) _exit(3);
  Stream stream(api, send, mhandle, true);
  while (stream.pump())
    if (messagesBeforeExit > 0 && stream.completed() >= messagesBeforeExit) _exit(0);  // mid-stream
  _exit(4);
}

// Kills and reaps the child however the test ends.
struct ChildProcess {
  pid_t pid = -1;
  bool reaped = false;
  ~ChildProcess() {
    if (pid <= 0 || reaped) return;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
};

void peerProcessDies(const char* threads, Death death) {
  ScopedEnv threadSetting("NCCL_SOCKET_NTHREADS", threads);
  const weftNet_v8_t& api = loopbackNet();
  char handle[kNetHandleBytes] = {};
  void* listenComm = nullptr;
  ASSERT_EQ(api.listen(0, handle, &listenComm), ncclSuccess);
  ChildProcess child;
  child.pid = fork();
  ASSERT_GE(child.pid, 0);
  if (child.pid == 0) childSender(handle, death == Death::kExit ? 5 : 0);
  std::optional<Stream> receiver;  // outlives the comm (see PeerVanishes)
  CommPair comm;
  comm.api = &api;
  weftNetDeviceHandle_v8_t* devComm = nullptr;
  const Deadline deadline = Deadline::afterSec(kDeadlineSec);
  while (comm.recv == nullptr && !deadline.expired())
    ASSERT_EQ(api.accept(listenComm, &comm.recv, &devComm), ncclSuccess);
  EXPECT_EQ(api.closeListen(listenComm), ncclSuccess);
  ASSERT_NE(comm.recv, nullptr);
  ASSERT_EQ(api.regMr(comm.recv, nullptr, 0, kNetPtrHost, &comm.recvMr), ncclSuccess);
  receiver.emplace(api, comm.recv, comm.recvMr, false);
  if (death == Death::kKill) {
    // Killed once data is flowing. (A child that exits on its own may be
    // gone before anything is received: once the comm has failed, every
    // request reports the failure, even one whose bytes all arrived.)
    while (receiver->completed() < 2 && !deadline.expired()) ASSERT_TRUE(receiver->pump()) << receiver->lastError();
    kill(child.pid, SIGKILL);
  }
  ASSERT_TRUE(receiver->pumpUntilError()) << "the receiver saw nothing wrong in " << kDeadlineSec << " s";
  expectPeerGoneError(*receiver);
  int status = 0;
  ASSERT_EQ(waitpid(child.pid, &status, 0), child.pid);
  child.reaped = true;
  if (death == Death::kExit)
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  else
    EXPECT_TRUE(WIFSIGNALED(status)) << "child status " << status;
}

// No fixture: the process forks with no comm (and no helper thread) of its own.
class PeerProcess : public ::testing::TestWithParam<const char*> {};

TEST_P(PeerProcess, ExitsMidTransfer) { ASSERT_NO_FATAL_FAILURE(peerProcessDies(GetParam(), Death::kExit)); }

TEST_P(PeerProcess, KilledMidTransfer) { ASSERT_NO_FATAL_FAILURE(peerProcessDies(GetParam(), Death::kKill)); }

INSTANTIATE_TEST_SUITE_P(HelperThreads, PeerProcess, ::testing::Values("0", "2", "4"), threadsName);

}  // namespace
}  // namespace weft::testing
