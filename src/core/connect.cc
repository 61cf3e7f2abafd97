#include "core/connect.h"

#include <algorithm>
#include <ctime>

#include "common/clock.h"
#include "common/log.h"
#include "common/params.h"
#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/topology.h"
#include "device/backend/cuda/runtime.h"

namespace weft::core {
namespace {

constexpr int kConnectTagBase = 1000;
constexpr int kAttachedTagBase = 2000;

int connectTag(int channel) { return kConnectTagBase + channel; }
// The sender's word that it attached to what the receiver set up: until it
// comes, the receiver may not release it (shm: unlink the segment's name on
// destroy), even when it has nothing to receive in the launch that connected.
int attachedTag(int channel) { return kAttachedTagBase + channel; }

std::unique_ptr<transport::Connection>& slot(const ConnectNeed& need) {
  Channel& channel = need.comm->channels[static_cast<size_t>(need.channel)];
  channel.invalidateView();  // the slot may be about to change
  return need.isSend ? channel.send[static_cast<size_t>(need.peer)] : channel.recv[static_cast<size_t>(need.peer)];
}

// The NIC a network link leaves or enters this node by: as the plan has it,
// the ring's entry (receiving from the previous node) and exit (sending to
// the next), and for a tree's links to other nodes the entry NIC, the one
// next to the chain head. Other links (point-to-point, exchanges, the
// hierarchical ring), and links of a plan without NICs, take the NICs
// nearest the rank's GPU, spread by channel.
void setNic(const ConnectNeed& need, transport::LinkSpec* link) {
  const Comm& comm = *need.comm;
  if (comm.nodeOf.empty() || comm.nodeOf[static_cast<size_t>(comm.rank)] == comm.nodeOf[static_cast<size_t>(need.peer)])
    return;
  const Channel& channel = comm.channels[static_cast<size_t>(need.channel)];
  const device::TreeView& t = channel.tree;
  bool treeLink = t.depth > 0 && t.up == need.peer;
  for (int i = 0; i < t.nDown; ++i) treeLink |= t.down[i] == need.peer;
  if (!need.isSend && need.peer == channel.ring.prev)
    link->nic = channel.nicIn;
  else if (need.isSend && need.peer == channel.ring.next)
    link->nic = channel.nicOut;
  else if (treeLink)
    link->nic = channel.nicIn;
  if (link->nic.dev < 0 && comm.topology) {  // not a planned link, or a plan without NICs (flat rings)
    const CommTopology& topo = *comm.topology;
    const int gpu = topo.gpuOfRank[static_cast<size_t>(comm.rank)];
    link->nic = graph::nicIdentity(topo.model, graph::nearestNet(topo.model, gpu, need.channel));
    link->nicReason = "the NIC nearest the GPU";
  }
}

transport::LinkSpec linkOf(const ConnectNeed& need) {
  const Comm& comm = *need.comm;
  transport::LinkSpec link;
  link.channel = need.channel;
  link.rank = comm.rank;
  link.peer = need.peer;
  link.stepBytes = comm.stepBytes;
  link.cudaDev = comm.cudaDev;
  const PeerInfo& peer = comm.peers[static_cast<size_t>(need.peer)];
  link.peerInProcess = peer.processHash == comm.peers[static_cast<size_t>(comm.rank)].processHash;
  link.peerCudaDev = peer.cudaDev;
  link.directAllowed = comm.directAllowed;
  link.peerName = strFormat("rank %d (pid %d on host %s)", need.peer, peer.pid, peer.hostname);
  link.keepWaiting = comm.bootstrap->waitCheck(need.peer);
  setNic(need, &link);
  return link;
}

// Net links are driven by the communicator's proxy, created with the first.
// On a network failure it raises proxyFailureFlag: on the cuda backend the
// kernels' abort flag, which stops kernels waiting on a network FIFO.
void adoptNetLink(Comm* comm, transport::Connection* conn) {
  if (conn->netLink == nullptr) return;
  if (!comm->proxy) {
    comm->proxy = std::make_unique<proxy::ProgressEngine>(comm->rank, &comm->abortFlag, proxyFailureFlag(comm));
    comm->proxy->start();
    WEFT_INFO(log::kProxy | log::kInit, "rank %d: proxy thread started", comm->rank);
  }
}

// Kernels need the FifoEnd in device memory.
Status finishConnection(const Comm& comm, transport::Connection* conn) {
  if (comm.backend != weftBackendCuda) return okStatus();
  return cudaMirrorConnection(comm, conn);
}

const transport::Transport* transportById(uint32_t id) {
  switch (static_cast<transport::TransportId>(id)) {
    case transport::TransportId::kP2p: return &transport::p2pTransport();
    case transport::TransportId::kShm: return &transport::shmTransport();
    case transport::TransportId::kCudaP2p: return &transport::cudaP2pTransport();
    case transport::TransportId::kCudaShm: return &transport::cudaShmTransport();
    case transport::TransportId::kNet: return &transport::netTransport();
    default: return nullptr;
  }
}

bool isShm(const transport::Transport* t) {
  return t == &transport::shmTransport() || t == &transport::cudaShmTransport();
}

// The subsystem a connection's lines belong to, besides INIT.
uint32_t subsysOf(const transport::Transport* t) {
  if (t == &transport::netTransport()) return log::kNet;
  return isShm(t) ? log::kShm : log::kP2p;
}

// The receiver chooses the transport and the sender follows its blob, so a
// fallback decided here is seen by both ends. Shared memory that cannot be
// had (no /dev/shm, no room, no permission) falls back to the network, as
// NCCL does.
Status setupRecv(const ConnectNeed& need) {
  Comm& comm = *need.comm;
  WEFT_ASSIGN_OR_RETURN(const transport::Transport* chosen, selectTransport(comm, need.peer));
  auto conn = std::make_unique<transport::Connection>();
  transport::ConnectBlob blob{};
  Status made = chosen->setupRecv(linkOf(need), conn.get(), &blob);
  if (!made.ok() && isShm(chosen) && made.code() == ncclSystemError) {
    WEFT_INFO(log::kInit | log::kShm | log::kNet,
              "Channel %02d: shared memory from rank %d failed (%s); using the network", need.channel, need.peer,
              made.message().c_str());
    chosen = &transport::netTransport();
    conn = std::make_unique<transport::Connection>();
    blob = transport::ConnectBlob{};
    made = chosen->setupRecv(linkOf(need), conn.get(), &blob);
  }
  WEFT_RETURN_IF_ERROR(made);
  WEFT_RETURN_IF_ERROR(finishConnection(comm, conn.get()));
  WEFT_RETURN_IF_ERROR(comm.bootstrap->send(need.peer, connectTag(need.channel), &blob, sizeof(blob)));
  WEFT_INFO(log::kInit | subsysOf(chosen), "Channel %02d : %d[%d] -> %d[%d] via %s", need.channel, need.peer, need.peer,
            comm.rank, comm.rank, chosen->name());
  slot(need) = std::move(conn);
  return okStatus();
}

// A link whose set-up the transport may still have to progress: the sender's
// connection is not yet in its slot; the receiver's is (setupRecv).
struct PendingLink {
  const ConnectNeed* need;
  transport::LinkSpec spec;
  std::unique_ptr<transport::Connection> sendConn;  // send side, until finished
  transport::Connection* conn;
};

Status connectSend(const ConnectNeed& need, PendingLink* pending) {
  Comm& comm = *need.comm;
  transport::ConnectBlob blob{};
  WEFT_RETURN_IF_ERROR(comm.bootstrap->recv(need.peer, connectTag(need.channel), &blob, sizeof(blob)));
  const transport::Transport* chosen = transportById(blob.transportId);
  if (chosen == nullptr)
    return errorStatus(ncclInternalError, "rank %d: rank %d chose unknown transport %u for channel %d", comm.rank,
                       need.peer, blob.transportId, need.channel);
  pending->sendConn = std::make_unique<transport::Connection>();
  pending->conn = pending->sendConn.get();
  return chosen->connectSend(pending->spec, blob, pending->conn);
}

// A link whose transport finished its side: the sender tells the receiver it
// attached and takes its slot; either side hands a net link to the proxy.
Status completeLink(PendingLink* pending) {
  const ConnectNeed& need = *pending->need;
  Comm& comm = *need.comm;
  if (need.isSend) {
    const char attached = 1;
    WEFT_RETURN_IF_ERROR(comm.bootstrap->send(need.peer, attachedTag(need.channel), &attached, 1));
    WEFT_RETURN_IF_ERROR(finishConnection(comm, pending->conn));
    adoptNetLink(&comm, pending->conn);
    slot(need) = std::move(pending->sendConn);
    return okStatus();
  }
  adoptNetLink(&comm, pending->conn);
  return okStatus();
}

std::string describeLink(const ConnectNeed& need) {
  return strFormat("rank %d: connecting channel %d %s rank %d", need.comm->rank, need.channel,
                   need.isSend ? "to" : "from", need.peer);
}

// The links still waiting when set-up gave up, for the message.
std::string stuckLinks(const std::vector<PendingLink*>& open) {
  std::string out;
  for (size_t i = 0; i < open.size() && i < 4; ++i)
    out += strFormat("%s channel %d %s %s", i ? "," : "", open[i]->need->channel,
                     open[i]->need->isSend ? "connect to" : "accept from", open[i]->spec.peerName.c_str());
  if (open.size() > 4) out += strFormat(" and %zu more", open.size() - 4);
  return out;
}

// Polls every unfinished link of every need in turn (a network's connect may
// finish only once the peer accepts, and that peer may be polling its own
// connects), until all are finished, one fails, or time runs out.
Status progressAll(std::vector<PendingLink>* links) {
  std::vector<PendingLink*> open;
  for (PendingLink& link : *links) open.push_back(&link);
  // Connects first in every pass: some plugins (fast-socket, and NCCL's own
  // of before 2.12) block in accept until the peer's connect arrives, and
  // the peer reaches its connects only if nobody blocks before them.
  std::stable_partition(open.begin(), open.end(), [](const PendingLink* link) { return link->need->isSend; });
  if (open.empty()) return okStatus();
  // Init's bound in init, a call's once init is over (Bootstrap::waitLimit).
  const WaitLimit limit = open[0]->need->comm->bootstrap->waitLimit();
  for (uint32_t pass = 1; !open.empty(); ++pass) {
    bool finishedAny = false;
    for (size_t i = 0; i < open.size();) {
      PendingLink* link = open[i];
      bool done = false;
      Status s = link->conn->transport->progressSetup(link->spec, link->conn, &done);
      if (s.ok() && !done && pass % 1000 == 0 && link->spec.keepWaiting) s = link->spec.keepWaiting();  // ~100 ms
      if (s.ok() && done) s = completeLink(link);
      if (!s.ok()) return s.withContext(describeLink(*link->need));
      if (!done) {
        ++i;
        continue;
      }
      open.erase(open.begin() + static_cast<std::ptrdiff_t>(i));
      finishedAny = true;
    }
    if (open.empty() || finishedAny) continue;
    if (limit.deadline.expired()) {
      open[0]->need->comm->bootstrap->noteSuspect(open[0]->need->peer);
      return errorStatus(ncclRemoteError, "rank %d: connection set-up unfinished after %lld s (%s):%s",
                         open[0]->need->comm->rank, static_cast<long long>(limit.seconds), limit.name,
                         stuckLinks(open).c_str());
    }
    struct timespec pause = {0, 100000};
    nanosleep(&pause, nullptr);
  }
  return okStatus();
}

// The sender's word that it attached: the receiver may release its side only
// after it (shm: unlink the segment's name).
Status awaitAttached(const ConnectNeed& need) {
  char attached = 0;
  return need.comm->bootstrap->recv(need.peer, attachedTag(need.channel), &attached, 1);
}

}  // namespace

namespace {

// Why p2p is out, for error messages; empty when it is allowed by the path.
std::string p2pRuledOutBy(const CommTopology& topo, graph::PathType path) {
  if (path <= topo.p2pLevel) return "";
  return strFormat("their path (%s) is beyond the P2P level %s (NCCL_P2P_LEVEL / NCCL_P2P_DISABLE)",
                   graph::pathTypeName(path), graph::pathTypeName(topo.p2pLevel));
}

// GPUs: direct (same device, peer access, or IPC) when the path between the
// two GPUs is within the P2P level and the driver can map the peer, else
// through pinned shared memory.
Result<const transport::Transport*> selectCudaTransport(const Comm& comm, const PeerInfo& me, const PeerInfo& other) {
  const CommTopology& topo = *comm.topology;
  // A GPU missing from the model is treated as the farthest on the host.
  const graph::PathType path = pathBetween(topo, me.rank, other.rank, graph::PathType::kSys);
  std::string why = p2pRuledOutBy(topo, path);
  if (why.empty()) {
    const bool sameProcess = me.processHash == other.processHash;
    const int peerDevice = sameProcess ? other.cudaDev : cuda::deviceByPciBusId(other.busId);
    const bool reachable = peerDevice >= 0 && cuda::canAccessPeer(comm.cudaDev, peerDevice) &&
                           cuda::canAccessPeer(peerDevice, comm.cudaDev);
    if (reachable) return &transport::cudaP2pTransport();
    why = "the GPUs cannot reach each other's memory";
  }
  if (!topo.shmDisabled) return &transport::cudaShmTransport();
  // As NCCL: without p2p and shared memory, ranks of one host use the network.
  WEFT_INFO(log::kInit | log::kNet, "rank %d and rank %d: p2p is ruled out (%s) and NCCL_SHM_DISABLE=1: network",
            comm.rank, other.rank, why.c_str());
  return &transport::netTransport();
}

}  // namespace

Result<const transport::Transport*> selectTransport(const Comm& comm, int peer) {
  const PeerInfo& me = comm.peers[static_cast<size_t>(comm.rank)];
  const PeerInfo& other = comm.peers[static_cast<size_t>(peer)];
  // Different hosts, or different virtual nodes of one host: the network, on
  // both backends. On the cuda backend the FIFO is pinned host memory mapped
  // into the GPU, which the kernel fills and drains and the proxy moves
  // (net_transport.cc); no GPUDirect RDMA.
  if (comm.nodeOf[static_cast<size_t>(comm.rank)] != comm.nodeOf[static_cast<size_t>(peer)])
    return &transport::netTransport();
  if (comm.backend == weftBackendCuda) return selectCudaTransport(comm, me, other);
  // Host backend: direct pointers need one address space; the path decides
  // only against NCCL_P2P_LEVEL (ranks of the node share this host's memory
  // through its CPU: PHB).
  const CommTopology& topo = *comm.topology;
  const std::string why = p2pRuledOutBy(topo, pathBetween(topo, comm.rank, peer, graph::PathType::kPhb));
  if (me.processHash == other.processHash && why.empty()) return &transport::p2pTransport();
  if (!topo.shmDisabled) return &transport::shmTransport();
  // As NCCL: without p2p and shared memory, ranks of one host use the network.
  return &transport::netTransport();
}

// Receivers first (every setupRecv posts its blob without waiting), then
// senders attach to the blobs, then every unfinished link of either side is
// progressed together, then each receiver collects its sender's word.
Status connectPeers(const std::vector<ConnectNeed>& needs) {
  std::vector<PendingLink> pending;
  pending.reserve(needs.size());
  for (const ConnectNeed& need : needs) {
    if (need.isSend || slot(need)) continue;
    Status s = setupRecv(need);
    if (!s.ok()) return s.withContext(describeLink(need));
    pending.push_back(PendingLink{&need, linkOf(need), nullptr, slot(need).get()});
  }
  auto sameSend = [](const ConnectNeed& need) {
    return [&need](const PendingLink& link) {
      return link.need->isSend && link.need->comm == need.comm && link.need->channel == need.channel &&
             link.need->peer == need.peer;
    };
  };
  for (const ConnectNeed& need : needs) {
    // A link two algorithms need is listed twice; its slot is filled only
    // once progressAll finishes it.
    if (!need.isSend || slot(need) || std::any_of(pending.begin(), pending.end(), sameSend(need))) continue;
    pending.push_back(PendingLink{&need, linkOf(need), nullptr, nullptr});
    Status s = connectSend(need, &pending.back());
    if (!s.ok()) return s.withContext(describeLink(need));
  }
  WEFT_RETURN_IF_ERROR(progressAll(&pending));
  for (const PendingLink& link : pending) {
    if (link.need->isSend) continue;
    Status s = awaitAttached(*link.need);
    if (!s.ok()) return s.withContext(describeLink(*link.need));
  }
  return okStatus();
}

}  // namespace weft::core
