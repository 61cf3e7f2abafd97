// The emulated devices, memory regions and queue set-up (see
// ib_emulation_world.h for the shared state).
#include "transport/net/ib/ib_emulation.h"
#include "transport/net/ib/ib_emulation_world.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "common/params.h"

namespace weft::transport::ib::emuworld {
namespace {

EmuDevice* deviceOf(ibv_context* c) { return reinterpret_cast<EmuContext*>(c)->device; }
uint16_t lidOf(const EmuDevice* d) { return static_cast<uint16_t>(d->index + 1); }
uint64_t guidOf(const EmuDevice* d) { return 0x5765667400000000ull + static_cast<uint64_t>(d->index); }

void flush(EmuQp* q) {
  for (const HeldSend& h : q->held)
    complete(q->qp.send_cq, h.wr.wr_id, IBV_WC_WR_FLUSH_ERR, sendOpcode(h.wr.opcode), q->qp.qp_num);
  q->held.clear();
  for (const ibv_recv_wr& r : q->recvs)
    complete(q->qp.recv_cq, r.wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, q->qp.qp_num);
  q->recvs.clear();
  q->recvSges.clear();
}

}  // namespace

void toError(EmuQp* q) {
  q->qp.state = IBV_QPS_ERR;
  flush(q);
}

World& world() {
  static World w;
  return w;
}

uint16_t portLid(ibv_context* context) { return lidOf(deviceOf(context)); }
int deviceIndex(ibv_context* context) { return deviceOf(context)->index; }

const EmuMr* regionFor(World& w, uint32_t key, const ibv_pd* pd, uint64_t addr, uint64_t len, int access) {
  auto it = w.regions.find(key);
  if (it == w.regions.end() || it->second->mr.pd != pd) return nullptr;
  const EmuMr* r = it->second;
  const uint64_t base = reinterpret_cast<uintptr_t>(r->mr.addr);
  if (addr < base || addr + len > base + r->mr.length || addr + len < addr) return nullptr;
  return (r->access & access) == access ? r : nullptr;
}

char* hostAddress(World& w, uint32_t key, uint64_t addr) {
  const EmuMr* r = w.regions.at(key);
  return r->host + (addr - reinterpret_cast<uintptr_t>(r->mr.addr));
}

void complete(ibv_cq* cq, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t qpn) {
  ibv_wc wc{};
  wc.wr_id = wrId;
  wc.status = status;
  wc.opcode = opcode;
  wc.qp_num = qpn;
  emuCq(cq)->done.push_back(wc);
}

}  // namespace weft::transport::ib::emuworld

namespace weft::transport::ib {
namespace {

using namespace emuworld;  // NOLINT: the emulation's own internals

// ---- devices ---------------------------------------------------------------

ibv_device** getDeviceList(int* count) {
  World& w = world();
  if (count) *count = static_cast<int>(w.devices.size());
  return w.deviceList.data();
}
void freeDeviceList(ibv_device**) {}
const char* getDeviceName(ibv_device* d) { return d->name; }
std::string devicePciPath(ibv_device* d) { return reinterpret_cast<EmuDevice*>(d)->pciPath; }

// WEFT_IB_EMULATE_PCI split at commas: entry i is emu<i>'s PCI path.
std::vector<std::string> configuredPciPaths() {
  std::vector<std::string> out;
  const std::string spec = param::ibEmulatePci();
  size_t at = 0;
  while (!spec.empty() && at <= spec.size()) {
    size_t end = spec.find(',', at);
    if (end == std::string::npos) end = spec.size();
    out.push_back(spec.substr(at, end - at));
    at = end + 1;
  }
  return out;
}

ibv_context* openDevice(ibv_device* d) {
  auto* c = new EmuContext{};
  c->context.device = d;
  c->device = reinterpret_cast<EmuDevice*>(d);
  return &c->context;
}
int closeDevice(ibv_context* c) {
  delete reinterpret_cast<EmuContext*>(c);
  return 0;
}

int queryDevice(ibv_context* c, ibv_device_attr* attr) {
  std::memset(attr, 0, sizeof(*attr));
  attr->node_guid = guidOf(deviceOf(c));
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = 1 << 14;
  attr->max_sge = 30;
  attr->max_cq = 1 << 16;
  attr->max_cqe = 1 << 22;
  attr->max_mr_size = ~0ull;
  attr->phys_port_cnt = 1;
  return 0;
}

int queryPort(ibv_context* c, uint8_t port, ibv_port_attr* attr) {
  if (port != 1) return EINVAL;
  std::memset(attr, 0, sizeof(ibv_port_attr));
  attr->state = IBV_PORT_ACTIVE;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = IBV_MTU_4096;
  attr->gid_tbl_len = 1;
  attr->lid = lidOf(deviceOf(c));
  attr->active_width = 2;   // 4x
  attr->active_speed = 32;  // EDR: 25 Gb/s per lane
  attr->link_layer = IBV_LINK_LAYER_INFINIBAND;
  return 0;
}

int queryGid(ibv_context* c, uint8_t port, int index, ibv_gid* gid) {
  if (port != 1 || index != 0) return EINVAL;
  gid->global.subnet_prefix = htobe64(0xfe80000000000000ull);
  gid->global.interface_id = htobe64(guidOf(deviceOf(c)));
  return 0;
}

// ---- protection domains and memory regions -----------------------------------

ibv_pd* allocPd(ibv_context* c) {
  auto* pd = new ibv_pd{};
  pd->context = c;
  return pd;
}
int deallocPd(ibv_pd* pd) {
  delete pd;
  return 0;
}

bool validAccess(size_t length, int access) {
  const bool remoteWithoutLocal = (access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE);
  return length != 0 && !remoteWithoutLocal;  // the verbs specification's rules
}

// Enters a region under the world's lock; `host` is where its bytes are.
ibv_mr* addRegion(World& w, ibv_pd* pd, void* addr, size_t length, int access, char* host) {
  auto* r = new EmuMr{};
  r->mr.context = pd->context;
  r->mr.pd = pd;
  r->mr.addr = addr;
  r->mr.length = length;
  r->mr.lkey = r->mr.rkey = w.nextKey++;
  r->access = access;
  r->host = host;
  w.regions[r->mr.lkey] = r;
  w.counters.memoryRegistrations += 1;
  w.counters.liveRegions += 1;
  return &r->mr;
}

ibv_mr* regMr(ibv_pd* pd, void* addr, size_t length, int access) {
  if (addr == nullptr || !validAccess(length, access)) {
    errno = EINVAL;
    return nullptr;
  }
  World& w = world();
  Lock lock(w.mutex);
  return addRegion(w, pd, addr, length, access, static_cast<char*>(addr));
}

// The dma-buf is mapped by the emulation itself, as the HCA reaches the
// GPU's memory through the exporter and not through the iova: a test that
// hands an iova naming other memory sees the bytes land in the fd's.
ibv_mr* regDmabufMr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
  World& w = world();
  Lock lock(w.mutex);
  if (w.dmaBuf == emu::DmaBufSupport::kKernelRefuses) {
    errno = EOPNOTSUPP;
    return nullptr;
  }
  if (fd < 0) {
    errno = EBADF;
    return nullptr;
  }
  if (!validAccess(length, access)) {
    errno = EINVAL;
    return nullptr;
  }
  static const uint64_t kPage = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapFrom = offset & ~(kPage - 1);
  const size_t mapBytes = static_cast<size_t>(offset + length - mapFrom);
  void* mapping = mmap(nullptr, mapBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, static_cast<off_t>(mapFrom));
  if (mapping == MAP_FAILED) return nullptr;  // errno from mmap
  ibv_mr* mr =
      addRegion(w, pd, reinterpret_cast<void*>(iova), length, access, static_cast<char*>(mapping) + (offset - mapFrom));
  auto* r = reinterpret_cast<EmuMr*>(mr);
  r->mapping = mapping;
  r->mappingBytes = mapBytes;
  w.counters.dmaBufRegistrations += 1;
  return mr;
}

ibv_mr* regMrIova2(ibv_pd* pd, void* addr, size_t length, uint64_t, unsigned access) {
  return regMr(pd, addr, length, static_cast<int>(access & ~IBV_ACCESS_RELAXED_ORDERING));
}

int deregMr(ibv_mr* mr) {
  World& w = world();
  Lock lock(w.mutex);
  w.regions.erase(mr->lkey);
  w.counters.liveRegions -= 1;
  auto* r = reinterpret_cast<EmuMr*>(mr);
  if (r->mapping) munmap(r->mapping, r->mappingBytes);
  delete r;
  return 0;
}

// ---- completion queues -------------------------------------------------------

ibv_cq* createCq(ibv_context* c, int cqe, void* cqContext, ibv_comp_channel*, int) {
  auto* q = new EmuCq{};
  q->cq.context = c;
  q->cq.cqe = cqe;
  q->cq.cq_context = cqContext;
  return &q->cq;
}
int destroyCq(ibv_cq* cq) {
  delete emuCq(cq);
  return 0;
}

// ---- queue pairs --------------------------------------------------------------

ibv_qp* createQp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  if (attr->qp_type != IBV_QPT_RC || attr->send_cq == nullptr || attr->recv_cq == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  World& w = world();
  Lock lock(w.mutex);
  auto* q = new EmuQp{};
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_context = attr->qp_context;
  q->qp.qp_type = IBV_QPT_RC;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_num = w.nextQpn++;
  q->sigAll = attr->sq_sig_all != 0;
  q->maxRecv = attr->cap.max_recv_wr;
  w.qps[q->qp.qp_num] = q;
  w.counters.liveQps += 1;
  return &q->qp;
}

int destroyQp(ibv_qp* qp) {
  World& w = world();
  Lock lock(w.mutex);
  w.qps.erase(qp->qp_num);
  w.counters.liveQps -= 1;
  delete emuQp(qp);
  return 0;
}

bool hasAll(int mask, int required) { return (mask & required) == required; }

// The attributes each transition needs, as the verbs specification lists them.
int modifyQp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  World& w = world();
  Lock lock(w.mutex);
  EmuQp* q = emuQp(qp);
  if (!(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state from = qp->state, to = attr->qp_state;
  if (to == IBV_QPS_ERR) {
    toError(q);
    return 0;
  }
  if (to == IBV_QPS_RESET) {
    flush(q);
    qp->state = IBV_QPS_RESET;
    return 0;
  }
  if (from == IBV_QPS_RESET && to == IBV_QPS_INIT) {
    if (!hasAll(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) || attr->port_num != 1) return EINVAL;
    q->access = attr->qp_access_flags;
    q->port = attr->port_num;
  } else if (from == IBV_QPS_INIT && to == IBV_QPS_RTR) {
    if (!hasAll(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                          IBV_QP_MIN_RNR_TIMER))
      return EINVAL;
    q->destQpn = attr->dest_qp_num;
    q->destLid = attr->ah_attr.dlid;
  } else if (from == IBV_QPS_RTR && to == IBV_QPS_RTS) {
    if (!hasAll(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
      return EINVAL;
    q->timeout = attr->timeout;
    q->retryCount = attr->retry_cnt;
  } else {
    return EINVAL;
  }
  qp->state = to;
  return 0;
}

int postRecv(ibv_qp* qp, ibv_recv_wr* wr, ibv_recv_wr** bad) {
  World& w = world();
  Lock lock(w.mutex);
  EmuQp* q = emuQp(qp);
  for (; wr != nullptr; wr = wr->next) {
    if (qp->state == IBV_QPS_RESET || q->recvs.size() >= q->maxRecv || wr->num_sge < 0) {
      *bad = wr;
      return qp->state == IBV_QPS_RESET ? EINVAL : ENOMEM;
    }
    if (qp->state == IBV_QPS_ERR) {
      complete(qp->recv_cq, wr->wr_id, IBV_WC_WR_FLUSH_ERR, IBV_WC_RECV, qp->qp_num);
      continue;
    }
    q->recvs.push_back(*wr);
    q->recvSges.emplace_back(wr->sg_list, wr->sg_list + wr->num_sge);
  }
  return 0;
}

}  // namespace

const Verbs* emulationVerbs(int devices) {
  static std::once_flag once;
  static Verbs table{};
  std::call_once(once, [devices] {
    World& w = world();
    Lock lock(w.mutex);
    const std::vector<std::string> pciPaths = configuredPciPaths();
    for (int i = 0; i < devices; ++i) {
      auto d = std::make_unique<EmuDevice>();
      d->index = i;
      if (i < static_cast<int>(pciPaths.size())) d->pciPath = pciPaths[static_cast<size_t>(i)];
      std::snprintf(d->device.name, sizeof(d->device.name), "emu%d", i);
      d->device.node_type = IBV_NODE_CA;
      d->device.transport_type = IBV_TRANSPORT_IB;
      w.deviceList.push_back(&d->device);
      w.devices.push_back(std::move(d));
    }
    w.deviceList.push_back(nullptr);
    table = Verbs{"emulation",
                  getDeviceList,
                  freeDeviceList,
                  getDeviceName,
                  openDevice,
                  closeDevice,
                  queryDevice,
                  queryPort,
                  queryGid,
                  allocPd,
                  deallocPd,
                  regMr,
                  deregMr,
                  createCq,
                  destroyCq,
                  createQp,
                  modifyQp,
                  destroyQp,
                  emuworld::postSend,
                  postRecv,
                  emuworld::pollCq,
                  emuworld::statusStr,
                  regMrIova2,
                  regDmabufMr,
                  devicePciPath};
  });
  return &table;
}

namespace emu {

void setDmaBufSupport(DmaBufSupport support) {
  World& w = world();
  Lock lock(w.mutex);
  w.dmaBuf = support;
  // The table is the emulation's own: a test stands for an older rdma-core
  // by taking the verb out of it (nothing reads the slot concurrently then).
  const_cast<Verbs*>(emulationVerbs(0))->regDmabufMr = support == DmaBufSupport::kVerbAbsent ? nullptr : regDmabufMr;
}

}  // namespace emu
}  // namespace weft::transport::ib
