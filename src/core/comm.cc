#include "core/comm.h"

#include "common/params.h"
#include "core/comm_registry.h"
#include "core/cuda_backend.h"
#include "core/direct_peers.h"
#include "core/host_executor.h"
#include "core/profiler.h"
#include "device/oneshot.h"
#include "transport/connection.h"
#include "transport/net/net_link.h"

namespace weft::core {

Comm::Comm() { registerComm(this); }

Comm::~Comm() {
  if (initThread.joinable()) initThread.join();
  executor.reset();  // joins workers before connections go away
  proxy.reset();     // and the proxy, which drives the net connections
  // Peers across the network learn at once that this rank is gone (their
  // proxies fail on the closed connections and stop their kernels): before
  // any CUDA memory is freed, since cudaFree waits for every kernel on the
  // device, and a kernel of another rank on this GPU may be waiting, through
  // a peer, on this rank's links (ranks as threads across virtual nodes).
  for (Channel& channel : channels)
    for (auto* conns : {&channel.send, &channel.recv})
      for (const std::unique_ptr<transport::Connection>& conn : *conns)
        if (conn && conn->netLink != nullptr) conn->netLink->closeNetwork();
  unregisterComm(this);
}

void Channel::rebuildView(int rank) const {
  view_ = buildView(rank);
  viewStale_ = false;
}

device::ChannelView Channel::buildView(int rank) const {
  device::ChannelView v{};
  v.id = id;
  v.rank = rank;
  v.ring = ring;
  if (ring.nranks > 1) {
    v.ringRecv = &recv[static_cast<size_t>(ring.prev)]->end;
    v.ringSend = &send[static_cast<size_t>(ring.next)]->end;
  }
  v.tree = tree;
  if (tree.depth > 0) {
    if (tree.up >= 0) {
      v.treeUpSend = &send[static_cast<size_t>(tree.up)]->end;
      v.treeDownRecv = &recv[static_cast<size_t>(tree.up)]->end;
    }
    for (int i = 0; i < tree.nDown; ++i) {
      v.treeUpRecv[i] = &recv[static_cast<size_t>(tree.down[i])]->end;
      v.treeDownSend[i] = &send[static_cast<size_t>(tree.down[i])]->end;
    }
  }
  if (flatConnected && ring.nranks - 1 <= device::kMaxFlatPeers) {
    for (int peer = 0; peer < ring.nranks; ++peer) {
      if (peer == rank) continue;
      v.flatRecv[v.nFlat] = &recv[static_cast<size_t>(peer)]->end;
      v.flatSend[v.nFlat] = &send[static_cast<size_t>(peer)]->end;
      v.nFlat += 1;
    }
    v.flatOwnAt = rank;  // peers listed in rank order, this rank between them
  }
  if (exchangeConnected && exchangePlan != nullptr) buildExchangeView(rank);
  if (hierConnected && hierPlan != nullptr) buildHierView(rank);
  if (torusConnected && torusPlan != nullptr) buildTorusView(rank);
  v.algos = &algos_;
  return v;
}

void Channel::buildHierView(int rank) const {
  const HierPlan::Place p = hierPlan->placeOf(rank);
  algos_.hier = device::HierView{static_cast<int32_t>(hierPlan->nodes.size()),
                                 static_cast<int32_t>(hierPlan->nodes[0].size()),
                                 p.node,
                                 p.local,
                                 &recv[static_cast<size_t>(p.intraPrev)]->end,
                                 &send[static_cast<size_t>(p.intraNext)]->end,
                                 &recv[static_cast<size_t>(p.interPrev)]->end,
                                 &send[static_cast<size_t>(p.interNext)]->end};
}

// A ring of one rank (a one-row or one-column grid) has no FIFOs.
void Channel::buildTorusView(int rank) const {
  const HierPlan::Place p = torusPlan->placeOf(rank);
  const int rows = static_cast<int>(torusPlan->nodes.size());
  const int cols = static_cast<int>(torusPlan->nodes[0].size());
  auto recvEnd = [&](int peer) { return peer == rank ? nullptr : &recv[static_cast<size_t>(peer)]->end; };
  auto sendEnd = [&](int peer) { return peer == rank ? nullptr : &send[static_cast<size_t>(peer)]->end; };
  algos_.torus = device::HierView{rows,
                                  cols,
                                  p.node,
                                  p.local,
                                  recvEnd(p.intraPrev),
                                  sendEnd(p.intraNext),
                                  recvEnd(p.interPrev),
                                  sendEnd(p.interNext)};
}

// Per slot the FIFOs to the partner (or the relay between us), and the
// directions this rank forwards for others.
void Channel::buildExchangeView(int rank) const {
  const ExchangePlan& plan = *exchangePlan;
  device::ExchangeView& ex = algos_.exchange;
  ex = device::ExchangeView{};
  ex.nranks = static_cast<int32_t>(plan.physical.size());
  ex.logical = plan.logical[static_cast<size_t>(rank)];
  ex.physical = plan.physical.data();
  for (int slot = 0; slot < device::kExchangeSlots; ++slot) {
    const int hop = plan.hopRank(ex.logical, slot);
    if (hop < 0) continue;
    ex.send[slot] = &send[static_cast<size_t>(hop)]->end;
    ex.recv[slot] = &recv[static_cast<size_t>(hop)]->end;
  }
  for (const RelayHop& hop : plan.relays) {
    if (hop.via != rank || ex.nRelays == device::kMaxRelayDuties) continue;
    const int from = plan.physical[static_cast<size_t>(hop.from)];
    const int to = plan.physical[static_cast<size_t>(hop.to)];
    ex.relays[ex.nRelays++] = device::RelayDuty{hop.slot, hop.from, hop.to, &recv[static_cast<size_t>(from)]->end,
                                                &send[static_cast<size_t>(to)]->end};
  }
  // Its size always, so the step tally (postNetSteps) sizes the pieces as
  // the kernels do; the memory here on the host backend only (the cuda
  // backend's is in the mirror).
  ex.scratch = exchangeScratch.empty() ? nullptr : const_cast<uint64_t*>(exchangeScratch.data());
  ex.scratchBytes = static_cast<uint64_t>(exchangeScratchBytes);
}

const transport::Connection* Channel::connectionOf(const device::FifoEnd* end) const {
  for (const auto* side : {&send, &recv})
    for (const auto& conn : *side)
      if (conn && &conn->end == end) return conn.get();
  return nullptr;
}

Status Channel::mirroredAlgos(int rank, const int32_t* physical, void* scratch, device::AlgoViews* out) const {
  *out = *view(rank).algos;
  int missing = 0;
  auto mirror = [&](device::FifoEnd*& end) {
    if (end == nullptr) return;
    const transport::Connection* conn = connectionOf(end);
    end = conn != nullptr ? conn->deviceEnd : nullptr;
    missing += end == nullptr ? 1 : 0;
  };
  device::ExchangeView& ex = out->exchange;
  for (int s = 0; s < device::kExchangeSlots; ++s) {
    mirror(ex.send[s]);
    mirror(ex.recv[s]);
  }
  for (int d = 0; d < ex.nRelays; ++d) {
    mirror(ex.relays[d].recv);
    mirror(ex.relays[d].send);
  }
  for (device::HierView* h : {&out->hier, &out->torus}) {
    mirror(h->intraRecv);
    mirror(h->intraSend);
    mirror(h->interRecv);
    mirror(h->interSend);
  }
  if (ex.nranks > 0) ex.physical = physical;
  ex.scratch = exchangeScratchBytes > 0 ? scratch : nullptr;
  ex.scratchBytes = ex.scratch != nullptr ? static_cast<uint64_t>(exchangeScratchBytes) : 0;
  if (missing > 0)
    return errorStatus(ncclInternalError,
                       "channel %d: %d FIFO ends of the exchange, hierarchical ring or torus views have no device "
                       "mirror",
                       id, missing);
  if (ex.nranks > 0 && physical == nullptr)
    return errorStatus(ncclInternalError, "channel %d: the exchange order has no device copy", id);
  return okStatus();
}

device::ChannelView Channel::deviceView(int rank) const {
  device::ChannelView v = buildView(rank);
  // One-shot's peers: flat peer i is rank flatPeerRank(i, rank).
  for (int i = 0; i < v.nFlat; ++i) {
    const auto peer = static_cast<size_t>(device::flatPeerRank(i, rank));
    v.flatRecv[i] = recv[peer]->deviceEnd;
    v.flatSend[i] = send[peer]->deviceEnd;
  }
  // The exchanges, hierarchical ring and torus: their mirror, made before the
  // launch (cudaMirrorAlgoViews).
  v.algos = deviceAlgos.empty() ? nullptr : static_cast<const device::AlgoViews*>(deviceAlgos.back().get());
  v.ring.userRanks = static_cast<const int32_t*>(deviceRingOrder.get());
  if (ring.nranks > 1) {
    v.ringRecv = recv[static_cast<size_t>(ring.prev)]->deviceEnd;
    v.ringSend = send[static_cast<size_t>(ring.next)]->deviceEnd;
  }
  if (tree.depth > 0) {
    if (tree.up >= 0) {
      v.treeUpSend = send[static_cast<size_t>(tree.up)]->deviceEnd;
      v.treeDownRecv = recv[static_cast<size_t>(tree.up)]->deviceEnd;
    }
    for (int i = 0; i < tree.nDown; ++i) {
      v.treeUpRecv[i] = recv[static_cast<size_t>(tree.down[i])]->deviceEnd;
      v.treeDownSend[i] = send[static_cast<size_t>(tree.down[i])]->deviceEnd;
    }
  }
  return v;
}

Status drainProxy(Comm* comm) {
  if (!comm->proxy) return okStatus();
  if (comm->proxy->waitIdle(param::waitTimeoutSec() * 1000000000ll)) return okStatus();
  Status failed = comm->proxy->failure();
  if (!failed.ok()) return failed.withContext(strFormat("rank %d: finishing network transfers", comm->rank));
  return errorStatus(ncclRemoteError, "rank %d: network transfers still unfinished after %lld s (WEFT_TIMEOUT): %s",
                     comm->rank, static_cast<long long>(param::waitTimeoutSec()),
                     comm->proxy->describePending().c_str());
}

Status checkComm(const ncclComm_t comm, const char* argName) {
  if (comm == nullptr) return errorStatus(ncclInvalidArgument, "%s is NULL, expected a communicator", argName);
  // Nothing is read through the handle before it is known to be live.
  if (!isLiveComm(comm))
    return errorStatus(ncclInvalidArgument,
                       "%s %p is not a live communicator: it was destroyed or aborted, or never initialised", argName,
                       static_cast<const void*>(comm));
  return okStatus();
}

}  // namespace weft::core
