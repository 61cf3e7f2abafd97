// The emulation's internals, shared by its two files: ib_emulation.cc (devices,
// memory regions, queue set-up) and ib_emulation_wire.cc (moving requests).
// The state is one process-wide world under one mutex: every verb takes it,
// so threads standing for different hosts see one consistent fabric. Objects
// embed the verbs.h struct first, so the pointers handed out are real ibv_*
// pointers whose public fields (qp_num, lkey, ...) are set.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transport/net/ib/ib_emulation.h"

namespace weft::transport::ib::emuworld {

struct EmuDevice {
  ibv_device device;  // first: handed out as ibv_device*
  int index = 0;
  std::string pciPath;  // from WEFT_IB_EMULATE_PCI; empty: none
};

struct EmuContext {
  ibv_context context;
  EmuDevice* device = nullptr;
};

struct EmuMr {
  ibv_mr mr;  // mr.addr is the address work requests use (the iova)
  int access = 0;
  char* host = nullptr;     // where those bytes are in this process: mr.addr, or the dma-buf's mapping
  void* mapping = nullptr;  // a dma-buf registration's mmap of its fd, unmapped at deregistration
  size_t mappingBytes = 0;
};

struct EmuCq {
  ibv_cq cq;
  std::deque<ibv_wc> done;
};

// A send request held while its destination cannot be reached.
struct HeldSend {
  ibv_send_wr wr;
  std::vector<ibv_sge> sges;
  bool signaled;
};

struct EmuQp {
  ibv_qp qp;
  int access = 0;
  uint8_t port = 0;
  uint32_t destQpn = 0;
  uint16_t destLid = 0;
  uint8_t timeout = 0, retryCount = 0;
  bool sigAll = false;
  uint32_t maxRecv = 0;
  std::deque<ibv_recv_wr> recvs;  // sg_list copied into recvSges
  std::deque<std::vector<ibv_sge>> recvSges;
  std::deque<HeldSend> held;
  int64_t heldSinceNs = 0;
  bool unreachable = false;
};

struct World {
  std::mutex mutex;
  std::vector<std::unique_ptr<EmuDevice>> devices;
  std::vector<ibv_device*> deviceList;  // null-terminated
  std::map<uint32_t, EmuQp*> qps;
  std::map<uint32_t, EmuMr*> regions;  // by key (lkey == rkey)
  uint32_t nextQpn = 0x100, nextKey = 0x1000;
  emu::Counters counters;
  emu::DmaBufSupport dmaBuf = emu::DmaBufSupport::kSupported;
};

using Lock = std::lock_guard<std::mutex>;

inline EmuQp* emuQp(ibv_qp* qp) { return reinterpret_cast<EmuQp*>(qp); }
inline EmuCq* emuCq(ibv_cq* cq) { return reinterpret_cast<EmuCq*>(cq); }

World& world();

// Queues a completion on `cq`.
void complete(ibv_cq* cq, uint64_t wrId, ibv_wc_status status, ibv_wc_opcode opcode, uint32_t qpn);
// Moves `q` to ERR and flushes its receives and held sends.
void toError(EmuQp* q);
// The region `key` names in `pd` if [addr, addr+len) lies inside it and it
// allows `access` (0: local read, always allowed); null otherwise.
const EmuMr* regionFor(World& w, uint32_t key, const ibv_pd* pd, uint64_t addr, uint64_t len, int access);
// Where the bytes at work-request address `addr` of the region `key` are in
// this process (a dma-buf region's iova is not an address here). The region
// must exist: callers checked it with regionFor.
char* hostAddress(World& w, uint32_t key, uint64_t addr);
// The completion opcode of a send-queue request.
inline ibv_wc_opcode sendOpcode(ibv_wr_opcode op) {
  return op == IBV_WR_SEND ? IBV_WC_SEND : op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
}
// The LID of the emulated port behind `context`.
uint16_t portLid(ibv_context* context);
// The index of the emulated device behind `context` (emu<index>).
int deviceIndex(ibv_context* context);

int postSend(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad);
int pollCq(ibv_cq* cq, int entries, ibv_wc* wc);
const char* statusStr(ibv_wc_status status);

}  // namespace weft::transport::ib::emuworld
