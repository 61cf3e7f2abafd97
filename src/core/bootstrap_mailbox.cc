#include "core/bootstrap_mailbox.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/log.h"
#include "common/params.h"

namespace weft::core {
namespace {

constexpr int kCheckSliceMs = 100;  // how often a waiting take() runs its check

}  // namespace

BootstrapMailbox::BootstrapMailbox(Socket listen, uint64_t secret, int rank, int nranks)
    : secret_(secret),
      rank_(rank),
      nranks_(nranks),
      listen_(std::move(listen)),
      address_(listen_.localAddress()),
      gate_(strFormat("rank %d bootstrap listener %s", rank, address_.toString().c_str()), sizeof(wire::PeerHeader),
            [secret, nranks](const void* hello) {
              wire::PeerHeader h;
              std::memcpy(&h, hello, sizeof(h));
              return h.secret == secret && h.from >= 0 && h.from < nranks && h.bytes <= wire::kMaxMessageBytes;
            }) {
  wakeFd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  thread_ = std::thread([this] { run(); });
}

BootstrapMailbox::~BootstrapMailbox() {
  stopping_.store(true, std::memory_order_release);
  const uint64_t one = 1;
  if (wakeFd_ >= 0) (void)!::write(wakeFd_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  if (wakeFd_ >= 0) ::close(wakeFd_);
}

void BootstrapMailbox::setNoticeHandler(NoticeHandler handler) {
  std::lock_guard<std::mutex> lock(handlerMutex_);
  handler_ = std::move(handler);
}

BootstrapMailbox::Notice BootstrapMailbox::firstNotice() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return first_;
}

void BootstrapMailbox::run() {
  std::vector<pollfd> fds;
  std::vector<HelloGate::Arrival> arrived;
  while (!stopping_.load(std::memory_order_acquire)) {
    fds.clear();
    fds.push_back({wakeFd_, POLLIN, 0});
    for (const Reading& r : reading_) fds.push_back({r.socket.fd(), POLLIN, 0});
    const size_t gateAt = fds.size();
    gate_.addPollFds(listen_, &fds);
    int timeoutMs = gate_.msUntilNextDeadline();
    if (!reading_.empty()) timeoutMs = timeoutMs < 0 ? 1000 : std::min(timeoutMs, 1000);
    if (::poll(fds.data(), fds.size(), timeoutMs) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) continue;  // woken to stop: the loop condition ends it
    // Bodies first: their entries go stale once admit() adds to reading_.
    size_t kept = 0;
    for (size_t i = 0; i < reading_.size(); ++i) {
      if ((fds[1 + i].revents != 0 || nowNs() >= reading_[i].deadlineNs) && readBody(reading_[i])) continue;
      if (kept != i) reading_[kept] = std::move(reading_[i]);
      ++kept;
    }
    reading_.resize(kept);
    arrived.clear();
    gate_.handle(listen_, &fds[gateAt], &arrived);
    for (HelloGate::Arrival& a : arrived) admit(std::move(a));
  }
}

void BootstrapMailbox::admit(HelloGate::Arrival&& arrival) {
  Reading r;
  std::memcpy(&r.header, arrival.hello.data(), sizeof(r.header));
  r.socket = std::move(arrival.socket);
  if (r.header.tag == wire::kProbeTag) return;  // alive was all it asked
  if (r.header.tag == wire::kRingTag) {
    std::lock_guard<std::mutex> lock(mutex_);
    rings_.push_back({r.header.from, std::move(r.socket)});
    arrivedCv_.notify_all();
    return;
  }
  r.data.resize(r.header.bytes);
  // A peer that sent its header sends the rest at once; one that stops half
  // way is dropped after the bootstrap timeout, and only its message is lost.
  r.deadlineNs = nowNs() + std::max<int64_t>(1, param::bootstrapTimeoutSec()) * 1000000000ll;
  if (r.data.empty()) return finish(std::move(r));
  reading_.push_back(std::move(r));
}

bool BootstrapMailbox::readBody(Reading& r) {
  if (nowNs() >= r.deadlineNs) {
    WEFT_WARN("rank %d: dropped a bootstrap message from rank %d (tag %d): %zu of %zu bytes came within %lld s", rank_,
              r.header.from, r.header.tag, r.got, r.data.size(), static_cast<long long>(param::bootstrapTimeoutSec()));
    return true;
  }
  Result<size_t> n = r.socket.recvSome(r.data.data() + r.got, r.data.size() - r.got);
  if (!n.ok()) {
    WEFT_INFO(log::kBootstrap, "rank %d: bootstrap message from rank %d (tag %d) cut short: %s", rank_, r.header.from,
              r.header.tag, n.status().message().c_str());
    return true;
  }
  r.got += n.value();
  if (r.got < r.data.size()) return false;
  finish(std::move(r));
  return true;
}

void BootstrapMailbox::finish(Reading&& r) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (r.header.tag != wire::kNoticeTag) {
    messages_.push_back({r.header.from, r.header.tag, std::move(r.data)});
    arrivedCv_.notify_all();
    return;
  }
  wire::FailureNotice wireNotice{};
  std::memcpy(&wireNotice, r.data.data(), std::min(r.data.size(), sizeof(wireNotice)));
  wireNotice.why[sizeof(wireNotice.why) - 1] = '\0';
  Notice notice{wireNotice.origin, r.header.from, wireNotice.why, wireNotice.afterInit != 0};
  if (!noticed_.load(std::memory_order_relaxed)) {
    first_ = notice;
    noticed_.store(true, std::memory_order_release);
  }
  arrivedCv_.notify_all();  // a take() in progress checks for notices
  lock.unlock();
  WEFT_INFO(log::kBootstrap, "rank %d: rank %d reports that rank %d failed: %s", rank_, notice.reporter, notice.origin,
            notice.why.c_str());
  std::lock_guard<std::mutex> handlerLock(handlerMutex_);
  if (handler_) handler_(notice);
}

template <typename Found>
Status BootstrapMailbox::waitFor(Found&& found, const WaitLimit& limit, const std::function<Status()>& check,
                                 const char* what) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    if (found()) return okStatus();
    lock.unlock();
    Status checked = check ? check() : okStatus();
    lock.lock();
    if (!checked.ok()) return checked;
    if (found()) return okStatus();
    if (limit.deadline.expired())
      return errorStatus(ncclRemoteError,
                         "rank %d: waited %lld s for %s (%s); the peer is alive but did not "
                         "send it: is it blocked elsewhere, or making different calls?",
                         rank_, static_cast<long long>(limit.seconds), what, limit.name);
    arrivedCv_.wait_for(lock, std::chrono::milliseconds(kCheckSliceMs));
  }
}

Result<std::vector<char>> BootstrapMailbox::take(int from, int tag, const WaitLimit& limit,
                                                 const std::function<Status()>& check) {
  std::vector<char> data;
  auto found = [&] {
    for (auto it = messages_.begin(); it != messages_.end(); ++it)
      if (it->from == from && it->tag == tag) {
        data = std::move(it->data);
        messages_.erase(it);
        return true;
      }
    return false;
  };
  const std::string what = strFormat("a bootstrap message from rank %d (tag %d)", from, tag);
  WEFT_RETURN_IF_ERROR(waitFor(found, limit, check, what.c_str()));
  return data;
}

Result<Socket> BootstrapMailbox::takeRing(int from, const WaitLimit& limit, const std::function<Status()>& check) {
  Socket socket;
  auto found = [&] {
    for (auto it = rings_.begin(); it != rings_.end(); ++it)
      if (it->from == from) {
        socket = std::move(it->socket);
        rings_.erase(it);
        return true;
      }
    return false;
  };
  const std::string what = strFormat("the bootstrap ring connection of rank %d", from);
  WEFT_RETURN_IF_ERROR(waitFor(found, limit, check, what.c_str()));
  return socket;
}

}  // namespace weft::core
