// Launching planned work on the cuda backend. Each batch of a plan becomes
// one kernel (one block per channel with work) on the launch stream.
//
// Streams: normally the kernels go straight onto the user's stream. When
// several communicators in one launch share a device and a stream (one
// thread driving several ranks on one GPU), each gets its own internal
// stream instead, joined to the user's by events in three phases (all joins,
// then all kernels, then all waits), so their kernels can run at the same
// time, which they must, since they wait on each other.
#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/log.h"
#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/datatypes.h"
#include "device/backend/cuda/launch.h"

namespace weft::core {
namespace {

struct Target {
  Comm* comm;
  Plan* plan;
  std::vector<cuda::Stream> userStreams;  // distinct, first one leads
  cuda::Stream launchStream;
  bool ownStream;
  bool captured = false;  // the launch stream is being captured into a graph
};

std::vector<cuda::Stream> streamsOf(const Comm& comm) {
  std::vector<cuda::Stream> streams;
  auto add = [&](cudaStream_t s) {
    if (std::find(streams.begin(), streams.end(), s) == streams.end()) streams.push_back(s);
  };
  for (const CollTask& t : comm.collTasks) add(t.stream);
  for (const P2pTask& t : comm.p2pTasks) add(t.stream);
  return streams;
}

Status checkLegacyStream(const Target& t, int peersInLaunch) {
  const CudaState& state = *t.comm->cuda;
  if (state.sameDeviceRanksInProcess <= peersInLaunch) return okStatus();
  if (!cuda::streamIsLegacyDefault(t.userStreams[0])) {
    // A blocking stream (cudaStreamCreate) waits for, and is waited for by,
    // the legacy default stream: any legacy-stream work of this process (a
    // synchronous cudaMemcpy) waits for this rank's kernel, which may wait for
    // the very rank that issued it. Allowed (the user may never do that), said once.
    static std::atomic<bool> warned{false};
    if (cuda::streamIsBlocking(t.userStreams[0]) && !warned.exchange(true))
      WEFT_WARN("rank %d shares GPU %d with other ranks of this process and runs on a blocking stream: legacy "
                "default stream work in this process (a synchronous cudaMemcpy, cudaMemset) then waits for kernels "
                "that may wait for its own thread, a deadlock; create the ranks' streams with "
                "cudaStreamNonBlocking",
                t.comm->rank, t.comm->cudaDev);
    return okStatus();
  }
  return errorStatus(ncclInvalidUsage,
                     "rank %d shares GPU %d with %d other ranks of this communicator in this process, and uses the "
                     "legacy default stream, which would serialize their kernels and deadlock: give each rank its own "
                     "stream (cudaStreamCreateWithFlags with cudaStreamNonBlocking), or drive them from one thread in "
                     "one group",
                     t.comm->rank, t.comm->cudaDev, state.sameDeviceRanksInProcess - 1);
}

Status launchRound(Comm& comm, const Batch& batch, const Plan& plan, uint32_t skip, uint32_t take,
                   cuda::Stream stream) {
  device::KernelArgs& args = *comm.cuda->args;
  args.abortFlag = comm.cuda->abortDevice;
  args.reports = comm.cuda->reportsDevice;
  args.timeoutNs = comm.waitConfig.timeoutNs;
  args.windows = static_cast<const device::WindowTable*>(comm.cuda->windowTable.get());
  int nblocks = 0;
  uint32_t nitems = 0;
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    const uint32_t first = batch.begin[c] + skip;
    if (first >= batch.end[c]) continue;
    const uint32_t count = std::min(take, batch.end[c] - first);
    device::KernelChannel& kc = args.channels[nblocks++];
    kc.view = comm.channels[c].deviceView(comm.rank);
    kc.firstItem = static_cast<uint16_t>(nitems);
    kc.itemCount = static_cast<uint16_t>(count);
    std::memcpy(&args.items[nitems], &plan.channels[c][first], count * sizeof(device::WorkItem));
    nitems += count;
  }
  if (nblocks == 0) return okStatus();
  args.nchannels = nblocks;
  const int rc = device::launchKernel(batch.key, args, comm.cuda->threads, stream);
  if (rc == device::kKernelNotBuilt)
    return errorStatus(ncclInvalidUsage,
                       "the kernel for %s/%d was filtered out of this build (WEFT_CUDA_TYPES, "
                       "WEFT_CUDA_OPS): rebuild with the default 'all'",
                       typeName(static_cast<ncclDataType_t>(batch.key.dtype)), static_cast<int>(batch.key.op));
  return cuda::errorFromCode(rc, "kernel launch");
}

// One batch; splits collective batches that exceed a launch's capacity.
// Point-to-point batches are never split: ranks plan different numbers of
// them, and a split could separate a send from the receive it waits on.
Status launchBatch(Comm& comm, const Plan& plan, const Batch& batch, cuda::Stream stream) {
  uint32_t longest = 0;
  uint32_t total = 0;
  int busy = 0;
  for (size_t c = 0; c < plan.channels.size(); ++c) {
    const uint32_t n = batch.end[c] - batch.begin[c];
    longest = std::max(longest, n);
    total += n;
    busy += n > 0 ? 1 : 0;
  }
  if (total <= static_cast<uint32_t>(device::kMaxKernelItems))
    return launchRound(comm, batch, plan, 0, longest, stream);
  if (batch.hasP2p)
    return errorStatus(ncclInvalidUsage,
                       "rank %d: a group with %u send/recv work items exceeds the cuda backend's "
                       "%d per launch; split the group",
                       comm.rank, total, device::kMaxKernelItems);
  const uint32_t perRound = static_cast<uint32_t>(device::kMaxKernelItems / busy);
  for (uint32_t skip = 0; skip < longest; skip += perRound)
    WEFT_RETURN_IF_ERROR(launchRound(comm, batch, plan, skip, perRound, stream));
  return okStatus();
}

// Ranks of this process on this GPU wait on each other's blocks: a launch
// whose blocks, times those ranks, exceed what the GPU holds at once would
// leave some of them waiting for blocks that never start.
Status checkResidency(const Target& t) {
  const CudaState& state = *t.comm->cuda;
  if (state.sameDeviceRanksInProcess < 2 || state.residentBlocks <= 0) return okStatus();
  int blocks = 0;
  for (const Batch& batch : t.plan->batches) {
    int busy = 0;
    for (size_t c = 0; c < t.plan->channels.size(); ++c) busy += batch.end[c] > batch.begin[c] ? 1 : 0;
    blocks = std::max(blocks, busy);
  }
  if (static_cast<int64_t>(blocks) * state.sameDeviceRanksInProcess <= state.residentBlocks) return okStatus();
  return errorStatus(ncclInvalidUsage,
                     "rank %d: %d ranks of this process share GPU %d and this call runs %d blocks of %d threads on "
                     "each, %d in all, but the GPU holds %d at once and the ranks' blocks wait on each other: lower "
                     "NCCL_MAX_NCHANNELS or NCCL_NTHREADS",
                     t.comm->rank, state.sameDeviceRanksInProcess, t.comm->cudaDev, blocks, state.threads,
                     blocks * state.sameDeviceRanksInProcess, state.residentBlocks);
}

// Before the target's kernels: the call-order wait and the self-copies.
Status beginTarget(Target& t) {
  CudaState& state = *t.comm->cuda;
  t.captured = cuda::streamIsCapturing(t.launchStream);
  // A communicator's launches run in call order, as NCCL's do, whatever
  // streams they come on: they share its FIFO positions and slots.
  if (!t.captured && state.launched && state.lastStream != t.launchStream)
    WEFT_RETURN_IF_ERROR(cuda::streamWaitEvent(t.launchStream, state.doneEvent));
  for (const SelfCopy& copy : t.plan->selfCopies)
    WEFT_RETURN_IF_ERROR(cuda::copyAsync(copy.dst, copy.src, copy.bytes, t.launchStream));
  return okStatus();
}

// After them: the events teardown and the user streams wait on.
Status finishTarget(Target& t) {
  CudaState& state = *t.comm->cuda;
  // Captured: an event recorded in a capture cannot be queried afterwards
  // (cudaErrorCapturedEvent), so doneEvent stays outside graphs; the join
  // event carries the user streams' wait (phase 3), and replaying the graph
  // is the caller's to wait for, as with NCCL.
  if (t.captured) return cuda::eventRecord(state.joinEvent, t.launchStream);
  state.launched = true;
  state.lastStream = t.launchStream;
  return cuda::eventRecord(state.doneEvent, t.launchStream);
}

}  // namespace

Status cudaCheckCapture(const Comm& comm) {
  if (!comm.proxy) return okStatus();
  for (cuda::Stream s : streamsOf(comm))
    if (cuda::streamIsCapturing(s))
      return errorStatus(ncclInvalidUsage,
                         "rank %d: capturing collectives into a CUDA graph is not supported on a communicator with "
                         "network links (the proxy moves the steps of each host launch, not of graph replays); "
                         "capture on a single-node communicator, or launch without a graph",
                         comm.rank);
  return okStatus();
}

namespace {

std::vector<Target> targetsOf(const std::vector<Comm*>& comms) {
  std::vector<Target> targets;
  for (Comm* comm : comms) {
    std::vector<cuda::Stream> streams = streamsOf(*comm);
    if (streams.empty()) streams.push_back(nullptr);
    targets.push_back({comm, &comm->plan, streams, streams[0], false});
  }
  return targets;
}

// How many of the launch's targets share t's GPU and lead stream (t included).
int sharingOf(const Target& t, const std::vector<Target>& targets) {
  int sharing = 0;
  for (const Target& o : targets) sharing += o.comm->cudaDev == t.comm->cudaDev && o.userStreams[0] == t.userStreams[0];
  return sharing;
}

}  // namespace

Status cudaCheckStreams(const std::vector<Comm*>& comms) {
  // Every launch passes here: only ranks sharing a GPU in this process have anything to check.
  if (std::none_of(comms.begin(), comms.end(), [](const Comm* c) { return c->cuda->sameDeviceRanksInProcess > 1; }))
    return okStatus();
  const std::vector<Target> targets = targetsOf(comms);
  for (const Target& t : targets) WEFT_RETURN_IF_ERROR(checkLegacyStream(t, sharingOf(t, targets)));
  return okStatus();
}

Status cudaLaunch(const std::vector<Comm*>& comms) {
  std::vector<Target> targets = targetsOf(comms);
  for (Target& t : targets) {
    const int sharing = sharingOf(t, targets);
    WEFT_RETURN_IF_ERROR(checkResidency(t));
    t.ownStream = sharing > 1 || t.userStreams.size() > 1;
    if (!t.ownStream) continue;
    CudaState& state = *t.comm->cuda;
    if (state.internalStream == nullptr) {
      cuda::DeviceGuard guard(t.comm->cudaDev);
      WEFT_ASSIGN_OR_RETURN(state.internalStream, cuda::streamCreate());
    }
    t.launchStream = state.internalStream;
  }
  // Phase 1: every launch stream waits for the work already on its user streams.
  for (Target& t : targets) {
    cuda::DeviceGuard guard(t.comm->cudaDev);
    if (!t.ownStream) continue;
    for (cuda::Stream s : t.userStreams) {
      WEFT_RETURN_IF_ERROR(cuda::eventRecord(t.comm->cuda->joinEvent, s));
      WEFT_RETURN_IF_ERROR(cuda::streamWaitEvent(t.launchStream, t.comm->cuda->joinEvent));
    }
  }
  // Phase 2: the kernels, breadth first: every target's first batch, then
  // every target's second... Streams may share a hardware queue (more
  // streams than CUDA_DEVICE_MAX_CONNECTIONS), which starts its kernels in
  // the order they were queued; a target's second kernel, which waits for
  // its first, queued before a peer's first kernel that the first waits
  // for, would block the queue for good (ranks sharing a GPU, driven from
  // one thread in a group).
  size_t rounds = 0;
  for (Target& t : targets) {
    cuda::DeviceGuard guard(t.comm->cudaDev);
    WEFT_RETURN_IF_ERROR(beginTarget(t));
    rounds = std::max(rounds, t.plan->batches.size());
  }
  for (size_t b = 0; b < rounds; ++b)
    for (Target& t : targets) {
      if (b >= t.plan->batches.size()) continue;
      cuda::DeviceGuard guard(t.comm->cudaDev);
      WEFT_RETURN_IF_ERROR(launchBatch(*t.comm, *t.plan, t.plan->batches[b], t.launchStream));
    }
  for (Target& t : targets) {
    cuda::DeviceGuard guard(t.comm->cudaDev);
    WEFT_RETURN_IF_ERROR(finishTarget(t));
  }
  // Phase 3: user streams continue after the collective work.
  for (Target& t : targets) {
    cuda::DeviceGuard guard(t.comm->cudaDev);
    if (!t.ownStream) continue;
    const cuda::Event done = t.captured ? t.comm->cuda->joinEvent : t.comm->cuda->doneEvent;
    for (cuda::Stream s : t.userStreams) WEFT_RETURN_IF_ERROR(cuda::streamWaitEvent(s, done));
  }
  return okStatus();
}

}  // namespace weft::core
