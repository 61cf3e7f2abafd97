// Seconds each phase of a communicator's initialisation took, for the INFO
// line "Init timings - ..." (NCCL's format). Phases time themselves with a
// PhaseTimer; what no phase claims is reported as "rest".
#pragma once

#include <chrono>

namespace weft::core {

struct InitTimings {
  using Clock = std::chrono::steady_clock;
  const char* api = "ncclCommInitRank";  // the call that created the communicator
  Clock::time_point begin = Clock::now();
  double alloc = 0;        // cuda state and device mirrors of the FIFOs
  double bootstrap = 0;    // joining the bootstrap ring
  double allgathers = 0;   // peer information and channel proposals
  double topo = 0;         // topology detection, fusion and transport policy
  double graphs = 0;       // ring and tree search and exchange (topo excluded)
  double connections = 0;  // transports connected on every channel

  double sinceBegin() const { return std::chrono::duration<double>(Clock::now() - begin).count(); }
};

// Adds the time of its scope to one phase of InitTimings.
class PhaseTimer {
 public:
  explicit PhaseTimer(double* seconds) : seconds_(seconds), start_(InitTimings::Clock::now()) {}
  ~PhaseTimer() { *seconds_ += std::chrono::duration<double>(InitTimings::Clock::now() - start_).count(); }
  PhaseTimer(const PhaseTimer&) = delete;
  PhaseTimer& operator=(const PhaseTimer&) = delete;

 private:
  double* seconds_;
  InitTimings::Clock::time_point start_;
};

}  // namespace weft::core
