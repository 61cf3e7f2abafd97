// The emulated wire: posting sends, retrying held ones, polling completions,
// and the test hooks. Requests execute under the world's mutex, so a
// completion popped by poll_cq (which takes the same mutex) happens after
// every byte its request wrote.
#include <algorithm>
#include <cstring>

#include "common/clock.h"
#include "transport/net/ib/ib_emulation.h"
#include "transport/net/ib/ib_emulation_world.h"

namespace weft::transport::ib::emuworld {
namespace {

enum class Outcome { kDone, kUnreachable };

int64_t total(const HeldSend& h) {
  int64_t bytes = 0;
  for (const ibv_sge& s : h.sges) bytes += s.length;
  return bytes;
}

// The QP `q` is connected to, if a packet from `q` would reach it now.
EmuQp* peerOf(World& w, EmuQp* q) {
  auto it = w.qps.find(q->destQpn);
  if (it == w.qps.end()) return nullptr;
  EmuQp* d = it->second;
  const bool listening = d->qp.state == IBV_QPS_RTR || d->qp.state == IBV_QPS_RTS;
  if (d->unreachable || !listening || q->destLid != portLid(d->qp.context) || d->destQpn != q->qp.qp_num)
    return nullptr;
  return d;
}

// Copies the gathered bytes to `dst` in address order; the last 8 bytes, when
// they form an aligned word, with release order (see ib_emulation.h). The
// local regions were checked: their bytes are found through hostAddress.
void writeOrdered(World& w, char* dst, const HeldSend& h) {
  const int64_t bytes = total(h);
  const bool tailWord = bytes >= 8 && (reinterpret_cast<uintptr_t>(dst + bytes) % 8) == 0;
  const int64_t body = tailWord ? bytes - 8 : bytes;
  int64_t at = 0;
  uint64_t tail = 0;
  for (const ibv_sge& s : h.sges) {
    const char* src = s.length > 0 ? hostAddress(w, s.lkey, s.addr) : nullptr;
    for (int64_t done = 0; done < s.length;) {
      const int64_t n = at < body ? std::min<int64_t>(s.length - done, body - at) : 1;
      if (at < body)
        std::memcpy(dst + at, src + done, static_cast<size_t>(n));
      else
        std::memcpy(reinterpret_cast<char*>(&tail) + (at - body), src + done, 1);
      at += n;
      done += n;
    }
  }
  if (tailWord) __atomic_store_n(reinterpret_cast<uint64_t*>(dst + body), tail, __ATOMIC_RELEASE);
}

void fail(EmuQp* q, const HeldSend& h, ibv_wc_status status, EmuQp* alsoBroken = nullptr) {
  complete(q->qp.send_cq, h.wr.wr_id, status, sendOpcode(h.wr.opcode), q->qp.qp_num);
  toError(q);
  if (alsoBroken) toError(alsoBroken);
}

// Consumes the responder's oldest receive and reports it done.
void completeReceive(EmuQp* d, EmuQp* from, ibv_wc_opcode opcode, int64_t bytes, const ibv_send_wr& wr) {
  ibv_wc wc{};
  wc.wr_id = d->recvs.front().wr_id;
  wc.status = IBV_WC_SUCCESS;
  wc.opcode = opcode;
  wc.byte_len = static_cast<uint32_t>(bytes);
  wc.qp_num = d->qp.qp_num;
  wc.src_qp = from->qp.qp_num;
  if (wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) {
    wc.wc_flags = IBV_WC_WITH_IMM;
    wc.imm_data = wr.imm_data;
  }
  d->recvs.pop_front();
  d->recvSges.pop_front();
  emuCq(d->qp.recv_cq)->done.push_back(wc);
}

// SEND: scatters into the responder's oldest receive.
bool deliverSend(World& w, EmuQp* q, EmuQp* d, const HeldSend& h) {
  const std::vector<ibv_sge>& into = d->recvSges.front();
  int64_t capacity = 0;
  bool writable = true;
  for (const ibv_sge& s : into) {
    writable = writable && regionFor(w, s.lkey, d->qp.pd, s.addr, s.length, IBV_ACCESS_LOCAL_WRITE) != nullptr;
    capacity += s.length;
  }
  if (!writable || capacity < total(h)) {
    complete(d->qp.recv_cq, d->recvs.front().wr_id, IBV_WC_LOC_LEN_ERR, IBV_WC_RECV, d->qp.qp_num);
    d->recvs.pop_front();
    d->recvSges.pop_front();
    fail(q, h, IBV_WC_REM_INV_REQ_ERR, d);
    return false;
  }
  std::vector<char> bytes(static_cast<size_t>(total(h)));
  int64_t at = 0;
  for (const ibv_sge& s : h.sges) {
    if (s.length > 0) std::memcpy(bytes.data() + at, hostAddress(w, s.lkey, s.addr), s.length);
    at += s.length;
  }
  at = 0;
  for (const ibv_sge& s : into) {
    const int64_t n = std::min<int64_t>(s.length, total(h) - at);
    if (n > 0) std::memcpy(hostAddress(w, s.lkey, s.addr), bytes.data() + at, static_cast<size_t>(n));
    at += n > 0 ? n : 0;
  }
  completeReceive(d, q, IBV_WC_RECV, total(h), h.wr);
  return true;
}

// WRITE and WRITE_WITH_IMM: into the region the remote key names.
bool deliverWrite(World& w, EmuQp* q, EmuQp* d, const HeldSend& h) {
  const uint64_t addr = h.wr.wr.rdma.remote_addr;
  const bool allowed = (d->access & IBV_ACCESS_REMOTE_WRITE) != 0;
  if (!allowed || !regionFor(w, h.wr.wr.rdma.rkey, d->qp.pd, addr, total(h), IBV_ACCESS_REMOTE_WRITE)) {
    fail(q, h, IBV_WC_REM_ACCESS_ERR, d);
    return false;
  }
  writeOrdered(w, hostAddress(w, h.wr.wr.rdma.rkey, addr), h);
  w.counters.writes += 1;
  const int from = deviceIndex(q->qp.context);
  if (from < 8) w.counters.bytesWrittenFrom[from] += static_cast<int64_t>(total(h));
  if (h.wr.opcode == IBV_WR_RDMA_WRITE_WITH_IMM) completeReceive(d, q, IBV_WC_RECV_RDMA_WITH_IMM, total(h), h.wr);
  return true;
}

// READ: from the region the remote key names into the local gather list,
// which must be locally writable.
bool deliverRead(World& w, EmuQp* q, EmuQp* d, const HeldSend& h) {
  const uint64_t addr = h.wr.wr.rdma.remote_addr;
  const bool allowed = (d->access & IBV_ACCESS_REMOTE_READ) != 0;
  if (!allowed || !regionFor(w, h.wr.wr.rdma.rkey, d->qp.pd, addr, total(h), IBV_ACCESS_REMOTE_READ)) {
    fail(q, h, IBV_WC_REM_ACCESS_ERR, d);
    return false;
  }
  for (const ibv_sge& s : h.sges) {
    if (s.length > 0 && !regionFor(w, s.lkey, q->qp.pd, s.addr, s.length, IBV_ACCESS_LOCAL_WRITE)) {
      fail(q, h, IBV_WC_LOC_PROT_ERR);
      return false;
    }
  }
  const char* from = hostAddress(w, h.wr.wr.rdma.rkey, addr);
  for (const ibv_sge& s : h.sges) {
    if (s.length > 0) std::memcpy(hostAddress(w, s.lkey, s.addr), from, s.length);
    from += s.length;
  }
  w.counters.reads += 1;
  return true;
}

// A request held while its peer was unreachable may find a local region
// gone by the time it is delivered: a local protection error, as hardware.
bool localRegionsPresent(World& w, const EmuQp* q, const HeldSend& h) {
  for (const ibv_sge& s : h.sges)
    if (s.length > 0 && regionFor(w, s.lkey, q->qp.pd, s.addr, s.length, 0) == nullptr) return false;
  return true;
}

Outcome execute(World& w, EmuQp* q, const HeldSend& h) {
  EmuQp* d = peerOf(w, q);
  if (d == nullptr) return Outcome::kUnreachable;
  if (!localRegionsPresent(w, q, h)) {
    fail(q, h, IBV_WC_LOC_PROT_ERR);
    return Outcome::kDone;
  }
  if (h.wr.opcode == IBV_WR_RDMA_READ) {
    if (deliverRead(w, q, d, h) && h.signaled)
      complete(q->qp.send_cq, h.wr.wr_id, IBV_WC_SUCCESS, IBV_WC_RDMA_READ, q->qp.qp_num);
    return Outcome::kDone;
  }
  const bool needsReceive = h.wr.opcode != IBV_WR_RDMA_WRITE;
  if (needsReceive && d->recvs.empty()) {
    fail(q, h, IBV_WC_RNR_RETRY_EXC_ERR);  // stricter than hardware: see ib_emulation.h
    return Outcome::kDone;
  }
  const bool ok = h.wr.opcode == IBV_WR_SEND ? deliverSend(w, q, d, h) : deliverWrite(w, q, d, h);
  if (ok && h.signaled) complete(q->qp.send_cq, h.wr.wr_id, IBV_WC_SUCCESS, sendOpcode(h.wr.opcode), q->qp.qp_num);
  return Outcome::kDone;
}

// How long a held request is retried: the local ACK timeout, 4.096 us *
// 2^timeout (0: forever), once and then retry_cnt more times.
int64_t retryBoundNs(const EmuQp* q) {
  if (q->timeout == 0) return -1;
  return 4096ll * (1ll << q->timeout) * (q->retryCount + 1);
}

void retryHeld(World& w, EmuQp* q) {
  while (!q->held.empty() && execute(w, q, q->held.front()) == Outcome::kDone) {
    q->held.pop_front();
    q->heldSinceNs = nowNs();  // a request got through: the next one's timer starts now
    if (q->qp.state == IBV_QPS_ERR) return;
  }
  const int64_t bound = retryBoundNs(q);
  if (!q->held.empty() && bound >= 0 && nowNs() - q->heldSinceNs >= bound) {
    HeldSend first = q->held.front();
    q->held.pop_front();
    fail(q, first, IBV_WC_RETRY_EXC_ERR);
  }
}

bool supported(ibv_wr_opcode op) {
  return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM || op == IBV_WR_SEND || op == IBV_WR_RDMA_READ;
}

}  // namespace

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) {
  World& w = world();
  Lock lock(w.mutex);
  EmuQp* q = emuQp(qp);
  for (; wr != nullptr; wr = wr->next) {
    if ((qp->state != IBV_QPS_RTS && qp->state != IBV_QPS_ERR) || !supported(wr->opcode) || wr->num_sge < 0) {
      *bad = wr;
      return EINVAL;
    }
    HeldSend h{*wr, std::vector<ibv_sge>(wr->sg_list, wr->sg_list + wr->num_sge),
               q->sigAll || (wr->send_flags & IBV_SEND_SIGNALED) != 0};
    h.wr.next = nullptr;
    h.wr.sg_list = nullptr;
    if (qp->state == IBV_QPS_ERR) {
      complete(qp->send_cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, sendOpcode(wr->opcode), qp->qp_num);
      continue;
    }
    bool localOk = true;
    for (const ibv_sge& s : h.sges) localOk = localOk && regionFor(w, s.lkey, qp->pd, s.addr, s.length, 0) != nullptr;
    if (!localOk) {
      fail(q, h, IBV_WC_LOC_PROT_ERR);
      continue;
    }
    // In order per QP: behind a held request, every request waits.
    if (q->held.empty() && execute(w, q, h) == Outcome::kDone) continue;
    if (q->held.empty()) q->heldSinceNs = nowNs();
    q->held.push_back(std::move(h));
  }
  return 0;
}

int pollCq(ibv_cq* cq, int entries, ibv_wc* wc) {
  World& w = world();
  Lock lock(w.mutex);
  for (auto& [qpn, q] : w.qps)
    if (q->qp.send_cq == cq && !q->held.empty()) retryHeld(w, q);
  auto& done = emuCq(cq)->done;
  int n = 0;
  for (; n < entries && !done.empty(); ++n) {
    wc[n] = done.front();
    done.pop_front();
  }
  return n;
}

const char* statusStr(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    default: return "unknown";
  }
}

}  // namespace weft::transport::ib::emuworld

namespace weft::transport::ib::emu {

Counters counters() {
  emuworld::World& w = emuworld::world();
  emuworld::Lock lock(w.mutex);
  return w.counters;
}

void makeUnreachable(uint32_t qpn) {
  emuworld::World& w = emuworld::world();
  emuworld::Lock lock(w.mutex);
  auto it = w.qps.find(qpn);
  if (it != w.qps.end()) it->second->unreachable = true;
}

void forceError(ibv_qp* qp) {
  emuworld::World& w = emuworld::world();
  emuworld::Lock lock(w.mutex);
  emuworld::toError(emuworld::emuQp(qp));
}

}  // namespace weft::transport::ib::emu
