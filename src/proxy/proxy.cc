#include "proxy/proxy.h"

#include <algorithm>

#include "common/backoff.h"
#include "common/clock.h"
#include "common/log.h"
#include "device/atomics.h"
#include "transport/net/net_wire.h"

namespace weft::proxy {

using transport::NetLink;

namespace {

// The proxy shares cores with the data path: spin briefly, then yield.
constexpr int kProxySpinCount = 64;

char* slotOf(const NetLink& l, uint64_t step) {
  return l.fifo.slots + static_cast<int64_t>(step % device::kFifoSteps) * (l.fifo.stepBytes + l.fifo.slotGap);
}

device::FifoControl& controlOf(const NetLink& l) { return *device::fifoControl(l.fifo); }

// A step arrived whole (`size` bytes): its payload size and call signature
// go where the consumer reads them. A message without a trailer means the
// peer does not speak this wire format: fail rather than guess.
Status publishTrailer(NetLink& l, int size) {
  const uint64_t slot = l.completed % device::kFifoSteps;
  const int64_t payload = static_cast<int64_t>(size) - transport::kNetTrailerBytes;
  if (payload < 0 || payload > l.fifo.stepBytes ||
      !transport::applyNetTrailer(slotOf(l, l.completed) + payload, slot, &controlOf(l)))
    return errorStatus(ncclSystemError,
                       "network receive from %s on channel %d: step %llu arrived without a valid call-signature "
                       "trailer (%d bytes; a step is at most %lld bytes plus a %lld-byte trailer): the peer runs "
                       "another network wire format",
                       l.peerName.c_str(), l.channel, static_cast<unsigned long long>(l.completed), size,
                       static_cast<long long>(l.fifo.stepBytes), static_cast<long long>(transport::kNetTrailerBytes));
  device::storeRelaxed(&l.fifo.sizes[slot], payload);
  return okStatus();
}

}  // namespace

ProgressEngine::ProgressEngine(int rank, const std::atomic<uint32_t>* abortFlag, std::atomic<uint32_t>* failedFlag)
    : rank_(rank), abortFlag_(abortFlag), failedFlag_(failedFlag) {}

ProgressEngine::~ProgressEngine() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ProgressEngine::post(NetLink* link, const ProxyOp& op) {
  if (op.steps == 0) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    incoming_.emplace_back(link, op);
    outstanding_.fetch_add(1, std::memory_order_relaxed);
    hasIncoming_.store(true, std::memory_order_release);
  }
  wake_.notify_one();
}

void ProgressEngine::start() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
}

bool ProgressEngine::idle() const { return outstanding_.load(std::memory_order_acquire) == 0; }

bool ProgressEngine::waitIdle(int64_t timeoutNs) const {
  const int64_t start = nowNs();
  Backoff backoff(kProxySpinCount);
  while (!idle()) {
    if (failedFlag_ && failedFlag_->load(std::memory_order_acquire)) return false;
    if (abortFlag_ && abortFlag_->load(std::memory_order_relaxed)) return false;
    if (timeoutNs > 0 && nowNs() - start > timeoutNs) return false;
    backoff.pause();
  }
  return true;
}

std::string ProgressEngine::describePending() {
  std::lock_guard<std::mutex> lock(progressMutex_);
  takeIncoming();
  std::string out;
  for (const LinkWork& w : active_) {
    const NetLink& l = *w.link;
    const uint64_t tail = device::loadAcquire(l.fifo.tail), head = device::loadAcquire(l.fifo.head);
    out += strFormat("%s%s %s on channel %d: %llu steps wanted, %llu posted, %llu complete (FIFO tail %llu, head %llu)",
                     out.empty() ? "" : "; ", l.isSend ? "send to" : "receive from", l.peerName.c_str(), l.channel,
                     static_cast<unsigned long long>(l.target), static_cast<unsigned long long>(l.posted),
                     static_cast<unsigned long long>(l.completed), static_cast<unsigned long long>(tail),
                     static_cast<unsigned long long>(head));
  }
  return out;
}

Status ProgressEngine::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

// Moves newly posted operations to their links (proxy side only).
void ProgressEngine::takeIncoming() {
  if (!hasIncoming_.load(std::memory_order_acquire)) return;
  std::vector<std::pair<NetLink*, ProxyOp>> taken;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    taken.swap(incoming_);
    hasIncoming_.store(false, std::memory_order_relaxed);
  }
  for (auto& [link, op] : taken) {
    auto it = std::find_if(active_.begin(), active_.end(), [&](const LinkWork& w) { return w.link == link; });
    if (it == active_.end()) it = active_.insert(active_.end(), LinkWork{link, {}});
    link->target += op.steps;
    it->ops.push_back({op.id, link->target});
  }
}

Status ProgressEngine::netFailure(const NetLink& l, const char* what, ncclResult_t code) const {
  const std::string detail = transport::networkLastError(*l.net);
  return errorStatus(code == ncclSuccess ? ncclSystemError : code,
                     "network %s %s on channel %d failed at step %llu (%s %s returned %s%s%s)",
                     l.isSend ? "send to" : "receive from", l.peerName.c_str(), l.channel,
                     static_cast<unsigned long long>(l.completed), l.net->api->name(), what, resultName(code),
                     detail.empty() ? "" : ": ", detail.c_str());
}

// Sends every slot the data path published; frees each slot whose send is done.
Result<bool> ProgressEngine::progressSend(NetLink& l) {
  bool moved = false;
  // Acquire pairs with the producer's release of tail: slot bytes and size are visible.
  const uint64_t published = device::loadAcquire(l.fifo.tail);
  while (l.posted < l.target && l.posted < published) {
    const uint64_t slot = l.posted % device::kFifoSteps;
    const int64_t bytes = device::loadRelaxed(&l.fifo.sizes[slot]);
    // The call signature rides behind the payload (net_wire.h); rewriting
    // it on a retry below is harmless, the slot is ours until head moves.
    char* data = slotOf(l, l.posted);
    transport::writeNetTrailer(controlOf(l), slot, data + bytes);
    void* request = nullptr;
    ncclResult_t rc = l.net->api->isend(l.comm, data, static_cast<size_t>(bytes + transport::kNetTrailerBytes), 0,
                                        l.mhandle, &request);
    if (rc != ncclSuccess) return netFailure(l, "isend", rc);
    if (request == nullptr) break;  // the network is busy; retry next pass
    l.requests[l.posted % device::kFifoSteps] = request;
    l.posted += 1;
    moved = true;
  }
  while (l.completed < l.posted) {
    int done = 0, size = 0;
    ncclResult_t rc = l.net->api->test(l.requests[l.completed % device::kFifoSteps], &done, &size);
    if (rc != ncclSuccess) return netFailure(l, "test", rc);
    if (!done) break;
    l.completed += 1;
    // Release: the network has finished reading the slot before the producer may refill it.
    device::storeRelease(l.fifo.head, l.completed);
    moved = true;
  }
  return moved;
}

// Receives into every free slot; publishes each slot whose receive is done.
Result<bool> ProgressEngine::progressRecv(NetLink& l) {
  bool moved = false;
  // Acquire pairs with the consumer's release of head: its reads of the slot are done.
  const uint64_t freed = device::loadAcquire(l.fifo.head);
  while (l.posted < l.target && l.posted < freed + device::kFifoSteps) {
    void* data = slotOf(l, l.posted);
    size_t size = static_cast<size_t>(l.fifo.stepBytes + transport::kNetTrailerBytes);
    int tag = 0;
    void* mhandle = l.mhandle;
    void* request = nullptr;
    ncclResult_t rc = l.net->api->irecv(l.comm, 1, &data, &size, &tag, &mhandle, &request);
    if (rc != ncclSuccess) return netFailure(l, "irecv", rc);
    if (request == nullptr) break;
    l.requests[l.posted % device::kFifoSteps] = request;
    l.posted += 1;
    moved = true;
  }
  while (l.completed < l.posted) {
    int done = 0, size = 0;
    ncclResult_t rc = l.net->api->test(l.requests[l.completed % device::kFifoSteps], &done, &size);
    if (rc != ncclSuccess) return netFailure(l, "test", rc);
    if (!done) break;
    WEFT_RETURN_IF_ERROR(publishTrailer(l, size));
    l.completed += 1;
    // Release: the received bytes, the size and the call signature are
    // visible to whoever sees the new tail.
    device::storeRelease(l.fifo.tail, l.completed);
    moved = true;
  }
  return moved;
}

void ProgressEngine::retireOps(LinkWork& work) {
  while (!work.ops.empty() && work.ops.front().endStep <= work.link->completed) {
    WEFT_TRACE(log::kProxy, "proxy of rank %d: op %llu done on channel %d %s rank %d", rank_,
               static_cast<unsigned long long>(work.ops.front().id), work.link->channel,
               work.link->isSend ? "to" : "from", work.link->peer);
    work.ops.pop_front();
    outstanding_.fetch_sub(1, std::memory_order_release);
  }
}

Result<bool> ProgressEngine::progressOnce() {
  std::lock_guard<std::mutex> lock(progressMutex_);
  return progressLocked();
}

Result<bool> ProgressEngine::tryProgress() {
  std::unique_lock<std::mutex> lock(progressMutex_, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  return progressLocked();
}

Result<bool> ProgressEngine::progressLocked() {
  if (abortFlag_ && abortFlag_->load(std::memory_order_relaxed)) return false;
  if (failedFlag_ && failedFlag_->load(std::memory_order_acquire)) {
    Status failed = failure();
    return failed.ok() ? errorStatus(ncclSystemError, "the network failed (flagged outside the proxy)") : failed;
  }
  takeIncoming();
  bool moved = false;
  for (LinkWork& work : active_) {
    Result<bool> step = work.link->isSend ? progressSend(*work.link) : progressRecv(*work.link);
    if (!step.ok()) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (failure_.ok()) failure_ = step.status();
      }
      WEFT_WARN_STATUS(step.status());
      if (failedFlag_) failedFlag_->store(1, std::memory_order_release);
      return step.status();
    }
    moved = moved || step.value();
    retireOps(work);
  }
  active_.erase(std::remove_if(active_.begin(), active_.end(), [](const LinkWork& w) { return w.ops.empty(); }),
                active_.end());
  return moved;
}

void ProgressEngine::loop() {
  log::ScopedRank scopedRank(rank_);
  Backoff backoff(kProxySpinCount);
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto stuck = [&] { return !failure_.ok() || (abortFlag_ && abortFlag_->load(std::memory_order_relaxed)); };
      if (stop_) return;
      if (idle() || stuck()) {
        // Nothing to move (or nothing can move any more): sleep until a post or stop.
        // Not "until hasIncoming_": a helping data-path thread may already
        // have taken the new operations without finishing them.
        wake_.wait(lock, [&] { return stop_ || (!idle() && !stuck()); });
        backoff = Backoff(kProxySpinCount);
        continue;
      }
    }
    Result<bool> moved = tryProgress();
    if (moved.ok() && moved.value())
      backoff = Backoff(kProxySpinCount);
    else
      backoff.pause();
  }
}

}  // namespace weft::proxy
