// One IB connection, either end. The receiver tells the sender which buffers
// it has posted through a FIFO in the sender's memory that only the receiver
// writes (RDMA WRITE); the sender writes each message (RDMA WRITE WITH IMM)
// only into a buffer the FIFO offered, and the immediate completes the
// receive. On a merged network device (several ports, NCCL_IB_MERGE_NICS)
// queue pair i lives on port i % ports and talks to the peer's port
// i % (its ports): each port has its own CQ, and memory is registered on
// every port. docs/network.md ("The IB network") gives the memory orders.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/socket.h"
#include "common/status.h"
#include "transport/net/ib/ib_device.h"
#include "transport/net/net_v8.h"

namespace weft::transport::ib {

constexpr int kFifoDepth = kNetMaxRequests;  // one entry per request in flight
constexpr int kMaxQps = 16;
constexpr uint64_t kFifoWrite = 1ull << 63;  // wr_id bit of the receiver's FIFO writes
constexpr uint64_t kFlushRead = 1ull << 62;  // wr_id bit of the receiver's flush reads

// One offered buffer. 64 bytes, 64-aligned: one entry is one RDMA WRITE of
// one cache line, and `seq` is its last word, stored last (see the docs).
struct alignas(64) FifoEntry {
  uint64_t addr;
  uint64_t capacity;
  uint32_t rkeys[kMaxPortsPerDevice];  // the buffer's key on each of the receiver's ports
  uint64_t pad[3];
  uint64_t seq;  // message number + 1; 0: never written
};
static_assert(sizeof(FifoEntry) == 64 && offsetof(FifoEntry, seq) == 56, "FIFO entry layout");

// Where one port of a side is.
struct PortAddress {
  uint16_t lid;
  uint8_t ethernet;
  uint8_t mtu;
  uint32_t pad;
  ibv_gid gid;
};

// What each side tells the other over the set-up socket.
struct QpInfo {
  uint64_t cookie;
  uint32_t qpn[kMaxQps];  // QP i is on port i % nPorts
  int32_t nQps;
  int32_t nPorts;
  PortAddress ports[kMaxPortsPerDevice];
  uint64_t fifoAddr;  // sender only: its FIFO (registered on its port 0, where its QP 0 is)
  uint32_t fifoRkey;
  uint32_t pad;
};

class IbComm;

struct Request {
  IbComm* comm = nullptr;
  bool used = false;
  int pending = 0;    // completions still to come
  int64_t bytes = 0;  // send: the message; receive: from the immediate
};

class IbComm {
 public:
  IbComm(bool isSend, IbNetDevice* device, int nQps);
  ~IbComm();
  IbComm(const IbComm&) = delete;
  IbComm& operator=(const IbComm&) = delete;

  // Creates a CQ per port, the QPs (to INIT, round robin over the ports)
  // and the FIFO region.
  Status createQueues();
  QpInfo localInfo(uint64_t cookie) const;
  // Moves every QP to RTR and RTS towards the peer `remote` describes.
  Status connectQps(const QpInfo& remote);

  Result<Request*> postSend(void* data, size_t size, MrHandle* mr);
  Result<Request*> postRecv(void* data, size_t size, MrHandle* mr);
  // iflush of a receive into GPU memory (`mr` a dma-buf region): an RDMA
  // READ of 1 byte at `data` through a loopback QP on every port (made at
  // the first flush), whose completions mean the HCAs' earlier writes into
  // that memory are visible to the GPU. Receiver only (ib_flush.cc).
  Result<Request*> postFlush(void* data, MrHandle* mr);
  Status test(Request* request, bool* done, int* bytes);

  bool isSend() const { return isSend_; }
  std::vector<uint32_t> qpNumbers() const;
  // Port 0's loopback QP's number; 0 before the first flush.
  uint32_t flushQpNumber() const { return flushQps_.empty() ? 0 : flushQps_[0]->qp_num; }
  IbNetDevice* device() const { return device_; }
  // Sender: bytes posted so far through the QPs of each local port.
  int64_t bytesSentOnPort(int port) const { return bytesOnPort_[port]; }
  Socket control;    // the set-up socket, kept to notice a peer that exits
  std::string peer;  // its address, for messages

 private:
  // One RC QP on port `port`'s CQ, moved to INIT with `access` for the peer.
  Result<ibv_qp*> createQp(int port, int access, const char* what);
  // Moves `qp` (on local port `port`) to RTR and RTS towards QP `destQpn`
  // at the address `remote`.
  Status connectQp(ibv_qp* qp, int port, uint32_t destQpn, const PortAddress& remote);
  PortAddress portAddress(int port) const;
  // The port label ("mlx5_1:1") of the QP numbered `qpn`, for messages.
  std::string portOfQp(uint32_t qpn) const;
  IbDevice& port(int i) const { return *device_->ports[static_cast<size_t>(i)]; }
  Status createFlushQp();
  Status pollOnce(bool* progressed);
  Status pollPort(int port, bool* progressed);
  Status completionError(const ibv_wc& wc) const;
  Status checkPeerAlive();
  Status fail(Status s);

  bool isSend_;
  IbNetDevice* device_;
  int nQps_;
  int nPorts_;
  int remotePorts_ = 1;
  std::vector<ibv_cq*> cqs_;  // one per port
  std::vector<ibv_qp*> qps_;  // QP i on port i % nPorts_
  int64_t bytesOnPort_[kMaxPortsPerDevice] = {};
  // Sender: the FIFO the receiver writes. Receiver: the entries it writes
  // from (its local source buffer) and where the sender's FIFO is.
  std::unique_ptr<FifoEntry[]> fifo_;
  ibv_mr* fifoMr_ = nullptr;
  uint64_t remoteFifo_ = 0;
  uint32_t remoteFifoRkey_ = 0;
  Request requests_[kFifoDepth];
  uint64_t nextSeq_ = 0;
  // Receiver: a flush QP per port (connected to itself), the host word
  // their reads land in (registered on each port), and one request per
  // flush in flight.
  std::vector<ibv_qp*> flushQps_;
  std::unique_ptr<uint64_t> flushLanding_;
  std::vector<ibv_mr*> flushMrs_;
  Request flushRequests_[kFifoDepth];
  uint64_t nextFlush_ = 0;
  int64_t lastPeerCheckNs_ = 0;
  Status error_;  // sticky
};

// The most recent failure the IB network saw on this thread, in words.
std::string& lastError();

// Records `s` as this thread's last error and returns its code.
ncclResult_t report(const Status& s);

}  // namespace weft::transport::ib
