#include "transport/net/socket_comm.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <thread>

#include "common/log.h"

namespace weft::transport::socknet {

PieceLayout pieceLayout(int64_t bytes, int nSockets, uint64_t sequence) {
  PieceLayout layout;
  if (nSockets <= 0 || bytes <= 0) return layout;
  // As many pieces as fit whole minimum pieces (rounding down: rounding up
  // split a 64 KiB + 1 message into two pieces of 32 KiB), at least one.
  const int64_t wanted = std::max<int64_t>(1, bytes / kMinPieceBytes);
  layout.count = static_cast<int>(std::min<int64_t>(wanted, nSockets));
  // Rounded down, so the pieces before the last are no longer than the last:
  // with rounding up the last piece came up to count - 1 bytes short of the
  // minimum.
  layout.pieceBytes = bytes / layout.count;
  layout.first = static_cast<int>(sequence % static_cast<uint64_t>(nSockets));
  return layout;
}

Piece pieceAt(const PieceLayout& layout, int64_t bytes, int nSockets, int index) {
  Piece piece;
  piece.offset = index * layout.pieceBytes;
  piece.bytes = index == layout.count - 1 ? bytes - piece.offset : layout.pieceBytes;
  piece.socket = (layout.first + index) % nSockets;
  return piece;
}

// Threads that move pieces on data sockets with blocking calls. Socket s is
// always served by thread s % nThreads, and each thread runs its tasks in
// queue order, so every socket sees its pieces in message order on both ends.
class HelperPool {
 public:
  struct Task {
    const Socket* socket;
    char* data;
    int64_t bytes;
    bool send;
    Request* request;
  };

  HelperPool(int nThreads, SocketComm* comm) : comm_(comm), queues_(static_cast<size_t>(nThreads)) {
    for (int t = 0; t < nThreads; ++t) threads_.emplace_back([this, t] { run(static_cast<size_t>(t)); });
  }

  ~HelperPool() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  void push(size_t socketIndex, const Task& task) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      queues_[socketIndex % queues_.size()].push_back(task);
    }
    wake_.notify_all();
  }

 private:
  void run(size_t self) {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || !queues_[self].empty(); });
        if (queues_[self].empty()) return;
        task = queues_[self].front();
        queues_[self].pop_front();
      }
      // A blocked call ends when the peer moves data or the comm is shut down.
      Status s = task.send ? task.socket->sendAll(task.data, static_cast<size_t>(task.bytes), Deadline::never())
                           : task.socket->recvAll(task.data, static_cast<size_t>(task.bytes), Deadline::never());
      if (!s.ok()) {
        // A failed piece is not moved: leave it counted, so its message
        // never completes. (Counting it let a test() that had already
        // checked failed_ see every piece done and report the message
        // complete with bytes missing.) The comm's failure ends every wait.
        comm_->fail(s);
        continue;
      }
      // Release: the piece's bytes are in memory before the proxy sees it done.
      task.request->piecesLeft.fetch_sub(1, std::memory_order_release);
    }
  }

  SocketComm* comm_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::vector<std::deque<Task>> queues_;
  std::vector<std::thread> threads_;
};

SocketComm::SocketComm(bool isSend, Socket control, std::vector<Socket> data, int nThreads, std::string peer)
    : isSend_(isSend), control_(std::move(control)), data_(std::move(data)), peer_(std::move(peer)) {
  if (!data_.empty()) helpers_ = std::make_unique<HelperPool>(std::max(1, nThreads), this);
  inOrder_.reserve(kNetMaxRequests);
}

SocketComm::~SocketComm() {
  shutdown();
  helpers_.reset();  // joins: no task touches the requests after this
}

void SocketComm::shutdown() {
  control_.shutdown();
  for (const Socket& s : data_) s.shutdown();
}

void SocketComm::fail(const Status& status) {
  std::lock_guard<std::mutex> lock(errorMutex_);
  if (error_.ok()) error_ = status;
  failed_.store(true, std::memory_order_release);
}

Request* SocketComm::post(void* data, int64_t bytes) {
  for (Request& r : requests_) {
    if (r.used) continue;
    r.used = true;
    r.comm = this;
    r.sequence = nextSequence_++;
    r.data = static_cast<char*>(data);
    r.capacity = bytes;
    r.size = isSend_ ? bytes : -1;
    r.header = bytes;
    r.headerDone = 0;
    r.inlineDone = 0;
    r.inlinePayload = false;
    r.piecesQueued = false;
    r.piecesLeft.store(0, std::memory_order_relaxed);
    inOrder_.push_back(&r);
    return &r;
  }
  return nullptr;
}

// Moves as much of r's header and inline payload as the control socket takes
// now. *blocked when it could not finish (later requests must wait).
Status SocketComm::progressControl(Request& r, bool* blocked) {
  auto move = [&](char* p, int64_t want, int64_t* done) -> Status {
    while (*done < want) {
      Result<size_t> n = isSend_ ? control_.sendSome(p + *done, static_cast<size_t>(want - *done))
                                 : control_.recvSome(p + *done, static_cast<size_t>(want - *done));
      if (!n.ok()) return n.status();
      if (n.value() == 0) {
        *blocked = true;
        return okStatus();
      }
      *done += static_cast<int64_t>(n.value());
    }
    return okStatus();
  };
  const int64_t headerBytes = sizeof(r.header);
  if (isSend_ && r.headerDone == 0 && (data_.empty() || r.size < kInlineBytes)) {
    // A small message leaves in one call (and one segment) with its header.
    Result<size_t> n = control_.sendSome2(&r.header, sizeof(r.header), r.data, static_cast<size_t>(r.size));
    if (!n.ok()) return n.status();
    const int64_t moved = static_cast<int64_t>(n.value());
    r.headerDone = std::min(moved, headerBytes);
    r.inlineDone = std::max<int64_t>(0, moved - headerBytes);
    if (r.headerDone == headerBytes) r.inlinePayload = true;
  }
  if (r.headerDone < headerBytes) {
    WEFT_RETURN_IF_ERROR(move(reinterpret_cast<char*>(&r.header), headerBytes, &r.headerDone));
    if (*blocked) return okStatus();
    if (!isSend_) {
      if (r.header < 0 || r.header > r.capacity)
        return errorStatus(ncclInternalError, "a message of %lld bytes arrived for a receive of %lld bytes",
                           static_cast<long long>(r.header), static_cast<long long>(r.capacity));
      r.size = r.header;
    }
    r.inlinePayload = data_.empty() || r.size < kInlineBytes;
  }
  if (r.inlinePayload) return move(r.data, r.size, &r.inlineDone);
  return okStatus();
}

void SocketComm::queuePieces(Request& r) {
  const PieceLayout layout = pieceLayout(r.size, static_cast<int>(data_.size()), r.sequence);
  r.piecesLeft.store(layout.count, std::memory_order_relaxed);
  r.piecesQueued = true;
  for (int i = 0; i < layout.count; ++i) {
    const Piece piece = pieceAt(layout, r.size, static_cast<int>(data_.size()), i);
    const size_t socket = static_cast<size_t>(piece.socket);
    helpers_->push(socket, {&data_[socket], r.data + piece.offset, piece.bytes, isSend_, &r});
  }
}

bool SocketComm::complete(const Request& r) const {
  const bool controlDone = r.headerDone == sizeof(r.header) && (!r.inlinePayload || r.inlineDone == r.size);
  if (!controlDone) return false;
  // Acquire pairs with the helpers' release: their bytes are visible.
  return r.inlinePayload || (r.piecesQueued && r.piecesLeft.load(std::memory_order_acquire) == 0);
}

Status SocketComm::progress() {
  for (Request* r : inOrder_) {
    bool blocked = false;
    WEFT_RETURN_IF_ERROR(progressControl(*r, &blocked));
    if (blocked) break;  // the control stream is in message order
    if (!r->inlinePayload && !r->piecesQueued) queuePieces(*r);
  }
  return okStatus();
}

Status SocketComm::test(Request* request, bool* done, int64_t* bytes) {
  *done = false;
  if (failed_.load(std::memory_order_acquire)) {
    std::lock_guard<std::mutex> lock(errorMutex_);
    return error_;
  }
  Status s = progress();
  if (!s.ok()) {
    fail(s);
    return s;
  }
  if (!complete(*request)) return okStatus();
  *done = true;
  *bytes = request->size;
  request->used = false;
  inOrder_.erase(std::find(inOrder_.begin(), inOrder_.end(), request));
  return okStatus();
}

}  // namespace weft::transport::socknet
