// The IB data path: posting messages and receives, and completing them.
// Memory orders (docs/network.md has the whole picture):
//   receiver: posts its receive on every QP, THEN writes the FIFO entry, so
//             a sender that sees the entry finds the receives in place;
//   sender:   acquire-loads the entry's `seq` (the last word of the entry,
//             which lands last), then reads the buffer it names and writes;
//   the receive completes only when every QP's WRITE WITH IMM completed,
//   and a completion is polled only after the bytes it reports are in
//   memory (the verbs contract; the emulation holds it under its mutex).
#include <endian.h>

#include <cstring>

#include "common/clock.h"
#include "common/params.h"
#include "transport/net/ib/ib_comm.h"

namespace weft::transport::ib {
namespace {

constexpr int64_t kPeerCheckNs = 20 * 1000 * 1000;
constexpr uint64_t kStripeAlign = 128;

// The handle is this device's (one entry per port) and every entry covers
// [data, data+size).
bool covers(const MrHandle* mh, int ports, const void* data, size_t size) {
  if (mh == nullptr || mh->count != ports) return false;
  const uintptr_t at = reinterpret_cast<uintptr_t>(data);
  for (int p = 0; p < ports; ++p)
    if (at < mh->entries[p]->begin || at + size > mh->entries[p]->end) return false;
  return true;
}

bool remoteFault(ibv_wc_status s) {
  return s == IBV_WC_RETRY_EXC_ERR || s == IBV_WC_RNR_RETRY_EXC_ERR || s == IBV_WC_REM_ACCESS_ERR ||
         s == IBV_WC_REM_INV_REQ_ERR || s == IBV_WC_REM_OP_ERR || s == IBV_WC_REM_ABORT_ERR;
}

}  // namespace

Status IbComm::fail(Status s) {
  error_ = s;
  return s;
}

Result<Request*> IbComm::postSend(void* data, size_t size, MrHandle* mr) {
  if (!error_.ok()) return error_;
  const size_t slot = static_cast<size_t>(nextSeq_ % kFifoDepth);
  Request& r = requests_[slot];
  if (r.used) return static_cast<Request*>(nullptr);
  const FifoEntry& e = fifo_[slot];
  // Acquire pairs with the receiver's entry landing with `seq` last: the
  // other fields of the entry are this message's once seq says so.
  if (__atomic_load_n(&e.seq, __ATOMIC_ACQUIRE) != nextSeq_ + 1) {
    WEFT_RETURN_IF_ERROR(checkPeerAlive());  // a receiver that exited will never offer one
    return static_cast<Request*>(nullptr);
  }
  if (size > e.capacity || size > 0x7fffffffu)
    return fail(errorStatus(ncclInternalError,
                            "IB: a message of %zu bytes to %s is larger than the %llu-byte buffer "
                            "the receiver posted",
                            size, peer.c_str(), static_cast<unsigned long long>(e.capacity)));
  if (!covers(mr, nPorts_, data, size))
    return fail(errorStatus(ncclInvalidArgument,
                            "IB: the %zu bytes at %p to send to %s are not in the registration "
                            "passed with them",
                            size, data, peer.c_str()));
  const uint64_t stripe = ((size + nQps_ - 1) / nQps_ + kStripeAlign - 1) / kStripeAlign * kStripeAlign;
  for (int i = 0; i < nQps_; ++i) {
    // QP i is on local port i % nPorts_ and reaches the receiver's port
    // i % remotePorts_: its own key on each side.
    const int local = i % nPorts_;
    const uint64_t offset = std::min<uint64_t>(stripe * i, size);
    ibv_sge sge{reinterpret_cast<uintptr_t>(data) + offset,
                static_cast<uint32_t>(std::min<uint64_t>(stripe, size - offset)), mr->entries[local]->mr->lkey};
    ibv_send_wr wr{};
    wr.wr_id = slot;
    wr.sg_list = &sge;
    wr.num_sge = sge.length > 0 ? 1 : 0;  // every QP carries an immediate, even with no bytes
    wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.imm_data = htobe32(static_cast<uint32_t>(size));
    wr.wr.rdma.remote_addr = e.addr + offset;
    wr.wr.rdma.rkey = e.rkeys[i % remotePorts_];
    ibv_send_wr* bad = nullptr;
    if (int rc = verbs(nullptr)->postSend(qps_[static_cast<size_t>(i)], &wr, &bad))
      return fail(errorStatus(ncclSystemError, "IB: posting a write to %s on %s QP %u failed: %s", peer.c_str(),
                              port(local).label().c_str(), qps_[static_cast<size_t>(i)]->qp_num, std::strerror(rc)));
    bytesOnPort_[local] += sge.length;
  }
  r.used = true;
  r.pending = nQps_;
  r.bytes = static_cast<int64_t>(size);
  nextSeq_ += 1;
  return &r;
}

Result<Request*> IbComm::postRecv(void* data, size_t size, MrHandle* mr) {
  if (!error_.ok()) return error_;
  const size_t slot = static_cast<size_t>(nextSeq_ % kFifoDepth);
  Request& r = requests_[slot];
  if (r.used) return static_cast<Request*>(nullptr);
  if (!covers(mr, nPorts_, data, size))
    return fail(errorStatus(ncclInvalidArgument,
                            "IB: the %zu-byte receive buffer at %p is not in the registration "
                            "passed with it",
                            size, data));
  const Verbs* v = verbs(nullptr);
  for (size_t i = 0; i < qps_.size(); ++i) {
    ibv_recv_wr wr{};
    wr.wr_id = slot;
    ibv_recv_wr* bad = nullptr;
    if (int rc = v->postRecv(qps_[i], &wr, &bad))
      return fail(errorStatus(ncclSystemError, "IB: posting a receive from %s on %s QP %u failed: %s", peer.c_str(),
                              portOfQp(qps_[i]->qp_num).c_str(), qps_[i]->qp_num, std::strerror(rc)));
  }
  // The receives are posted: now the buffer may be offered. Our copy of the
  // entry is the source of the write and is not touched again until this
  // slot's message arrived, by which time the sender has read the entry.
  FifoEntry& e = fifo_[slot];
  e.addr = reinterpret_cast<uintptr_t>(data);
  e.capacity = size;
  for (int p = 0; p < nPorts_; ++p) e.rkeys[p] = mr->entries[p]->mr->rkey;
  e.seq = nextSeq_ + 1;
  ibv_sge sge{reinterpret_cast<uintptr_t>(&e), sizeof(FifoEntry), fifoMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kFifoWrite | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_WRITE;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = remoteFifo_ + slot * sizeof(FifoEntry);
  wr.wr.rdma.rkey = remoteFifoRkey_;
  ibv_send_wr* bad = nullptr;
  if (int rc = v->postSend(qps_[0], &wr, &bad))
    return fail(errorStatus(ncclSystemError, "IB: posting a FIFO write to %s on %s QP %u failed: %s", peer.c_str(),
                            port(0).label().c_str(), qps_[0]->qp_num, std::strerror(rc)));
  r.used = true;
  r.pending = nQps_;
  r.bytes = 0;
  nextSeq_ += 1;
  return &r;
}

Status IbComm::completionError(const ibv_wc& wc) const {
  const Verbs* v = verbs(nullptr);
  std::string hint;
  if (wc.status == IBV_WC_RETRY_EXC_ERR) {
    const double boundSec = 4.096e-6 * static_cast<double>(1ull << param::ibTimeout()) * (param::ibRetryCnt() + 1);
    hint = strFormat(
        "; the peer did not acknowledge within %.3g s (NCCL_IB_TIMEOUT=%lld, NCCL_IB_RETRY_CNT=%lld): "
        "its process or host is gone or unreachable",
        boundSec, static_cast<long long>(param::ibTimeout()), static_cast<long long>(param::ibRetryCnt()));
  }
  const char* what = (wc.wr_id & kFifoWrite)   ? "offering a buffer to"
                     : (wc.wr_id & kFlushRead) ? "flushing (loopback read) a receive from"
                     : isSend_                 ? "sending to"
                                               : "receiving from";
  return errorStatus(remoteFault(wc.status) ? ncclRemoteError : ncclSystemError,
                     "IB: %s %s failed on %s QP %u: %s (status %d, vendor error 0x%x)%s", what, peer.c_str(),
                     portOfQp(wc.qp_num).c_str(), wc.qp_num, v->wcStatusStr(wc.status), static_cast<int>(wc.status),
                     wc.vendor_err, hint.c_str());
}

Status IbComm::pollOnce(bool* progressed) {
  *progressed = false;
  for (int p = 0; p < nPorts_; ++p) WEFT_RETURN_IF_ERROR(pollPort(p, progressed));
  return okStatus();
}

Status IbComm::pollPort(int p, bool* progressed) {
  ibv_wc wcs[16];
  const int n = verbs(nullptr)->pollCq(cqs_[static_cast<size_t>(p)], 16, wcs);
  if (n < 0)
    return fail(errorStatus(ncclSystemError, "IB: polling the completion queue of the connection to %s on %s failed",
                            peer.c_str(), port(p).label().c_str()));
  *progressed = *progressed || n > 0;
  for (int i = 0; i < n; ++i) {
    const ibv_wc& wc = wcs[i];
    if (wc.status != IBV_WC_SUCCESS) return fail(completionError(wc));
    if (wc.wr_id & kFifoWrite) continue;  // the FIFO write landed: nothing waits on it
    if (wc.wr_id & kFlushRead) {
      flushRequests_[wc.wr_id % kFifoDepth].pending -= 1;
      continue;
    }
    Request& r = requests_[wc.wr_id % kFifoDepth];
    if (!isSend_) r.bytes = be32toh(wc.imm_data);
    r.pending -= 1;
  }
  return okStatus();
}

// A peer process that exits closes the set-up socket: fail then, not after
// the transport's retries (and a receiver with nothing to send would never
// see a retry error at all).
Status IbComm::checkPeerAlive() {
  const int64_t now = nowNs();
  if (now - lastPeerCheckNs_ < kPeerCheckNs) return okStatus();
  lastPeerCheckNs_ = now;
  char byte = 0;
  Result<size_t> got = control.recvSome(&byte, 1);
  if (got.ok()) return okStatus();
  return fail(errorStatus(ncclRemoteError,
                          "IB: the peer %s of the connection on %s closed it (%s): its process exited "
                          "or it closed its communicator",
                          peer.c_str(), device_->label().c_str(), got.status().message().c_str()));
}

Status IbComm::test(Request* request, bool* done, int* bytes) {
  if (!error_.ok()) return error_;
  bool progressed = false;
  WEFT_RETURN_IF_ERROR(pollOnce(&progressed));
  *done = request->pending == 0;
  if (*done) {
    if (bytes) *bytes = static_cast<int>(request->bytes);
    request->used = false;
    return okStatus();
  }
  return progressed ? okStatus() : checkPeerAlive();
}

}  // namespace weft::transport::ib
