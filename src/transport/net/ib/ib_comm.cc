// An IB connection's queues: one CQ for the comm, nQps RC QPs striped by
// every message, and on the sender the FIFO region the receiver writes.
#include "transport/net/ib/ib_comm.h"

#include <cstring>

#include "common/log.h"
#include "common/params.h"

namespace weft::transport::ib {

std::string& lastError() {
  thread_local std::string text;
  return text;
}

ncclResult_t report(const Status& s) {
  lastError() = s.message();
  WEFT_INFO(log::kNet, "IB network: %s", s.message().c_str());
  return s.code();
}

IbComm::IbComm(bool isSend, IbDevice* device, int nQps) : isSend_(isSend), device_(device), nQps_(nQps) {
  for (Request& r : requests_) r.comm = this;
  for (Request& r : flushRequests_) r.comm = this;
}

IbComm::~IbComm() {
  const Verbs* v = verbs(nullptr);
  for (ibv_qp* qp : qps_) (void)v->destroyQp(qp);
  if (flushQp_) (void)v->destroyQp(flushQp_);
  if (cq_) (void)v->destroyCq(cq_);
  if (fifoMr_) (void)v->deregMr(fifoMr_);
  if (flushMr_) (void)v->deregMr(flushMr_);
}

Result<ibv_qp*> IbComm::createQp(int access, const char* what) {
  const Verbs* v = verbs(nullptr);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cq_;
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 2 * kFifoDepth;  // data, or FIFO writes on QP 0, or flush reads
  init.cap.max_recv_wr = kFifoDepth;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = v->createQp(device_->pd, &init);
  if (qp == nullptr)
    return errorStatus(ncclSystemError, "IB: creating %s on %s failed: %s", what, device_->label().c_str(),
                       std::strerror(errno));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(device_->port);
  attr.qp_access_flags = static_cast<unsigned>(access);
  const int rc = v->modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    (void)v->destroyQp(qp);
    return errorStatus(ncclSystemError, "IB: %s (QP %u) on %s: RESET to INIT failed: %s", what, qp->qp_num,
                       device_->label().c_str(), std::strerror(rc));
  }
  return qp;
}

Status IbComm::createQueues() {
  const Verbs* v = verbs(nullptr);
  // Completions at most in flight: per request, one per QP, the FIFO write
  // and a flush read; doubled for slack.
  const int depth = kFifoDepth * (nQps_ + 2) * 2;
  cq_ = v->createCq(device_->context, depth, nullptr, nullptr, 0);
  if (cq_ == nullptr)
    return errorStatus(ncclSystemError, "IB: creating a completion queue of %d on %s failed: %s", depth,
                       device_->label().c_str(), std::strerror(errno));
  for (int i = 0; i < nQps_; ++i) {
    const std::string what = strFormat("queue pair %d of %d", i + 1, nQps_);
    WEFT_ASSIGN_OR_RETURN(ibv_qp * qp, createQp(IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE, what.c_str()));
    qps_.push_back(qp);
  }
  fifo_.reset(new FifoEntry[kFifoDepth]());
  // The sender's FIFO is written remotely; the receiver's copy is the
  // source of its RDMA writes (local access only).
  const int access = isSend_ ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_LOCAL_WRITE;
  fifoMr_ = v->regMr(device_->pd, fifo_.get(), sizeof(FifoEntry) * kFifoDepth, access);
  if (fifoMr_ == nullptr)
    return errorStatus(ncclSystemError, "IB: registering the FIFO on %s failed: %s", device_->label().c_str(),
                       std::strerror(errno));
  return okStatus();
}

QpInfo IbComm::localInfo(uint64_t cookie) const {
  QpInfo info{};
  info.cookie = cookie;
  info.nQps = nQps_;
  for (int i = 0; i < nQps_; ++i) info.qpn[i] = qps_[static_cast<size_t>(i)]->qp_num;
  info.lid = device_->lid;
  info.ethernet = device_->ethernet ? 1 : 0;
  info.mtu = static_cast<uint8_t>(device_->mtu);
  info.gid = device_->gid;
  info.fifoAddr = reinterpret_cast<uintptr_t>(fifo_.get());
  info.fifoRkey = fifoMr_->rkey;
  return info;
}

std::vector<uint32_t> IbComm::qpNumbers() const {
  std::vector<uint32_t> out;
  for (const ibv_qp* qp : qps_) out.push_back(qp->qp_num);
  return out;
}

namespace {

// The address vector of the peer: a LID on InfiniBand, a GID (with the
// traffic class) on RoCE.
ibv_ah_attr peerAddress(const IbDevice& d, const QpInfo& remote) {
  ibv_ah_attr ah{};
  ah.port_num = static_cast<uint8_t>(d.port);
  ah.sl = static_cast<uint8_t>(param::ibSl());
  ah.dlid = remote.lid;
  if (d.ethernet) {
    ah.is_global = 1;
    ah.grh.dgid = remote.gid;
    ah.grh.sgid_index = static_cast<uint8_t>(d.gidIndex);
    ah.grh.hop_limit = 255;
    ah.grh.traffic_class = static_cast<uint8_t>(param::ibTc());
  }
  return ah;
}

}  // namespace

Status IbComm::connectQp(ibv_qp* qp, uint32_t destQpn, const QpInfo& remote) {
  const Verbs* v = verbs(nullptr);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(device_->mtu, static_cast<ibv_mtu>(remote.mtu));
  attr.dest_qp_num = destQpn;
  attr.rq_psn = 0;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr = peerAddress(*device_, remote);
  int rc = v->modifyQp(qp, &attr,
                       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                           IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc == 0) {
    attr = ibv_qp_attr{};
    attr.qp_state = IBV_QPS_RTS;
    attr.timeout = static_cast<uint8_t>(param::ibTimeout());
    attr.retry_cnt = static_cast<uint8_t>(param::ibRetryCnt());
    attr.rnr_retry = 7;  // the protocol never sends before a receive is posted
    attr.sq_psn = 0;
    attr.max_rd_atomic = 1;
    rc = v->modifyQp(
        qp, &attr,
        IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  }
  if (rc != 0)
    return errorStatus(ncclSystemError, "IB: QP %u on %s towards %s (QP %u): INIT to RTS failed: %s", qp->qp_num,
                       device_->label().c_str(), peer.c_str(), destQpn, std::strerror(rc));
  return okStatus();
}

Status IbComm::connectQps(const QpInfo& remote) {
  if (remote.nQps != nQps_)
    return errorStatus(ncclInvalidUsage,
                       "IB: the peer %s uses %d queue pairs per connection, this side %d (set "
                       "NCCL_IB_QPS_PER_CONNECTION alike on every rank)",
                       peer.c_str(), remote.nQps, nQps_);
  for (int i = 0; i < nQps_; ++i) WEFT_RETURN_IF_ERROR(connectQp(qps_[static_cast<size_t>(i)], remote.qpn[i], remote));
  remoteFifo_ = remote.fifoAddr;
  remoteFifoRkey_ = remote.fifoRkey;
  return okStatus();
}

}  // namespace weft::transport::ib
