// Direct mode between processes of one host (host backend): the
// communicator's answer to the host team's questions (device::HostDirect).
//
//   describe  the own output buffer: in an ncclMemAlloc segment (then the
//             post names it), or not (bare address and pid)
//   resolve   a peer's post: its own process -> the address; a segment ->
//             this process's mapping of it (opened once, cached); no
//             segment -> cross-memory attach where enabled (WEFT_CMA) and
//             allowed for that peer, else the FIFO's slots
//   crossWrite one process_vm_writev; a refusal turns cross-memory attach
//             off for that peer (logged once) and the data goes by slot
//   resolveRead a peer's posted input (direct reads): its own process -> the
//             address; a segment -> this process's mapping of it; else
//             unreachable (no cross-memory reads: measured slower than the
//             FIFO's copies, docs/fifo-protocol.md)
//
// Counters of the ways chosen (per link and call) feed weftCommDescribe,
// so tests can see which path ran.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/shared_mem.h"
#include "device/backend/host/host_direct.h"

namespace weft::core {

struct DirectCounts {
  uint64_t mapped = 0;        // link-calls written through a mapped segment
  uint64_t crossMemory = 0;   // link-calls written by cross-memory attach
  uint64_t slots = 0;         // link-calls between processes that went through the slots
  uint64_t refusedSteps = 0;  // cross-memory writes the kernel refused (sent by slot instead)
  uint64_t readsMapped = 0;   // link-calls that read a peer's input through a mapped segment
  uint64_t readsRefused = 0;  // link-calls whose peer posted an input this rank could not reach
};

class DirectPeers final : public device::HostDirect {
 public:
  // crossMemory: WEFT_CMA; refuseForTest: WEFT_CMA_TEST_REFUSE (every
  // cross-memory attach fails as with EPERM).
  DirectPeers(int rank, int nranks, bool crossMemory, bool refuseForTest);

  device::DirectPost describe(const void* base, uint64_t bytes) override;
  device::DirectWay resolve(int peer, const device::DirectPost& post, uint64_t* addr) override;
  bool resolveRead(int peer, const device::DirectPost& post, uint64_t* addr) override;
  bool crossWrite(int peer, const void* from, uint64_t remote, void* slot, uint64_t bytes) override;

  DirectCounts counts() const;
  size_t mappedSegments() const { return segments_.mapped(); }

 private:
  enum class Cma : uint8_t { kUnknown, kAllowed, kRefused };
  bool crossMemoryAllowed(int peer, pid_t pid, uint64_t probeAddr);
  // This process's address of a posted segment's span, or null (*gone: its
  // owner freed it); a failure to map is logged once per peer.
  char* mapPosted(int peer, const device::DirectPost& post, bool* gone);
  void refuse(int peer, pid_t pid, int err, const char* what);
  int writeOrRefuse(pid_t pid, const void* from, uint64_t remote, uint64_t bytes) const;

  int rank_;
  bool crossMemory_;
  bool refuseForTest_;
  PeerSegments segments_;
  std::mutex mutex_;  // guards the per-peer states below
  std::vector<Cma> cma_;
  std::vector<bool> mapFailureLogged_;
  std::vector<pid_t> pids_;  // per peer: the process its posts came from
  std::atomic<uint64_t> mapped_{0};
  std::atomic<uint64_t> crossMemoryCalls_{0};
  std::atomic<uint64_t> slots_{0};
  std::atomic<uint64_t> refusedSteps_{0};
  std::atomic<uint64_t> readsMapped_{0};
  std::atomic<uint64_t> readsRefused_{0};
};

}  // namespace weft::core
