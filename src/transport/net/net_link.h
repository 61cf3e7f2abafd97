// One direction of a network connection as the proxy drives it: a FIFO in
// this process's memory, whose other end is the local data path (a host
// worker, or a kernel through mapped memory), and a network comm.
//
// Where the FIFO lives: on the host backend in plain host memory; on the cuda
// backend in pinned host memory mapped into the rank's device, so the kernel
// fills and drains the slots over PCIe while the proxy, and the network,
// read and write the same bytes at their host addresses. The slots are
// registered with the network as host memory either way (no GPUDirect RDMA).
//
// Ordering across PCIe needs nothing beyond the FIFO's own protocol
// (step_fifo.h), because every counter access on both sides is a
// system-scope atomic: the kernel publishes with __threadfence_system then a
// system-scope release of tail (cuda_coop.cuh), so its slot and size writes
// reach host memory before the new tail can be read there, and the proxy's
// acquire load of tail orders its reads (and the network's) after them. The
// other way, the proxy's release store of tail (received bytes) or head (a
// send finished reading the slot) follows those accesses in host memory,
// which the GPU reads coherently; the kernel's system-scope acquire load of
// the counter orders its later slot accesses after it.
//
// Send link: the data path produces into the FIFO; the proxy sends each
// published slot (tail, sizes) and frees it (head) when the send completes.
// Receive link: the proxy receives into free slots (head) and publishes them
// (sizes, tail) when the receive completes; the data path consumes.
// The counters below are the proxy's; only the proxy thread touches them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "device/step_fifo.h"
#include "transport/net/net_plugin.h"

namespace weft::transport {

struct LinkSpec;

// A network FIFO's memory as its two users address it: the proxy (and the
// network) at host addresses; the local data path at proxyBase itself (host
// backend) or at the device mapping of the same pinned bytes (cuda backend).
struct NetFifoMemory {
  std::shared_ptr<void> owner;  // frees the memory (and unpins it)
  void* proxyBase = nullptr;
  void* dataPathBase = nullptr;
};

// Bytes of a network FIFO: its slots lie kNetSlotGap bytes apart, room for
// the call-signature trailer each step carries on the wire (net_wire.h).
size_t netFifoBytes(int64_t stepBytes);

// A zeroed FIFO (netFifoBytes(spec.stepBytes), page-aligned) for the link:
// host memory when spec.cudaDev < 0, else pinned host memory mapped into
// device spec.cudaDev. Errors name the channel and the size.
Result<NetFifoMemory> allocateNetFifo(const LinkSpec& spec);

// Points the proxy's view and the data path's view at the same FIFO bytes
// (slots of stepBytes, kNetSlotGap apart).
void attachNetFifo(const NetFifoMemory& memory, int64_t stepBytes, int peer, device::FifoEnd* proxyView,
                   device::FifoEnd* dataPathView);

struct NetLink {
  NetLink() = default;
  ~NetLink() { closeNetwork(); }
  NetLink(const NetLink&) = delete;
  // Closes the network comms (the peer sees the connection end) and keeps
  // the FIFO memory. Teardown does this first for every link: freeing CUDA
  // memory waits for the whole device, where another rank's kernel may be
  // waiting on this very link until its peer notices the close.
  void closeNetwork();
  NetLink& operator=(const NetLink&) = delete;

  bool isSend = false;
  int channel = 0;
  int rank = 0;
  int peer = 0;
  std::string peerName;  // "rank 3 (host h2)", for messages
  const Network* net = nullptr;
  int dev = 0;                            // the network device (net_rails.h)
  void* listenComm = nullptr;             // receive side, until accepted
  char peerHandle[kNetHandleBytes] = {};  // send side: the receiver's listen handle
  void* comm = nullptr;                   // send or receive comm
  void* mhandle = nullptr;                // the FIFO slots' registration
  std::shared_ptr<void> memory;           // the FIFO (NetFifoMemory::owner)
  device::FifoEnd fifo{};                 // the proxy's view: host pointers only (its position is below)

  uint64_t target = 0;     // steps the posted operations ask for, in total
  uint64_t posted = 0;     // steps whose isend/irecv is posted
  uint64_t completed = 0;  // steps whose request completed
  void* requests[device::kFifoSteps] = {};
};

}  // namespace weft::transport
