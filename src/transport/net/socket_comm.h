// The socket network's connections: one control socket, which carries each
// message's size and small messages whole, and optional data sockets, over
// which large messages are split and moved by helper threads.
//
// Wire format of one message, in the order messages were posted:
//   control socket: int64 size, then the payload when it is inline
//   data sockets:   pieces of the payload (see pieceLayout), each socket's
//                   pieces in message order
// Both ends derive the split from the size and the message's sequence
// number, so nothing else travels. Inline: no data sockets, or a message
// smaller than kInlineBytes (a thread hand-off would cost more than the copy).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/socket.h"
#include "common/status.h"
#include "transport/net/net_v8.h"

namespace weft::transport::socknet {

constexpr int kMaxDataSockets = 64;
constexpr int64_t kInlineBytes = 64 * 1024;
constexpr int64_t kMinPieceBytes = 64 * 1024;

// How a message of `bytes` is split over `nSockets` data sockets: `count`
// pieces of `pieceBytes` (the last one longer by the remainder, < count
// bytes), piece i on socket (first + i) % nSockets. Every piece of a message
// of at least kMinPieceBytes is at least that long. first rotates with the
// message sequence so that consecutive messages use different sockets.
struct PieceLayout {
  int count = 0;
  int64_t pieceBytes = 0;
  int first = 0;
};
PieceLayout pieceLayout(int64_t bytes, int nSockets, uint64_t sequence);

// Piece `index` of a message of `bytes` split by `layout` over `nSockets`:
// where it starts in the message, its length and its socket. Both ends and
// the tests compute pieces only through this.
struct Piece {
  int64_t offset;
  int64_t bytes;
  int socket;
};
Piece pieceAt(const PieceLayout& layout, int64_t bytes, int nSockets, int index);

class HelperPool;
class SocketComm;

// One posted message. Owned by its comm's request table.
struct Request {
  SocketComm* comm = nullptr;
  bool used = false;
  uint64_t sequence = 0;
  char* data = nullptr;
  int64_t capacity = 0;        // receive: the posted buffer's size
  int64_t size = -1;           // bytes of the message (receive: once the header arrived)
  int64_t header = 0;          // wire copy of size
  int64_t headerDone = 0;      // bytes of header moved
  int64_t inlineDone = 0;      // bytes of inline payload moved
  bool inlinePayload = false;  // decided once the size is known
  bool piecesQueued = false;
  std::atomic<int> piecesLeft{0};
};

class SocketComm {
 public:
  SocketComm(bool isSend, Socket control, std::vector<Socket> data, int nThreads, std::string peer);
  ~SocketComm();
  SocketComm(const SocketComm&) = delete;
  SocketComm& operator=(const SocketComm&) = delete;

  bool isSend() const { return isSend_; }
  // Posts a message (send: `bytes` bytes; receive: up to `bytes`). Null when
  // kNetMaxRequests are in flight.
  Request* post(void* data, int64_t bytes);
  // Progresses every request in order; *done once `request` is complete, with
  // its size in *bytes, and then the request is free again.
  Status test(Request* request, bool* done, int64_t* bytes);
  // Wakes helpers blocked on sockets (close, abort).
  void shutdown();
  // A failure seen by a helper thread, sticky.
  void fail(const Status& status);
  const std::string& peer() const { return peer_; }

 private:
  Status progress();
  Status progressControl(Request& r, bool* blocked);
  void queuePieces(Request& r);
  bool complete(const Request& r) const;

  bool isSend_;
  Socket control_;
  std::vector<Socket> data_;
  std::unique_ptr<HelperPool> helpers_;
  std::string peer_;  // address, for messages
  Request requests_[kNetMaxRequests];
  std::vector<Request*> inOrder_;  // posted and not yet tested done, oldest first
  uint64_t nextSequence_ = 0;
  std::mutex errorMutex_;
  Status error_;
  std::atomic<bool> failed_{false};
};

}  // namespace weft::transport::socknet
