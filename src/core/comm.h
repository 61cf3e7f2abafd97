// The communicator: everything one rank knows about its communicator. Core
// code operates on it; graph, tuning, transport and device code get narrow
// views of it, never the whole.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "core/bootstrap.h"
#include "core/broken_links.h"
#include "core/config.h"
#include "core/exec_lock.h"
#include "core/init_timings.h"
#include "core/planner.h"
#include "core/redop.h"
#include "core/task.h"
#include "device/backend/host/host_coop.h"
#include "device/work.h"
#include "graph/rails.h"
#include "nccl.h"
#include "proxy/proxy.h"
#include "transport/connection.h"
#include "tuning/algo.h"
#include "tuning/figures.h"
#include "tuning/tuner_plugin.h"
#include "weft.h"

namespace weft::core {

class HostExecutor;
class DirectPeers;
class ProfilerSession;

// What every rank tells the others at init (fixed-size, exchanged by allGather).
struct PeerInfo {
  int32_t rank;
  int32_t backend;  // weftBackend_t
  int32_t cudaDev;
  int32_t pid;
  uint64_t hostHash;
  uint64_t processHash;
  uint64_t pidNamespace;
  uint64_t machineHash;  // the physical machine (shared cores), see common/hash.h
  char hostname[64];
  char busId[32];  // cuda backend: the GPU's PCI bus id
};

struct Channel {
  int id = 0;
  std::vector<int32_t> ringOrder;  // ring position -> rank
  device::RingView ring{};
  // depth 0: this channel has no tree (trees come with the graph search).
  device::TreeView tree{-1, {-1, -1, -1}, 0, 0};
  // The NICs the plan routes this channel through on this node: the one its
  // ring enters by (also the tree's, whose chain head is next to it) and the
  // one it leaves by (graph/search.h). dev -1: the plan names none.
  graph::NicIdentity nicIn, nicOut;
  // Per peer, created on first use (ring neighbours at init, others at the
  // first send/recv that needs them).
  std::vector<std::unique_ptr<transport::Connection>> send;
  std::vector<std::unique_ptr<transport::Connection>> recv;
  std::shared_ptr<void> deviceRingOrder;       // cuda backend: ringOrder in device memory
  const ExchangePlan* exchangePlan = nullptr;  // the comm's, set when exchangeConnected
  const HierPlan* hierPlan = nullptr;          // the comm's, set when hierConnected
  const HierPlan* torusPlan = nullptr;         // the comm's, set when torusConnected
  bool flatConnected = false;                  // connected to every other rank (one-shot)
  // Connected to the partners and relays of the exchange plan (butterfly,
  // halving-doubling); the view's exchange then points at exchangeView_.
  bool exchangeConnected = false;
  // Connected to the hierarchical ring's neighbours (in the node and across).
  bool hierConnected = false;
  // Connected to the 2D torus's row and column neighbours.
  bool torusConnected = false;
  // Scratch of the halving ReduceScatter: its size (0 until a ReduceScatter
  // on this channel needs it) and, on the host backend, the memory (8-byte
  // words, so any element type is aligned).
  int64_t exchangeScratchBytes = 0;
  std::vector<uint64_t> exchangeScratch;
  // cuda backend: the algorithm views with device pointers in device memory
  // (back() is current; one copy per change, kept until the comm goes, since
  // a kernel in flight may read an older one), the exchange order and the
  // ReduceScatter scratch (cuda_backend.cc, cudaMirrorAlgoViews).
  std::vector<std::shared_ptr<void>> deviceAlgos;
  std::shared_ptr<void> devicePhysical;
  std::shared_ptr<void> deviceExchangeScratch;
  uint64_t mirroredGeneration = 0;  // viewGeneration() that deviceAlgos.back() mirrors

  // The host-side view of this channel for `rank`, built once and kept until
  // a connection is added (connect.cc) or the flat set completes: a launch
  // reads it without rebuilding. Callers hold the comm's execMutex. Inline:
  // every collective call asks for it.
  const device::ChannelView& view(int rank) const {
    if (viewStale_ || view_.rank != rank) rebuildView(rank);
    return view_;
  }
  void invalidateView() {
    viewStale_ = true;
    viewGeneration_ += 1;
  }
  // Counts the changes of the view (connections added, algorithms connected).
  uint64_t viewGeneration() const { return viewGeneration_; }
  // Whether an exchange, the hierarchical ring or the torus is connected here.
  bool hasAlgoViews() const { return exchangeConnected || hierConnected || torusConnected; }
  // The connection whose host FIFO end is `end`; null if none of this channel's.
  const transport::Connection* connectionOf(const device::FifoEnd* end) const;
  // The views of the exchanges, hierarchical ring and torus for `rank` with
  // device pointers: each FIFO end's mirror, `physical` for the exchange
  // order and `scratch` (exchangeScratchBytes long) for the ReduceScatter's.
  Status mirroredAlgos(int rank, const int32_t* physical, void* scratch, device::AlgoViews* out) const;
  // The same view with device pointers (cuda backend).
  device::ChannelView deviceView(int rank) const;

 private:
  void rebuildView(int rank) const;
  device::ChannelView buildView(int rank) const;
  void buildExchangeView(int rank) const;
  void buildHierView(int rank) const;
  void buildTorusView(int rank) const;
  mutable device::ChannelView view_{};
  mutable device::AlgoViews algos_{};
  mutable bool viewStale_ = true;
  uint64_t viewGeneration_ = 1;
};

// cuda backend state of a communicator (see core/cuda_backend.cc).
struct CudaState;
// The topology and transport policy (see core/topology.h).
struct CommTopology;

enum class CommState : int { kInitializing, kReady, kFailed, kFinalized };

// Constructed and destroyed, a Comm enters and leaves the registry of live
// communicators (core/comm_registry.h) that every API handle is checked against.
struct Comm {
  Comm();
  ~Comm();
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  int rank = -1;
  int nranks = 0;
  int cudaDev = -1;
  weftBackend_t backend = weftBackendHost;
  // Whether any CUDA device is visible, fixed at init: without one no pointer
  // can be device memory, and the per-call buffer-kind check is skipped.
  bool gpusVisible = false;
  CommConfig config;
  uint64_t commHash = 0;  // same on every rank; names shared resources
  int splitCount = 0;     // splits made from this communicator so far

  std::unique_ptr<Bootstrap> bootstrap;
  std::vector<PeerInfo> peers;
  std::vector<Channel> channels;
  // Links no algorithm may use (WEFT_BROKEN_LINKS), and the pairwise-exchange
  // plan that avoids them; exchangePlan is null when none exists.
  LinkSet brokenLinks;
  std::shared_ptr<const ExchangePlan> exchangePlan;
  // The nodes' ranks for the hierarchical ring; null when it does not apply
  // (one node, nodes of one rank or of unequal sizes, or a broken link on it).
  std::shared_ptr<const HierPlan> hierPlan;
  // The 2D torus's grid, rows as nodes (core/torus_grid.h); null when the
  // rank count has none or a broken link lies on its rings.
  std::shared_ptr<const HierPlan> torusPlan;
  int minChannels = 1;
  int localRanks = 1;           // ranks of this communicator on this host
  int machineRanks = 1;         // ranks on this physical machine (they share its cores)
  bool oversubscribed = false;  // machineRanks > available cores
  int64_t stepBytes = 0;
  int chunkSteps = 4;
  // Shape from the channel plan (core/channels.cc): nodes are hosts, or
  // groups of WEFT_RANKS_PER_NODE ranks; treeDepth 0 when no trees exist.
  int nnodes = 1;
  int ranksPerNode = 1;
  int treeDepth = 0;
  tuning::AlgoFilter algoFilter;
  tuning::ProtoFilter protoFilter;              // NCCL_PROTO
  std::unique_ptr<tuning::TunerSession> tuner;  // NCCL_TUNER_PLUGIN; null: none
  // NCCL_PROFILER_PLUGIN's session (null: none; core/profiler.h), and the
  // collectives launched so far per kind, its events' sequence numbers.
  std::unique_ptr<ProfilerSession> profiler;
  uint64_t profiledSeq[static_cast<int>(device::Func::kCount)] = {};
  // The cost model's figures (WEFT_TUNING_FILE or the backend's defaults,
  // rank 0's on every rank) and how ranks of a node reach each other.
  tuning::TuningFigures figures;
  tuning::LinkType intraLink = tuning::LinkType::kShm;
  // Every link within this node keeps a 128-byte store whole, as LL128 needs
  // (core/channels.cc wholeLineLinks).
  bool wholeLineLinks = false;
  bool directAllowed = true;  // WEFT_DIRECT
  bool directRead = true;     // WEFT_DIRECT_READ
  // Per rank, the node it belongs to (0..nnodes-1). Ranks of different
  // nodes connect only through the network (net transport and proxy).
  std::vector<int> nodeOf;
  std::shared_ptr<const CommTopology> topology;  // set by buildChannels

  std::atomic<uint32_t> abortFlag{0};
  Plan plan;  // the current launch's plan, reused (guarded by execMutex)
  // The lone collective `plan` was made for, when it was one: a launch of
  // the same collective on other buffers reuses the plan (core/launch.cc).
  CollTask plannedTask{};
  bool planReusable = false;
  // When `plan` is that lone collective on one channel of the host backend,
  // needing nothing but the run itself (no connection, network step, worker
  // or self copy), its channel: a repeat runs it directly
  // (launchColl). -1 otherwise. Guarded by execMutex.
  int repeatChannel = -1;
  std::vector<device::CallSignature> repeatSignatures;  // its items' itemSignature(), the sequence updated per call
  std::atomic<int> apiCalls{0};  // API calls inside the library on this comm (ApiCallScope)
  std::atomic<int> state{static_cast<int>(CommState::kInitializing)};
  std::atomic<ncclResult_t> asyncError{ncclInProgress};
  Status failure;          // why the communicator failed (guarded by execMutex)
  std::thread initThread;  // non-blocking init

  std::vector<CollTask> collTasks;
  std::vector<P2pTask> p2pTasks;
  RedOpTable ops;

  std::vector<pid_t> peerPids;  // local peer processes to watch while waiting, else 0
  // Direct mode between processes (host backend); outlives the executor,
  // whose threads use it through waitConfig.direct.
  std::unique_ptr<DirectPeers> directPeers;
  device::HostWaitConfig waitConfig;
  std::unique_ptr<HostExecutor> executor;
  // Created with the first network connection; drives every net link.
  std::unique_ptr<proxy::ProgressEngine> proxy;
  std::atomic<uint32_t> netFailed{0};  // set by the proxy when the network fails
  // The link that failed, when known (injectLinkFailure): its other rank, -1
  // when unknown; failedLinkWhy is written before the release-store of it.
  std::atomic<int> failedLinkPeer{-1};
  std::string failedLinkWhy;
  // Set when another rank's failure notice arrives (core/failure.h); host
  // waits poll it.
  std::atomic<uint32_t> peerFailed{0};
  std::atomic<bool> failureReported{false};  // this rank told its peers already
  uint64_t launchCount = 0;                  // launches so far (proxy operation ids)
  uint64_t collSeq = 0;                      // collectives launched so far (call signatures)
  bool checkCalls = true;                    // WEFT_CHECK_CALLS
  std::unique_ptr<CudaState> cuda;
  // Held while operations run; abort takes it to wait them out. Biased to
  // the calling thread: a repeat runs without taking it (exec_lock.h).
  ExecLock execMutex;

  std::mutex errorMutex;
  std::string lastError;

  InitTimings initTimes;                 // phases of init, for the INFO line
  std::atomic<uint64_t> loggedCalls{0};  // collective and p2p calls logged so far: the COLL lines' opCount
};

// Waits until the proxy has moved every step already handed to it (the last
// sends of a collective may still be in flight when the call returns);
// bounded by WEFT_TIMEOUT, an error names what is left.
Status drainProxy(Comm* comm);

// Validates a handle from the API (null, destroyed, or not a communicator)
// without reading through it unless it is live.
Status checkComm(const ncclComm_t comm, const char* argName = "comm");

}  // namespace weft::core

// The opaque type of the API is the communicator itself.
struct ncclComm : weft::core::Comm {};

namespace weft::core {
inline Comm* asComm(ncclComm_t comm) { return static_cast<Comm*>(comm); }
}  // namespace weft::core
