// A launch's events for a communicator's profiler plugin (core/profiler.h):
// the group, then one event per queued collective and point-to-point call,
// with NCCL's names for what they are and how they were planned.
#pragma once

#include <vector>

namespace weft::core {

struct Comm;

class LaunchProfile {
 public:
  // Starts the events of comm's queued tasks as planned in comm->plan (the
  // collectives' sequence numbers advance); nothing without a plugin.
  void start(Comm* comm);
  // Stops them, the calls' events first, then the group's.
  void stop();
  ~LaunchProfile() { stop(); }

 private:
  const Comm* comm_ = nullptr;
  void* group_ = nullptr;
  std::vector<void*> tasks_;
};

}  // namespace weft::core
