#include "core/host_executor.h"

#include <optional>

#include "common/backoff.h"
#include "common/log.h"
#include "core/comm.h"

namespace weft::core {
namespace {

// Workers only take lists when there is more than one to run, i.e. for
// bigger operations: a short spin before sleeping is enough.
constexpr int kWorkerSpin = 2000;

}  // namespace

ChannelWorker::ChannelWorker(int rank) : rank_(rank), thread_([this] { loop(); }) {}

ChannelWorker::~ChannelWorker() {
  stop_ = true;
  work_.notify();
  thread_.join();
}

void ChannelWorker::post(const device::ChannelView& view, const std::vector<device::WorkItem>* items,
                         const device::HostWaitConfig* config) {
  view_ = view;
  items_ = items;
  config_ = config;
  expectedDone_ = done_.current() + 1;
  work_.notify();  // publishes the fields above (seq_cst increment)
}

device::WaitFailureInfo ChannelWorker::wait() {
  while (done_.current() != expectedDone_) done_.waitChange(expectedDone_ - 1, kDefaultSpinCount, 100);
  return result_;
}

void ChannelWorker::loop() {
  log::setCurrentRank(rank_);
  // Not work_.current(): the first post() may already have happened when
  // this thread starts, and reading it here would swallow that work.
  uint32_t seen = 0;
  for (;;) {
    while (work_.current() == seen) work_.waitChange(seen, kWorkerSpin);
    seen = work_.current();
    if (stop_) return;
    result_ = device::hostRunChannel(view_, items_->data(), items_->size(), *config_);
    done_.notify();
  }
}

ChannelWorker& HostExecutor::worker(int channel) {
  if (workers_.size() <= static_cast<size_t>(channel)) workers_.resize(static_cast<size_t>(channel) + 1);
  auto& slot = workers_[static_cast<size_t>(channel)];
  if (!slot) slot = std::make_unique<ChannelWorker>(rank_);
  return *slot;
}

void runUnits(const std::vector<LaunchUnit>& units, std::vector<device::WaitFailureInfo>* results) {
  results->resize(units.size());  // every entry is written below
  for (size_t i = 1; i < units.size(); ++i) {
    const LaunchUnit& u = units[i];
    u.comm->executor->worker(u.channel).post(u.comm->channels[static_cast<size_t>(u.channel)].view(u.comm->rank),
                                             u.items, &u.comm->waitConfig);
  }
  if (!units.empty()) {
    const LaunchUnit& u = units[0];
    const device::ChannelView& view = u.comm->channels[static_cast<size_t>(u.channel)].view(u.comm->rank);
    // Waiting helps the proxy along, and the proxy logs with the rank.
    std::optional<log::ScopedRank> scoped;
    if (u.comm->proxy) scoped.emplace(u.comm->rank);
    (*results)[0] = device::hostRunChannel(view, u.items->data(), u.items->size(), u.comm->waitConfig);
  }
  for (size_t i = 1; i < units.size(); ++i) (*results)[i] = units[i].comm->executor->worker(units[i].channel).wait();
}

}  // namespace weft::core
