// An IB connection's queues: one CQ per port of the network device, nQps RC
// QPs striped by every message (round robin over the ports), and the FIFO
// region (the sender's is written by the receiver).
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

IbComm::IbComm(bool isSend, IbNetDevice* device, int nQps)
    : isSend_(isSend), device_(device), nQps_(nQps), nPorts_(device->portCount()) {
  for (Request& r : requests_) r.comm = this;
  for (Request& r : flushRequests_) r.comm = this;
}

IbComm::~IbComm() {
  if (isSend_ && nPorts_ * remotePorts_ > 1 && !qps_.empty()) {
    std::string perPort;
    for (int p = 0; p < nPorts_; ++p)
      perPort += strFormat("%s%s %lld", p ? ", " : "", port(p).label().c_str(),
                           static_cast<long long>(bytesOnPort_[p]));
    WEFT_INFO(log::kNet, "NET/IB: connection to %s on %s closed; bytes sent per port: %s", peer.c_str(),
              device_->name.c_str(), perPort.c_str());
  }
  const Verbs* v = verbs(nullptr);
  for (ibv_qp* qp : qps_) (void)v->destroyQp(qp);
  for (ibv_qp* qp : flushQps_) (void)v->destroyQp(qp);
  for (ibv_cq* cq : cqs_) (void)v->destroyCq(cq);
  if (fifoMr_) (void)v->deregMr(fifoMr_);
  for (ibv_mr* mr : flushMrs_) (void)v->deregMr(mr);
}

Result<ibv_qp*> IbComm::createQp(int p, int access, const char* what) {
  const Verbs* v = verbs(nullptr);
  IbDevice& d = port(p);
  ibv_qp_init_attr init{};
  init.send_cq = init.recv_cq = cqs_[static_cast<size_t>(p)];
  init.qp_type = IBV_QPT_RC;
  init.cap.max_send_wr = 2 * kFifoDepth;  // data, or FIFO writes on QP 0, or flush reads
  init.cap.max_recv_wr = kFifoDepth;
  init.cap.max_send_sge = init.cap.max_recv_sge = 1;
  ibv_qp* qp = v->createQp(d.pd, &init);
  if (qp == nullptr)
    return errorStatus(ncclSystemError, "IB: creating %s on %s failed: %s", what, d.label().c_str(),
                       std::strerror(errno));
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = static_cast<uint8_t>(d.port);
  attr.qp_access_flags = static_cast<unsigned>(access);
  const int rc = v->modifyQp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) {
    (void)v->destroyQp(qp);
    return errorStatus(ncclSystemError, "IB: %s (QP %u) on %s: RESET to INIT failed: %s", what, qp->qp_num,
                       d.label().c_str(), std::strerror(rc));
  }
  return qp;
}

Status IbComm::createQueues() {
  const Verbs* v = verbs(nullptr);
  // Completions at most in flight on one port: per request, one per QP,
  // the FIFO write and a flush read; doubled for slack.
  const int depth = kFifoDepth * (nQps_ + 2) * 2;
  for (int p = 0; p < nPorts_; ++p) {
    ibv_cq* cq = v->createCq(port(p).context, depth, nullptr, nullptr, 0);
    if (cq == nullptr)
      return errorStatus(ncclSystemError, "IB: creating a completion queue of %d on %s failed: %s", depth,
                         port(p).label().c_str(), std::strerror(errno));
    cqs_.push_back(cq);
  }
  for (int i = 0; i < nQps_; ++i) {
    const std::string what = strFormat("queue pair %d of %d", i + 1, nQps_);
    WEFT_ASSIGN_OR_RETURN(ibv_qp * qp,
                          createQp(i % nPorts_, IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE, what.c_str()));
    qps_.push_back(qp);
  }
  fifo_.reset(new FifoEntry[kFifoDepth]());
  // The sender's FIFO is written remotely; the receiver's copy is the
  // source of its RDMA writes (local access only). Both on port 0, where
  // QP 0 (which carries the FIFO writes) is on either side.
  const int access = isSend_ ? IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE : IBV_ACCESS_LOCAL_WRITE;
  fifoMr_ = v->regMr(port(0).pd, fifo_.get(), sizeof(FifoEntry) * kFifoDepth, access);
  if (fifoMr_ == nullptr)
    return errorStatus(ncclSystemError, "IB: registering the FIFO on %s failed: %s", port(0).label().c_str(),
                       std::strerror(errno));
  return okStatus();
}

PortAddress IbComm::portAddress(int p) const {
  const IbDevice& d = port(p);
  PortAddress a{};
  a.lid = d.lid;
  a.ethernet = d.ethernet ? 1 : 0;
  a.mtu = static_cast<uint8_t>(d.mtu);
  a.gid = d.gid;
  return a;
}

QpInfo IbComm::localInfo(uint64_t cookie) const {
  QpInfo info{};
  info.cookie = cookie;
  info.nQps = nQps_;
  info.nPorts = nPorts_;
  for (int i = 0; i < nQps_; ++i) info.qpn[i] = qps_[static_cast<size_t>(i)]->qp_num;
  for (int p = 0; p < nPorts_; ++p) info.ports[p] = portAddress(p);
  info.fifoAddr = reinterpret_cast<uintptr_t>(fifo_.get());
  info.fifoRkey = fifoMr_->rkey;
  return info;
}

std::vector<uint32_t> IbComm::qpNumbers() const {
  std::vector<uint32_t> out;
  for (const ibv_qp* qp : qps_) out.push_back(qp->qp_num);
  return out;
}

std::string IbComm::portOfQp(uint32_t qpn) const {
  for (size_t i = 0; i < qps_.size(); ++i)
    if (qps_[i]->qp_num == qpn) return port(static_cast<int>(i) % nPorts_).label();
  for (size_t p = 0; p < flushQps_.size(); ++p)
    if (flushQps_[p]->qp_num == qpn) return port(static_cast<int>(p)).label();
  return device_->label();
}

namespace {

// The address vector of the peer: a LID on InfiniBand, a GID (with the
// traffic class) on RoCE.
ibv_ah_attr peerAddress(const IbDevice& d, const PortAddress& remote) {
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

Status IbComm::connectQp(ibv_qp* qp, int p, uint32_t destQpn, const PortAddress& remote) {
  const Verbs* v = verbs(nullptr);
  const IbDevice& d = port(p);
  ibv_qp_attr attr{};
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = std::min(d.mtu, static_cast<ibv_mtu>(remote.mtu));
  attr.dest_qp_num = destQpn;
  attr.rq_psn = 0;
  attr.max_dest_rd_atomic = 1;
  attr.min_rnr_timer = 12;
  attr.ah_attr = peerAddress(d, remote);
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
                       d.label().c_str(), peer.c_str(), destQpn, std::strerror(rc));
  return okStatus();
}

Status IbComm::connectQps(const QpInfo& remote) {
  if (remote.nQps != nQps_)
    return errorStatus(ncclInvalidUsage,
                       "IB: the peer %s uses %d queue pairs per connection, this side %d (set "
                       "NCCL_IB_QPS_PER_CONNECTION alike on every rank)",
                       peer.c_str(), remote.nQps, nQps_);
  if (remote.nPorts < 1 || remote.nPorts > kMaxPortsPerDevice)
    return errorStatus(ncclRemoteError, "IB: the peer %s describes a network device of %d ports (1 to %d expected)",
                       peer.c_str(), remote.nPorts, kMaxPortsPerDevice);
  remotePorts_ = remote.nPorts;
  // QP i: local port i % nPorts_, the peer's QP i on its port i % remote.nPorts.
  for (int i = 0; i < nQps_; ++i)
    WEFT_RETURN_IF_ERROR(
        connectQp(qps_[static_cast<size_t>(i)], i % nPorts_, remote.qpn[i], remote.ports[i % remote.nPorts]));
  remoteFifo_ = remote.fifoAddr;
  remoteFifoRkey_ = remote.fifoRkey;
  return okStatus();
}

}  // namespace weft::transport::ib
