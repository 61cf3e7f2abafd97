// Runs channel work lists on the host: the calling thread runs one list
// itself and hands the others to per-channel worker threads, so a single
// channel on a single communicator never leaves the caller's thread.
#pragma once

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "common/notifier.h"
#include "common/status.h"
#include "device/backend/host/host_run.h"

namespace weft::core {

struct Comm;

// One channel's list of one communicator, ready to run.
struct LaunchUnit {
  Comm* comm;
  int channel;
  const std::vector<device::WorkItem>* items;
};

class ChannelWorker {
 public:
  explicit ChannelWorker(int rank);
  ~ChannelWorker();
  ChannelWorker(const ChannelWorker&) = delete;
  ChannelWorker& operator=(const ChannelWorker&) = delete;

  void post(const device::ChannelView& view, const std::vector<device::WorkItem>* items,
            const device::HostWaitConfig* config);
  device::WaitFailureInfo wait();

 private:
  void loop();

  int rank_;
  Notifier work_;
  Notifier done_;
  uint32_t expectedDone_ = 0;
  std::atomic<bool> stop_{false};
  device::ChannelView view_{};
  const std::vector<device::WorkItem>* items_ = nullptr;
  const device::HostWaitConfig* config_ = nullptr;
  device::WaitFailureInfo result_;
  std::thread thread_;
};

class HostExecutor {
 public:
  explicit HostExecutor(int rank) : rank_(rank) {}
  ChannelWorker& worker(int channel);

 private:
  int rank_;
  std::vector<std::unique_ptr<ChannelWorker>> workers_;
};

// Runs every unit to completion (or failure); `results` gets the per-unit
// failures in the order of `units`.
void runUnits(const std::vector<LaunchUnit>& units, std::vector<device::WaitFailureInfo>* results);

}  // namespace weft::core
