// One IB connection, either end. The receiver tells the sender which buffers
// it has posted through a FIFO in the sender's memory that only the receiver
// writes (RDMA WRITE); the sender writes each message (RDMA WRITE WITH IMM)
// only into a buffer the FIFO offered, and the immediate completes the
// receive. docs/network.md ("The IB network") gives the memory orders.
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
  uint32_t rkey;
  uint32_t pad0;
  uint64_t pad[4];
  uint64_t seq;  // message number + 1; 0: never written
};
static_assert(sizeof(FifoEntry) == 64 && offsetof(FifoEntry, seq) == 56, "FIFO entry layout");

// What each side tells the other over the set-up socket.
struct QpInfo {
  uint64_t cookie;
  uint32_t qpn[kMaxQps];
  int32_t nQps;
  uint16_t lid;
  uint8_t ethernet;
  uint8_t mtu;
  ibv_gid gid;
  uint64_t fifoAddr;  // sender only: its FIFO
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
  IbComm(bool isSend, IbDevice* device, int nQps);
  ~IbComm();
  IbComm(const IbComm&) = delete;
  IbComm& operator=(const IbComm&) = delete;

  // Creates the CQ, the QPs (to INIT) and, on the sender, the FIFO region.
  Status createQueues();
  QpInfo localInfo(uint64_t cookie) const;
  // Moves every QP to RTR and RTS towards the peer `remote` describes.
  Status connectQps(const QpInfo& remote);

  Result<Request*> postSend(void* data, size_t size, MrEntry* mr);
  Result<Request*> postRecv(void* data, size_t size, MrEntry* mr);
  // iflush of a receive into GPU memory (`mr` a dma-buf region): an RDMA
  // READ of 1 byte at `data` through this comm's loopback QP (made at the
  // first flush), whose completion means the HCA's earlier writes into that
  // memory are visible to the GPU. Receiver only (ib_flush.cc).
  Result<Request*> postFlush(void* data, MrEntry* mr);
  Status test(Request* request, bool* done, int* bytes);

  bool isSend() const { return isSend_; }
  std::vector<uint32_t> qpNumbers() const;
  // The loopback QP's number; 0 before the first flush.
  uint32_t flushQpNumber() const { return flushQp_ ? flushQp_->qp_num : 0; }
  IbDevice* device() const { return device_; }
  Socket control;    // the set-up socket, kept to notice a peer that exits
  std::string peer;  // its address, for messages

 private:
  // One RC QP on this comm's CQ, moved to INIT with `access` for the peer.
  Result<ibv_qp*> createQp(int access, const char* what);
  // Moves `qp` to RTR and RTS towards QP `destQpn` at the address in `remote`.
  Status connectQp(ibv_qp* qp, uint32_t destQpn, const QpInfo& remote);
  Status createFlushQp();
  Status pollOnce(bool* progressed);
  Status completionError(const ibv_wc& wc) const;
  Status checkPeerAlive();
  Status fail(Status s);

  bool isSend_;
  IbDevice* device_;
  int nQps_;
  ibv_cq* cq_ = nullptr;
  std::vector<ibv_qp*> qps_;
  // Sender: the FIFO the receiver writes. Receiver: the entries it writes
  // from (its local source buffer) and where the sender's FIFO is.
  std::unique_ptr<FifoEntry[]> fifo_;
  ibv_mr* fifoMr_ = nullptr;
  uint64_t remoteFifo_ = 0;
  uint32_t remoteFifoRkey_ = 0;
  Request requests_[kFifoDepth];
  uint64_t nextSeq_ = 0;
  // Receiver: the flush QP (connected to itself), the host word its reads
  // land in, and one request per flush in flight.
  ibv_qp* flushQp_ = nullptr;
  std::unique_ptr<uint64_t> flushLanding_;
  ibv_mr* flushMr_ = nullptr;
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
