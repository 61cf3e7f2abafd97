// The planner: turns a communicator's queued tasks into one work list per
// channel. Pure: it sees counts, sizes and tasks, not connections or threads.
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "core/task.h"
#include "device/backend/cuda/kernel_args.h"
#include "device/work.h"
#include "tuning/algo.h"
#include "tuning/figures.h"
#include "tuning/proto.h"

namespace weft::tuning {
class TunerSession;
}

namespace weft::core {

struct PlanInputs {
  int rank;
  int nranks;
  int channels;     // channels the communicator built
  int minChannels;  // lowest count a collective may use
  int64_t stepBytes;
  int chunkSteps;
  tuning::Shape shape{1, 1, 1, 0};  // nodes, ranks per node, tree depth
  const tuning::AlgoFilter* algoFilter = nullptr;
  bool treesAvailable = false;    // the backend runs trees and the channels have them
  bool oneShotAvailable = false;  // the backend runs one-shot (cuda: as the extras below)
  bool oversubscribed = false;    // ranks outnumber cores: every hand-off waits for a core
  // The cost model's figures (WEFT_TUNING_FILE or the backend's defaults;
  // null: the host backend's defaults) and how ranks of a node reach each
  // other.
  const tuning::TuningFigures* figures = nullptr;
  tuning::LinkType intraLink = tuning::LinkType::kShm;
  bool exchangeAvailable = false;  // the backend runs Butterfly/HalvingDoubling and a plan exists
  bool hierAvailable = false;      // the backend runs the hierarchical ring and the nodes suit it
  // Protocols: NCCL_PROTO (null: any); whether LL can run (the backend has
  // it and every link is within a node) and is picked without being asked.
  const tuning::ProtoFilter* protoFilter = nullptr;
  bool llPossible = false;
  bool ll128Possible = false;  // LL possible and every link keeps a 128-byte store whole
  bool ll128Trees = false;     // the backend runs trees under LL128 too (else rings only)
  bool llByDefault = false;
  bool llSumOnly = false;  // the backend has LL (and LL128) kernels for the sum and data-only calls only
  // One node and a backend with direct mode: large ring calls write straight
  // into the peers' user buffers where a link reaches them (threads; processes
  // through mapped segments or cross-memory attach), else through the slots.
  bool directPossible = false;
  // In those calls, ring AllReduce's and ReduceScatter's first sends let the
  // next rank read the input in place where it reaches it (WEFT_DIRECT_READ,
  // this rank's own choice).
  bool directRead = false;
  // The backend reads inputs in place (the host's; device::Coop::
  // kHasDirectRead): ReduceScatter, which only reads, runs direct there. The
  // same on every rank, unlike directRead.
  bool readsInPlace = false;
  bool torusAvailable = false;     // the backend runs the 2D torus and the communicator has a grid
  // The backend has one-shot, the exchanges, hierarchical ring and torus for
  // the sum and data-only calls only (extraSumOnly), and takes them only where
  // NCCL_ALGO names them (extraNamedOnly): the cuda backend's, not yet
  // measured on a GPU.
  bool extraSumOnly = false;
  bool extraNamedOnly = false;
  tuning::TorusShape torus{0, 0};  // its rows and columns
  // Call signatures (device/signature.h): off with WEFT_CHECK_CALLS=0. The
  // collectives planned get sequence numbers firstSeq, firstSeq + 1, ...
  bool checkCalls = true;
  uint64_t firstSeq = 0;
  // A tuner plugin's session (NCCL_TUNER_PLUGIN; null: none), and the
  // collectives in the group being planned (its numPipeOps).
  const tuning::TunerSession* tuner = nullptr;
  int pipeOps = 1;
  // Whether to price what is planned (Plan::estimatedUs; ncclGroupSimulateEnd
  // asks, a launch does not), and per rank its node (null: all on one), a
  // send/recv's link there.
  bool estimate = false;
  const std::vector<int>* nodeOf = nullptr;
};

// A send/recv item whose FIFO ends are bound once its connections exist.
struct P2pBinding {
  int channel;
  size_t item;
  int sendPeer;  // -1: none
  int recvPeer;  // -1: none
};

struct SelfCopy {
  const void* src;
  void* dst;
  size_t bytes;
};

// Most channels a communicator has (NCCL_MAX_NCHANNELS is clamped to it).
constexpr int kMaxChannels = 32;

// Consecutive tasks that one kernel can run (same KernelKey): on each
// channel, items [begin[c], end[c]). The host backend ignores batches.
struct Batch {
  device::KernelKey key;
  bool hasP2p = false;
  uint32_t begin[kMaxChannels];
  uint32_t end[kMaxChannels];
};

struct Plan {
  std::vector<std::vector<device::WorkItem>> channels;  // indexed by channel id
  std::vector<Batch> batches;
  std::vector<P2pBinding> p2p;
  std::vector<SelfCopy> selfCopies;
  // Channels whose items talk to every other rank (one-shot): connected to
  // all peers before launch.
  std::vector<int> flatChannels;
  // Channels whose items exchange with partners (butterfly, halving-
  // doubling): connected to the exchange plan's partners and relays first.
  std::vector<int> exchangeChannels;
  // Channels running the hierarchical ring: connected to its neighbours first.
  std::vector<int> hierChannels;
  // Channels running the 2D torus: connected to its row and column neighbours first.
  std::vector<int> torusChannels;
  // The model's time of what was planned, us, when PlanInputs::estimate
  // asks (ncclGroupSimulateEnd): each
  // collective under the algorithm and protocol chosen for it, one after
  // another, then the slowest of the sends and receives (they run side by
  // side); one rank's copies at the copy bandwidth.
  double estimatedUs = 0;
  // Per collective, in call order: how it was planned (a profiler plugin's
  // collective event reports it; core/profiler.h).
  struct CollSummary {
    device::Algo algo;
    device::Proto proto;
    int nChannels;  // channels with a share of it (0: nothing to move)
  };
  std::vector<CollSummary> collSummaries;
  // The planner's scratch for a group's sends and receives (planPeers),
  // kept with the plan so that planning a send/recv call allocates nothing.
  struct PeerTask {
    int distance;  // a send to rank + distance, or a receive from rank - distance
    const P2pTask* task;
  };
  std::vector<PeerTask> peerSends, peerRecvs;

  // Empties the plan for `nChannels` channels, keeping every allocation:
  // the communicator plans each launch into the same Plan.
  void reset(int nChannels);
};

// Fails (ncclInvalidUsage) when sends and receives to self do not pair up.
// Plans into *plan (reset first).
Status planTasks(const PlanInputs& in, const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps,
                 Plan* plan);

// Alignment of channel and chunk boundaries, in bytes.
constexpr int64_t kAlignBytes = 64;

}  // namespace weft::core
