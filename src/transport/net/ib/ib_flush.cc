// iflush on the IB network: making a receive into GPU memory visible to the
// GPU. The HCA writes received bytes into GPU memory over PCIe; a kernel
// that reads them after seeing the receive complete (through the host) could
// still find older bytes, because nothing orders those writes with respect
// to the GPU's reads. A READ issued by the HCA to the same memory returns
// only after the HCA's earlier writes to it have landed (PCIe orders a read
// behind earlier posted writes of the same requester), so its completion is
// the point after which the GPU sees the data. The READ goes through a QP
// connected to itself (loopback: the HCA is both requester and responder)
// and lands 1 byte in a registered host word nobody reads.
#include <cstring>

#include "transport/net/ib/ib_comm.h"

namespace weft::transport::ib {

Status IbComm::createFlushQp() {
  const Verbs* v = verbs(nullptr);
  flushLanding_ = std::make_unique<uint64_t>(0);
  flushMr_ = v->regMr(device_->pd, flushLanding_.get(), sizeof(uint64_t), IBV_ACCESS_LOCAL_WRITE);
  if (flushMr_ == nullptr)
    return errorStatus(ncclSystemError, "IB: registering the flush landing word on %s failed: %s",
                       device_->label().c_str(), std::strerror(errno));
  // The responder side of the loopback is this QP itself: it must allow
  // remote reads of the GPU memory the read names.
  WEFT_ASSIGN_OR_RETURN(flushQp_, createQp(IBV_ACCESS_REMOTE_READ | IBV_ACCESS_LOCAL_WRITE, "the flush queue pair"));
  QpInfo self = localInfo(0);
  return connectQp(flushQp_, flushQp_->qp_num, self);
}

Result<Request*> IbComm::postFlush(void* data, MrEntry* mr) {
  if (!error_.ok()) return error_;
  if (isSend_) return errorStatus(ncclInternalError, "IB: iflush on a send comm (to %s)", peer.c_str());
  if (mr == nullptr || !mr->dmaBuf)
    return errorStatus(ncclInternalError, "IB: iflush of %p, which is not in GPU memory registered through dma-buf",
                       data);
  if (flushQp_ == nullptr) {
    Status made = createFlushQp();
    if (!made.ok()) return fail(made);
  }
  const size_t slot = static_cast<size_t>(nextFlush_ % kFifoDepth);
  Request& r = flushRequests_[slot];
  if (r.used)  // iflush cannot answer "busy": one in flight per receive at most
    return errorStatus(ncclInternalError, "IB: more than %d flushes in flight on the connection from %s", kFifoDepth,
                       peer.c_str());
  ibv_sge sge{reinterpret_cast<uintptr_t>(flushLanding_.get()), 1, flushMr_->lkey};
  ibv_send_wr wr{};
  wr.wr_id = kFlushRead | slot;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = IBV_WR_RDMA_READ;
  wr.send_flags = IBV_SEND_SIGNALED;
  wr.wr.rdma.remote_addr = reinterpret_cast<uintptr_t>(data);
  wr.wr.rdma.rkey = mr->mr->rkey;
  ibv_send_wr* bad = nullptr;
  if (int rc = verbs(nullptr)->postSend(flushQp_, &wr, &bad))
    return fail(errorStatus(ncclSystemError, "IB: posting a flush read on %s QP %u failed: %s",
                            device_->label().c_str(), flushQp_->qp_num, std::strerror(rc)));
  r.used = true;
  r.pending = 1;
  r.bytes = 0;
  nextFlush_ += 1;
  return &r;
}

}  // namespace weft::transport::ib
