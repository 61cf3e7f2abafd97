#include "core/launch.h"

#include <algorithm>
#include <cstring>
#include <mutex>

#include "common/log.h"
#include "core/comm.h"
#include "core/connect.h"
#include "core/cuda_backend.h"
#include "core/failure.h"
#include "core/host_executor.h"
#include "core/launch_profile.h"
#include "core/planner.h"
#include "device/step_tally.h"
#include "transport/net/net_link.h"

namespace weft::core {
namespace {

PlanInputs planInputs(const Comm& comm) {
  PlanInputs in{comm.rank,        comm.nranks,    static_cast<int>(comm.channels.size()),
                comm.minChannels, comm.stepBytes, comm.chunkSteps};
  in.shape = tuning::Shape{comm.nranks, comm.nnodes, comm.ranksPerNode, comm.treeDepth};
  in.algoFilter = &comm.algoFilter;
  in.treesAvailable = comm.treeDepth > 0;
  // One-shot talks to every peer: not with broken links.
  in.oneShotAvailable = comm.brokenLinks.empty();
  // One-shot, butterfly, halving-doubling, the hierarchical ring and the 2D
  // torus: both teams; the cuda kernels have them for the sum and the
  // data-only calls only (cuda_coop.cuh), and take them only when NCCL_ALGO
  // names them until they have been measured on a GPU.
  in.exchangeAvailable = comm.exchangePlan != nullptr;
  in.hierAvailable = comm.hierPlan != nullptr;
  in.torusAvailable = comm.torusPlan != nullptr;
  in.extraSumOnly = comm.backend != weftBackendHost;
  in.extraNamedOnly = comm.backend != weftBackendHost;
  if (in.torusAvailable)
    in.torus = tuning::TorusShape{static_cast<int>(comm.torusPlan->nodes.size()),
                                  static_cast<int>(comm.torusPlan->nodes[0].size())};
  in.oversubscribed = comm.oversubscribed;
  in.figures = &comm.figures;
  in.intraLink = comm.intraLink;
  // LL and LL128 need every link within a node (the proxy moves only Simple
  // slots), LL128 links that keep a 128-byte store whole;
  // the cuda backend uses it only when NCCL_PROTO asks, until it is measured
  // on a GPU.
  in.protoFilter = &comm.protoFilter;
  in.tuner = comm.tuner.get();
  in.llPossible = comm.nnodes == 1 && !comm.proxy;
  in.ll128Possible = in.llPossible && comm.wholeLineLinks;
  in.ll128Trees = comm.backend == weftBackendHost;
  in.llByDefault = comm.backend == weftBackendHost;
  in.llSumOnly = comm.backend != weftBackendHost;
  in.directPossible = comm.directAllowed && comm.nnodes == 1;
  in.directRead = comm.directRead;
  in.readsInPlace = comm.backend == weftBackendHost;
  in.checkCalls = comm.checkCalls;
  in.firstSeq = comm.collSeq;
  in.nodeOf = &comm.nodeOf;
  return in;
}

bool sameOp(const ResolvedOp& a, const ResolvedOp& b) {
  return a.kind == b.kind && a.scalarIsPointer == b.scalarIsPointer && a.scalarBits == b.scalarBits &&
         a.scalarPtr == b.scalarPtr;
}

// Everything the planner reads of a task but its buffers and stream.
bool sameShape(const CollTask& a, const CollTask& b) {
  return a.func == b.func && a.count == b.count && a.dtype == b.dtype && a.root == b.root && sameOp(a.op, b.op);
}

// Plans the comm's queued tasks into comm->plan. A launch of one collective
// shaped like the last one (the common loop: same call, same or other
// buffers) patches the buffers into the previous plan instead: the plan
// depends only on the task's shape and on inputs fixed at init.
Status planLaunch(Comm* comm) {
  const bool single = comm->collTasks.size() == 1 && comm->p2pTasks.empty();
  const PlanInputs in = planInputs(*comm);
  comm->collSeq += comm->collTasks.size();
  if (single && comm->planReusable && sameShape(comm->collTasks[0], comm->plannedTask)) {
    const CollTask& task = comm->collTasks[0];
    for (auto& items : comm->plan.channels)
      for (device::WorkItem& item : items) {
        item.coll.sendbuff = task.sendbuff;
        item.coll.recvbuff = task.recvbuff;
        item.coll.seq = static_cast<uint32_t>(in.firstSeq);
      }
    return okStatus();
  }
  comm->planReusable = false;
  WEFT_RETURN_IF_ERROR(planTasks(in, comm->collTasks, comm->p2pTasks, &comm->plan));
  // Only buffers in work items are patched: a plan of self copies (one
  // rank), or of nothing (one rank, in place), is made again each call.
  const bool hasItems = std::any_of(comm->plan.channels.begin(), comm->plan.channels.end(),
                                    [](const std::vector<device::WorkItem>& items) { return !items.empty(); });
  if (single && hasItems && comm->plan.selfCopies.empty()) {
    comm->plannedTask = comm->collTasks[0];
    comm->planReusable = true;
  }
  return okStatus();
}

void collectNeeds(Comm* comm, const Plan& plan, std::vector<ConnectNeed>* needs) {
  // Only links not made yet: a send/recv call to a connected peer must not
  // reach connectPeers, whose slot lookup invalidates the channel's view
  // (rebuilt at the next launch).
  for (const P2pBinding& b : plan.p2p) {
    const Channel& channel = comm->channels[static_cast<size_t>(b.channel)];
    if (b.sendPeer >= 0 && !channel.send[static_cast<size_t>(b.sendPeer)])
      needs->push_back({comm, b.channel, b.sendPeer, true});
    if (b.recvPeer >= 0 && !channel.recv[static_cast<size_t>(b.recvPeer)])
      needs->push_back({comm, b.channel, b.recvPeer, false});
  }
  for (int c : plan.flatChannels) {
    if (comm->channels[static_cast<size_t>(c)].flatConnected) continue;
    for (int peer = 0; peer < comm->nranks; ++peer) {
      if (peer == comm->rank) continue;
      needs->push_back({comm, c, peer, true});
      needs->push_back({comm, c, peer, false});
    }
  }
  for (int c : plan.exchangeChannels) {
    if (comm->channels[static_cast<size_t>(c)].exchangeConnected) continue;
    for (int peer : exchangePeers(*comm->exchangePlan, comm->rank)) {
      needs->push_back({comm, c, peer, true});
      needs->push_back({comm, c, peer, false});
    }
  }
  for (int c : plan.hierChannels) {
    if (comm->channels[static_cast<size_t>(c)].hierConnected) continue;
    const HierPlan::Place p = comm->hierPlan->placeOf(comm->rank);
    std::vector<int> peers;
    for (int peer : {p.intraPrev, p.intraNext, p.interPrev, p.interNext})
      if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
    for (int peer : peers) {
      needs->push_back({comm, c, peer, true});
      needs->push_back({comm, c, peer, false});
    }
  }
}

// The torus's row and column neighbours (none in a ring of one rank).
void collectTorusNeeds(Comm* comm, const Plan& plan, std::vector<ConnectNeed>* needs) {
  for (int c : plan.torusChannels) {
    if (comm->channels[static_cast<size_t>(c)].torusConnected) continue;
    const HierPlan::Place p = comm->torusPlan->placeOf(comm->rank);
    std::vector<int> peers;
    for (int peer : {p.intraPrev, p.intraNext, p.interPrev, p.interNext})
      if (peer != comm->rank && std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
    for (int peer : peers) {
      needs->push_back({comm, c, peer, true});
      needs->push_back({comm, c, peer, false});
    }
  }
}

void markTorusConnected(Comm* comm, const Plan& plan) {
  for (int c : plan.torusChannels) {
    Channel& channel = comm->channels[static_cast<size_t>(c)];
    if (channel.torusConnected) continue;
    channel.torusConnected = true;
    channel.torusPlan = comm->torusPlan.get();
    channel.invalidateView();
  }
}

void markExchangeConnected(Comm* comm, const Plan& plan) {
  for (int c : plan.exchangeChannels) {
    Channel& channel = comm->channels[static_cast<size_t>(c)];
    if (channel.exchangeConnected) continue;
    channel.exchangeConnected = true;
    channel.exchangePlan = comm->exchangePlan.get();
    channel.invalidateView();
  }
}

// Scratch of the halving ReduceScatter: k pieces of up to a chunk, within a
// bound (smaller pieces beyond it), never less than one aligned piece each.
constexpr int64_t kMaxScatterScratchBytes = 8 << 20;

// Made on the first ReduceScatter of an exchange channel that needs it
// (device/halving_doubling_scatter.h), before the view is read.
void provideScatterScratch(Comm* comm, const Plan& plan) {
  const int64_t least = static_cast<int64_t>(comm->nranks) * kAlignBytes;
  const int64_t wanted = static_cast<int64_t>(comm->nranks) * comm->stepBytes * comm->chunkSteps;
  const int64_t bytes = std::max(least, std::min(wanted, kMaxScatterScratchBytes));
  for (int c : plan.exchangeChannels) {
    Channel& channel = comm->channels[static_cast<size_t>(c)];
    if (channel.exchangeScratchBytes > 0) continue;
    for (const device::WorkItem& item : plan.channels[static_cast<size_t>(c)])
      if (item.kind == device::WorkItem::Kind::kColl && item.coll.func == device::Func::kReduceScatter) {
        channel.exchangeScratchBytes = device::divUp<int64_t>(bytes, 8) * 8;
        // The cuda backend's is device memory, made with the views' mirror.
        if (comm->backend == weftBackendHost)
          channel.exchangeScratch.assign(static_cast<size_t>(channel.exchangeScratchBytes / 8), 0);
        channel.invalidateView();
        break;
      }
  }
}

void markHierConnected(Comm* comm, const Plan& plan) {
  for (int c : plan.hierChannels) {
    Channel& channel = comm->channels[static_cast<size_t>(c)];
    if (channel.hierConnected) continue;
    channel.hierConnected = true;
    channel.hierPlan = comm->hierPlan.get();
    channel.invalidateView();
  }
}

void markFlatConnected(Comm* comm, const Plan& plan) {
  for (int c : plan.flatChannels) {
    Channel& channel = comm->channels[static_cast<size_t>(c)];
    if (channel.flatConnected) continue;
    channel.flatConnected = true;
    channel.invalidateView();
  }
}

// Points send/recv items at their FIFO ends: the host ends, or with
// `onDevice` their device copies (what kernels read).
void bindP2p(Comm* comm, Plan* plan, bool onDevice) {
  auto endOf = [onDevice](transport::Connection& conn) { return onDevice ? conn.deviceEnd : &conn.end; };
  for (const P2pBinding& b : plan->p2p) {
    Channel& channel = comm->channels[static_cast<size_t>(b.channel)];
    device::P2pWork& work = plan->channels[static_cast<size_t>(b.channel)][b.item].p2p;
    if (b.sendPeer >= 0) work.sendEnd = endOf(*channel.send[static_cast<size_t>(b.sendPeer)]);
    if (b.recvPeer >= 0) work.recvEnd = endOf(*channel.recv[static_cast<size_t>(b.recvPeer)]);
  }
}

transport::NetLink* netLinkOf(const Channel& channel, const device::FifoEnd* end) {
  const transport::Connection* conn = channel.connectionOf(end);
  return conn != nullptr ? conn->netLink : nullptr;
}

// Tells the proxy how many FIFO steps each network link moves in this launch.
// The items' ends must be the host-side FIFO ends (the tally reads them), on
// the cuda backend too: bind device ends only after this.
void postNetSteps(Comm* comm, const Plan& plan) {
  if (!comm->proxy) return;
  const uint64_t id = ++comm->launchCount;
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    if (plan.channels[c].empty()) continue;
    const Channel& channel = comm->channels[c];
    const device::ChannelView& view = channel.view(comm->rank);
    thread_local device::StepTally tally;  // reused: no allocation per launch
    tally.clear();
    for (const device::WorkItem& item : plan.channels[c]) device::tallyWorkItem(view, item, &tally);
    for (int i = 0; i < tally.size(); ++i)
      if (transport::NetLink* link = netLinkOf(channel, tally.end(i))) {
        WEFT_TRACE(log::kProxy, "rank %d launch %llu: channel %zu %s rank %d: %llu steps", comm->rank,
                   static_cast<unsigned long long>(id), c, link->isSend ? "to" : "from", link->peer,
                   static_cast<unsigned long long>(tally.steps(i)));
        comm->proxy->post(link, {id, tally.steps(i)});
      }
  }
}

// TRACE: what each channel of a launch runs, item by item.
void traceWorkItems(const Comm& comm, const Plan& plan) {
  static const char* const kAlgos[] = {"Ring",   "Tree", "OneShot", "Butterfly", "HalvingDoubling", "HierarchicalRing",
                                       "Torus2D"};
  for (size_t c = 0; c < plan.channels.size(); ++c)
    for (const device::WorkItem& item : plan.channels[c]) {
      if (item.kind != device::WorkItem::Kind::kColl) {
        WEFT_TRACE(log::kP2p, "rank %d channel %zu: send/recv work item", comm.rank, c);
        continue;
      }
      const device::CollWork& w = item.coll;
      WEFT_TRACE(log::kColl,
                 "rank %d channel %zu: func %d algo %s count %llu, elements [%llu, %llu) chunk %llu sendbuff %p "
                 "recvbuff %p",
                 comm.rank, c, static_cast<int>(w.func), kAlgos[static_cast<int>(w.algo) % 7],
                 static_cast<unsigned long long>(w.count), static_cast<unsigned long long>(w.channelStart),
                 static_cast<unsigned long long>(w.channelStart + w.channelCount),
                 static_cast<unsigned long long>(w.chunkElems), w.sendbuff, static_cast<void*>(w.recvbuff));
    }
}

void clearTasks(Comm* comm) {
  comm->collTasks.clear();
  comm->p2pTasks.clear();
}

void markFailed(Comm* comm, const Status& status) {
  comm->failure = status;
  comm->state.store(static_cast<int>(CommState::kFailed));
  comm->asyncError.store(status.code());
}

// A failed wait: the comm is marked failed and, unless the failure was
// abort or another rank's notice, every peer is told (core/failure.h).
Status failWait(Comm* comm, device::WaitFailureInfo failure) {
  // A peer found gone or silent may have gone because of another rank's
  // failure, whose notice is on its way: give it a moment to arrive, so the
  // error names the rank that failed first.
  const int graceMs = noticeGraceMs(*comm, failure);
  if (graceMs > 0 && awaitNotice(*comm, graceMs)) failure.kind = device::WaitFailure::kPeerFailed;
  Status status = describeWaitFailure(*comm, failure);
  markFailed(comm, status);
  if (failure.kind != device::WaitFailure::kAborted && failure.kind != device::WaitFailure::kPeerFailed)
    reportFailure(comm, failureOrigin(*comm, failure), status);
  return status;
}

// Whether the comm's plan, once run, can run again by itself with other
// buffers: the repeat's condition (launchColl, runRepeat). Besides the lone collective's one
// channel (checked by the caller), nothing the general launch does per call
// may be needed: no send/recv ends to bind, no network steps to post, no
// self copies, no kernel.
bool repeatsAlone(const Comm& comm) {
  return comm.planReusable && comm.backend == weftBackendHost && !comm.proxy && comm.plan.p2p.empty() &&
         comm.plan.selfCopies.empty();
}

// A launch's lists, kept per thread (one thread-local lookup per launch).
struct LaunchScratch {
  std::vector<LaunchProfile> profiles;  // per comm of the launch, when one has a profiler
  std::vector<ConnectNeed> needs;
  std::vector<LaunchUnit> units;
  std::vector<Comm*> cudaComms;
  std::vector<device::WaitFailureInfo> failures;
};

// In a shared library every use of a thread_local costs a __tls_get_addr
// call, and the compiler recomputes the address at each use rather than keep
// it in a register: ten calls per launch (callgrind). Out of line, the
// address is an ordinary value, looked up once.
[[gnu::noinline]] LaunchScratch& launchScratch() {
  thread_local LaunchScratch scratch;
  return scratch;
}

// Runs with every comm's execMutex held. Plans go into each comm's own Plan
// and the lists are kept per thread, so a launch that needs no new
// connection allocates nothing once warm.
Status launchLocked(Comm* const* comms, size_t n) {
  LaunchScratch& s = launchScratch();
  std::vector<ConnectNeed>& needs = s.needs;
  std::vector<LaunchUnit>& units = s.units;
  std::vector<Comm*>& cudaComms = s.cudaComms;
  std::vector<device::WaitFailureInfo>& failures = s.failures;
  needs.clear();
  units.clear();
  cudaComms.clear();
  // Events started below end when the launch returns: the host's calls have
  // run by then, the cuda ones are launched (as NCCL stops them).
  struct StopEvents {
    std::vector<LaunchProfile>& profiles;
    ~StopEvents() {
      for (LaunchProfile& p : profiles) p.stop();
    }
  } stopEvents{s.profiles};
  for (size_t i = 0; i < n; ++i)
    if (comms[i]->backend == weftBackendCuda) cudaComms.push_back(comms[i]);
  if (!cudaComms.empty()) WEFT_RETURN_IF_ERROR(cudaCheckStreams(cudaComms));
  cudaComms.clear();
  for (size_t i = 0; i < n; ++i) {
    comms[i]->repeatChannel = -1;  // set again below if this launch qualifies
    if (!comms[i]->failure.ok()) return comms[i]->failure;
    if (comms[i]->peerFailed.load(std::memory_order_acquire) != 0) {
      markFailed(comms[i], noticedFailure(*comms[i]));
      return comms[i]->failure;
    }
    if (comms[i]->backend == weftBackendCuda) {
      // After a failure (network, timeout, a peer exited) this comm's kernels
      // were stopped (cuda_backend.cc): fail the call, naming the peer or
      // link, rather than launch.
      Status kernelFailed = cudaKernelFailure(*comms[i]);
      if (!kernelFailed.ok()) {
        markFailed(comms[i], kernelFailed);
        reportFailure(comms[i], comms[i]->rank, kernelFailed);
        return kernelFailed;
      }
      WEFT_RETURN_IF_ERROR(cudaCheckCapture(*comms[i]));
    }
    WEFT_RETURN_IF_ERROR(planLaunch(comms[i]));
    if (comms[i]->profiler) {
      if (s.profiles.size() < n) s.profiles.resize(n);
      s.profiles[i].start(comms[i]);
    }
    collectNeeds(comms[i], comms[i]->plan, &needs);
    collectTorusNeeds(comms[i], comms[i]->plan, &needs);
  }
  if (!needs.empty()) {
    Status connected = connectPeers(needs);
    if (!connected.ok()) {
      // Connections made on first use (one-shot, exchanges, hierarchical
      // ring) go through the bootstrap like init's: a peer found gone there
      // is told to every rank, as init does, so that ranks not talking to it
      // name it too rather than the first survivor that aborts. The peer may
      // have given up because another rank failed first (its segment is
      // gone, its listener closed): a notice of that failure, already here
      // or arriving within the grace, names the rank that failed first.
      if (awaitNotice(*comms[0], connectNoticeGraceMs(*comms[0]))) connected = noticedFailure(*comms[0]);
      for (size_t i = 0; i < n; ++i) {
        markFailed(comms[i], connected);
        if (comms[i]->abortFlag.load() == 0) reportInitFailure(comms[i], connected);
      }
      return connected;
    }
  }
  for (size_t i = 0; i < n; ++i) {
    Plan& plan = comms[i]->plan;
    markFlatConnected(comms[i], plan);
    markExchangeConnected(comms[i], plan);
    provideScatterScratch(comms[i], plan);
    markHierConnected(comms[i], plan);
    markTorusConnected(comms[i], plan);
    // Before any step is posted: a failure here leaves the proxy nothing to move.
    if (comms[i]->backend == weftBackendCuda) WEFT_RETURN_IF_ERROR(cudaMirrorAlgoViews(comms[i]));
    bindP2p(comms[i], &plan, false);
    postNetSteps(comms[i], plan);  // before anything (a worker, a kernel) waits on these steps
    if (log::enabled(log::Level::kTrace, log::kColl | log::kP2p)) traceWorkItems(*comms[i], plan);
    if (comms[i]->backend == weftBackendCuda) {
      bindP2p(comms[i], &plan, true);  // kernels read the device copies of the ends
      cudaComms.push_back(comms[i]);
      continue;
    }
    for (const SelfCopy& copy : plan.selfCopies) std::memmove(copy.dst, copy.src, copy.bytes);
    for (size_t c = 0; c < plan.channels.size(); ++c)
      if (!plan.channels[c].empty()) units.push_back({comms[i], static_cast<int>(c), &plan.channels[c]});
  }
  if (!cudaComms.empty()) {
    Status launched = cudaLaunch(cudaComms);
    if (!launched.ok()) {
      // Positions were advanced and network steps posted for work that may
      // not run: these comms can no longer agree with their peers.
      for (Comm* comm : cudaComms) {
        markFailed(comm, launched);
        reportFailure(comm, comm->rank, launched);
      }
      return launched;
    }
  }
  runUnits(units, &failures);
  Status first;
  for (size_t u = 0; u < units.size(); ++u) {
    if (failures[u].kind == device::WaitFailure::kNone || !units[u].comm->failure.ok()) continue;
    Status failed = failWait(units[u].comm, failures[u]);
    if (first.ok()) first = failed;
  }
  if (first.ok() && n == 1 && units.size() == 1 && repeatsAlone(*comms[0])) {
    comms[0]->repeatChannel = units[0].channel;
    std::vector<device::CallSignature>& signatures = comms[0]->repeatSignatures;
    signatures.clear();
    for (const device::WorkItem& item : *units[0].items) signatures.push_back(device::itemSignature(item));
    comms[0]->execMutex.biasToCaller();  // its repeats may now skip the lock (exec_lock.h)
  }
  return first;
}

}  // namespace

Result<double> simulateComm(Comm* comm) {
  std::lock_guard<ExecLock> lock(comm->execMutex);
  PlanInputs in = planInputs(*comm);
  in.estimate = true;
  Plan plan;
  WEFT_RETURN_IF_ERROR(planTasks(in, comm->collTasks, comm->p2pTasks, &plan));
  return plan.estimatedUs;
}

void discardTasks(const std::vector<Comm*>& comms) {
  for (Comm* comm : comms) clearTasks(comm);
}

Status launchComm(Comm* comm) {
  Status status;
  {
    std::lock_guard<ExecLock> lock(comm->execMutex);
    status = launchLocked(&comm, 1);
    clearTasks(comm);
  }
  return status;
}

Status launchColl(Comm* comm, const CollTask& task) {
  std::lock_guard<ExecLock> lock(comm->execMutex);
  Status status;
  if (repeatable(*comm) && sameShape(task, comm->plannedTask)) {
    runRepeat(comm, task.sendbuff, task.recvbuff, &status);
    return status;
  }
  comm->collTasks.push_back(task);
  status = launchLocked(&comm, 1);
  clearTasks(comm);
  return status;
}

void runRepeat(Comm* comm, const void* sendbuff, void* recvbuff, Status* status) {
  std::vector<device::WorkItem>& items = comm->plan.channels[static_cast<size_t>(comm->repeatChannel)];
  const uint64_t seq = comm->collSeq++;
  device::CallSignature* signatures = comm->repeatSignatures.data();
  for (size_t i = 0; i < items.size(); ++i) {  // the plan's other channels are empty
    items[i].coll.sendbuff = sendbuff;
    items[i].coll.recvbuff = recvbuff;
    items[i].coll.seq = static_cast<uint32_t>(seq);
    // itemSignature(items[i]) without working out the unchanged fields again
    signatures[i].word = device::withCallSeq(signatures[i].word, seq);
  }
  const device::WaitFailureInfo failure =
      device::hostRunChannel(comm->channels[static_cast<size_t>(comm->repeatChannel)].view(comm->rank), items.data(),
                             items.size(), comm->waitConfig, signatures);
  if (failure.kind != device::WaitFailure::kNone) {
    *status = failWait(comm, failure);
    comm->repeatChannel = -1;
  } else {
    *status = okStatus();
  }
}

Status launchComms(std::vector<Comm*> comms) {
  if (comms.size() == 1) return launchComm(comms[0]);
  std::sort(comms.begin(), comms.end());
  comms.erase(std::unique(comms.begin(), comms.end()), comms.end());
  // Address order: two threads launching overlapping sets cannot deadlock.
  std::vector<std::unique_lock<ExecLock>> locks;
  locks.reserve(comms.size());
  for (Comm* comm : comms) locks.emplace_back(comm->execMutex);
  Status status = launchLocked(comms.data(), comms.size());
  for (Comm* comm : comms) clearTasks(comm);
  return status;
}

}  // namespace weft::core
