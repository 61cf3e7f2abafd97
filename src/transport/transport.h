// The transport interface: how two ranks come to share a StepFifo.
//
// Set-up, as the receiver owns the FIFO memory: the receiver's setupRecv
// allocates it and describes it in a ConnectBlob; the blob travels to the
// sender over bootstrap; the sender's connectSend attaches to it. A transport
// whose handshake needs both ends at once (the network: a connect may finish
// only once the peer accepts) leaves its side unfinished and completes it in
// progressSetup, which the caller runs for every unfinished link of the rank
// together, so no link's wait starves another's.
// Every transport has the same file set: <name>.h/.cc implementing this.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "common/status.h"
#include "graph/rails.h"
#include "transport/connection.h"

namespace weft::transport {

// What a transport needs to know about a link, and nothing more.
struct LinkSpec {
  int channel = 0;
  int rank = 0;  // this side
  int peer = 0;  // the other side
  int64_t stepBytes = 0;
  int cudaDev = -1;            // this side's device (cuda backend only)
  bool peerInProcess = false;  // the peer rank lives in this process
  int peerCudaDev = -1;        // the peer's device (cuda backend only)
  // Direct mode may run on this communicator (WEFT_DIRECT, alike on every
  // rank): the cuda p2p transport opens links between processes to it only
  // then, so that without it they stay exactly as before (no step flags).
  bool directAllowed = false;
  std::string peerName;        // "rank 3 (pid 12 on host h2)", for messages
  // Network links: the NIC the plan routes this direction of the channel
  // through on this side (dev -1: the plan names none; the network then
  // spreads links by channel). See docs/network.md, "Rails".
  graph::NicIdentity nic;
  const char* nicReason = "the plan's NIC";  // why `nic`, for the log
  // Called now and then while a link waits on the peer (a connect or an
  // accept): an error (abort, the peer gone, a failure reported) ends the
  // wait with it.
  std::function<Status()> keepWaiting;
};

struct ConnectBlob {
  uint32_t transportId;
  uint32_t bytes;
  char data[248];
};

enum class TransportId : uint32_t { kP2p = 1, kShm = 2, kCudaP2p = 3, kCudaShm = 4, kNet = 5 };

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual TransportId id() const = 0;
  virtual Status setupRecv(const LinkSpec& link, Connection* conn, ConnectBlob* blob) const = 0;
  virtual Status connectSend(const LinkSpec& link, const ConnectBlob& blob, Connection* conn) const = 0;
  // One non-blocking attempt to finish this side of a link begun by setupRecv
  // or connectSend (the network's connect or accept); sets *done once it is
  // finished. Never waits on the peer: the caller polls every unfinished link
  // in turn. Most transports are finished at once.
  virtual Status progressSetup(const LinkSpec& /*link*/, Connection* /*conn*/, bool* done) const {
    *done = true;
    return okStatus();
  }
};

// Ranks in one process: FIFO memory in the process heap, shared directly.
const Transport& p2pTransport();
// Processes on one host: FIFO memory in a POSIX shared-memory segment.
const Transport& shmTransport();
// GPUs that can reach each other's memory (same device, peer access, or
// CUDA IPC across processes): FIFO in the receiver's device memory.
const Transport& cudaP2pTransport();
// GPUs that cannot: FIFO in a shared-memory segment pinned and mapped into
// both devices (data crosses PCIe twice).
const Transport& cudaShmTransport();
// Ranks on different hosts (or virtual nodes): a FIFO on each side, joined
// by the network, which the communicator's proxy thread drives.
const Transport& netTransport();

}  // namespace weft::transport
