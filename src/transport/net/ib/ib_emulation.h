// An in-memory emulation of the verbs the IB network uses, for tests on
// machines without an HCA: devices with one active InfiniBand port each,
// protection domains, memory regions (keys and bounds checked), completion
// queues and RC queue pairs (RESET -> INIT -> RTR -> RTS, RDMA WRITE, WRITE
// WITH IMM, RDMA READ and SEND/RECV, delivered in order per QP), dma-buf
// memory regions (any mmap-able fd, a memfd in tests, stands for the
// dma-buf: the region's bytes are the fd's, reached through the emulation's
// own mapping, never through the iova), reachable from every
// thread of THIS process only: a QP number means nothing in another process.
//
// What it does as a real RC QP would:
//   - a work request executes when posted (the responder's memory is written
//     and its receive completion queued before post_send returns); its own
//     completion is queued if signaled;
//   - a destination QP that does not exist, is not yet RTR, or was made
//     unreachable (emu::makeUnreachable) holds the request and every later
//     one; each retry (at poll time) delivers them once it can, and after
//     4.096 us * 2^timeout * (retry_cnt + 1) the first completes with
//     IBV_WC_RETRY_EXC_ERR, the QP goes to ERR and the rest flush;
//   - a QP in ERR completes every posted and later request with
//     IBV_WC_WR_FLUSH_ERR;
//   - a bad local key or range: IBV_WC_LOC_PROT_ERR; a bad remote key,
//     range or access: IBV_WC_REM_ACCESS_ERR; both QPs go to ERR.
// Where it is stricter than hardware: WRITE_WITH_IMM or SEND to a QP with
// no receive posted fails at once with IBV_WC_RNR_RETRY_EXC_ERR (hardware
// with rnr_retry 7 retries forever), so a receiver that advertises a buffer
// before posting its receive is caught. A WRITE lands in address order and
// its last aligned 8 bytes are stored with release order, so a reader that
// acquire-loads a flag in the last word of what it is written sees the rest.
#pragma once

#include <cstdint>

#include "transport/net/ib/ib_verbs.h"

namespace weft::transport::ib {

// The emulation's table with `devices` devices (emu0, emu1, ...); the
// device count is fixed by the first call. WEFT_IB_EMULATE_PCI gives the
// devices PCI paths (devicePciPath answers with them; none by default), so
// tests can lay out a dual-port NIC (two functions of one PCI device).
const Verbs* emulationVerbs(int devices);

namespace emu {

struct Counters {
  int64_t memoryRegistrations = 0;  // reg_mr calls that succeeded
  int64_t liveRegions = 0;
  int64_t liveQps = 0;
  int64_t writes = 0;               // RDMA WRITE and WRITE_WITH_IMM delivered
  int64_t reads = 0;                // RDMA READ delivered
  int64_t dmaBufRegistrations = 0;  // reg_dmabuf_mr calls that succeeded
  // Bytes of RDMA WRITEs (with or without immediate) delivered, by the
  // index of the requester's device (emu<i>); devices past the array uncounted.
  int64_t bytesWrittenFrom[8] = {};
};
Counters counters();

// Packets to QP `qpn` vanish from now on, as when its host lost power.
void makeUnreachable(uint32_t qpn);

// What the emulated rdma-core and kernel say to dma-buf registration: it
// works; the kernel refuses it (reg_dmabuf_mr fails with EOPNOTSUPP, as a
// kernel or RDMA driver without dma-buf support does); or the library lacks
// the verb (the table's regDmabufMr is null, as rdma-core before v34).
enum class DmaBufSupport { kSupported, kKernelRefuses, kVerbAbsent };
void setDmaBufSupport(DmaBufSupport support);

// Moves `qp` to ERR, as a fatal local error would: its posted receives and
// held sends complete with IBV_WC_WR_FLUSH_ERR.
void forceError(ibv_qp* qp);

}  // namespace emu
}  // namespace weft::transport::ib
