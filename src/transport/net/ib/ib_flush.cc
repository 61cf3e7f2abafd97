// iflush on the IB network: making a receive into GPU memory visible to the
// GPU. The HCA writes received bytes into GPU memory over PCIe; a kernel
// that reads them after seeing the receive complete (through the host) could
// still find older bytes, because nothing orders those writes with respect
// to the GPU's reads. A READ issued by the HCA to the same memory returns
// only after the HCA's earlier writes to it have landed (PCIe orders a read
// behind earlier posted writes of the same requester), so its completion is
// the point after which the GPU sees the data. The READ goes through a QP
// connected to itself (loopback: the HCA is both requester and responder)
// and lands 1 byte in a registered host word nobody reads. A merged device
// flushes on each of its ports (each is its own PCIe requester).
#include <cstring>

#include "transport/net/ib/ib_comm.h"

namespace weft::transport::ib {

Status IbComm::createFlushQp() {
  const Verbs* v = verbs(nullptr);
  flushLanding_ = std::make_unique<uint64_t>(0);
  // One loopback QP per port: a merged device's ports are distinct PCI
  // functions, and PCIe orders a read only behind the same requester's writes.
  for (int p = 0; p < nPorts_; ++p) {
    ibv_mr* mr = v->regMr(port(p).pd, flushLanding_.get(), sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE);
    if (mr == nullptr)
      return errorStatus(ncclSystemError, "IB: registering the flush landing word on %s failed: %s",
                         port(p).label().c_str(), std::strerror(errno));
    flushMrs_.push_back(mr);
    // The responder side of the loopback is this QP itself: it must allow
    // remote reads of the GPU memory the read names.
    WEFT_ASSIGN_OR_RETURN(ibv_qp * qp,
                          createQp(p, IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE, "the flush queue pair"));
    flushQps_.push_back(qp);
    WEFT_RETURN_IF_ERROR(connectQp(qp, p, qp->qp_num, portAddress(p)));
  }
  return okStatus();
}

Result<Request*> IbComm::postFlush(void* data, MrHandle* mr) {
  if (!error_.ok()) return error_;
  if (isSend_) return errorStatus(ncclInternalError, "IB: iflush on a send comm (to %s)", peer.c_str());
  if (mr == nullptr || !mr->dmaBuf || mr->count != nPorts_)
    return errorStatus(ncclInternalError,
                       "IB: iflush of %p, which is not in GPU memory registered through dma-buf on this device", data);
  if (static_cast<int>(flushQps_.size()) != nPorts_) {
    Status made = createFlushQp();
    if (!made.ok()) return fail(made);
  }
  const size_t slot = static_cast<size_t>(nextFlush_ % kFifoDepth);
  Request& r = flushRequests_[slot];
  if (r.used)  // iflush cannot answer "busy": one in flight per receive at most
    return errorStatus(ncclInternalError, "IB: more than %d flushes in flight on the connection from %s", kFifoDepth,
                       peer.c_str());
  for (int p = 0; p < nPorts_; ++p) {
    ibv_sge sge{reinterpret_cast<uintptr_t>(flushLanding_.get()), 1, flushMrs_[static_cast<size_t>(p)]->lkey};
    ibv_send_wr wr{};
    wr.wr_id = kFlushRead | slot;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_RDMA_READ;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(data);
    wr.wr.rdma.rkey = mr->entries[p]->mr->rkey;
    ibv_send_wr* bad = nullptr;
    ibv_qp* qp = flushQps_[static_cast<size_t>(p)];
    if (int rc = verbs(nullptr)->postSend(qp, &wr, &bad))
      return fail(errorStatus(ncclSystemError, "IB: posting a flush read on %s QP %u failed: %s",
                              port(p).label().c_str(), qp->qp_num, std::strerror(rc)));
  }
  r.used = true;
  r.pending = nPorts_;
  r.bytes = 0;
  nextFlush_ += 1;
  return &r;
}

}  // namespace weft::transport::ib
