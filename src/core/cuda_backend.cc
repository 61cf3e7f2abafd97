#include "core/cuda_backend.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/log.h"
#include "common/params.h"
#include "common/process.h"
#include "core/comm.h"
#include "core/cuda_watch.h"
#include "core/datatypes.h"
#include "core/failure.h"
#include "device/backend/cuda/launch.h"

namespace weft::core {

CudaState::~CudaState() {
  cuda::DeviceGuard guard(device);
  cuda::eventDestroy(joinEvent);
  cuda::eventDestroy(doneEvent);
  cuda::streamDestroy(internalStream);
  cuda::hostFree(abortHost);
  cuda::hostFree(reportsHost);
}

Result<weftBackend_t> chooseBackend() {
  const std::string forced = param::backend();
  if (forced == "host") return weftBackendHost;
  if (forced == "cuda") {
    if (!cuda::built()) return errorStatus(ncclInvalidUsage, "WEFT_BACKEND=cuda, but this Weft was built without CUDA");
    if (cuda::deviceCount() == 0)
      return errorStatus(ncclInvalidUsage, "WEFT_BACKEND=cuda, but no usable CUDA device was found");
    return weftBackendCuda;
  }
  if (!forced.empty())
    return errorStatus(ncclInvalidArgument, "WEFT_BACKEND is \"%s\", expected host or cuda", forced.c_str());
  return cuda::deviceCount() > 0 ? weftBackendCuda : weftBackendHost;
}

namespace {

// Once per device and process, before the first kernel: the stack the
// largest kernel needs. Left to the driver, the first launch that needs more
// grows it, and may wait for earlier work on the device to finish first,
// such as another rank's kernel waiting for this one (ranks sharing a GPU).
void reserveKernelStack(int device) {
  static std::mutex mutex;
  static std::vector<int>* done = new std::vector<int>();  // never freed: used until exit
  std::lock_guard<std::mutex> lock(mutex);
  if (std::find(done->begin(), done->end(), device) != done->end()) return;
  done->push_back(device);
  const size_t bytes = device::kernelStackBytes();
  const Status reserved = cuda::reserveStack(bytes);
  if (!reserved.ok())
    WEFT_WARN("GPU %d: could not reserve %zu bytes of kernel stack per thread (%s); the first launch will grow it",
              device, bytes, reserved.message().c_str());
}

// Ranks of one process on one GPU each launch on their own stream, and CUDA
// feeds at most CUDA_DEVICE_MAX_CONNECTIONS hardware queues (8 by default);
// streams beyond that share a queue in the order work was queued, so a
// rank's second kernel, waiting in line behind its first, can hold back a
// peer's first kernel that its first is waiting for. Said once per process.
void warnSharedQueues(int device, int ranks) {
  static std::atomic<bool> warned{false};
  const char* env = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  const long queues = env != nullptr ? std::strtol(env, nullptr, 10) : 8;
  if (queues >= 2L * ranks || warned.exchange(true)) return;
  WEFT_WARN("%d ranks of this process share GPU %d, and CUDA feeds the GPU through %ld hardware queues "
            "(CUDA_DEVICE_MAX_CONNECTIONS%s): streams that share a queue run in the order work was queued, so a "
            "rank's kernel queued behind its own earlier one can hold back the peer kernel that one waits for. "
            "Set CUDA_DEVICE_MAX_CONNECTIONS=32 before CUDA starts, or drive the ranks from one thread in one group",
            ranks, device, queues, env != nullptr ? "" : " unset: 8");
}

}  // namespace

Status cudaSetup(Comm* comm) {
  const PhaseTimer timer(&comm->initTimes.alloc);
  auto state = std::make_unique<CudaState>();
  state->device = comm->cudaDev;
  cuda::DeviceGuard guard(state->device);
  reserveKernelStack(state->device);
  const int64_t threads = param::nThreads();
  state->threads = threads > 0 ? static_cast<int>(std::clamp<int64_t>(threads, 64, 1024) / 32 * 32) : 512;
  void* host = nullptr;
  void* dev = nullptr;
  // The host (ncclCommAbort, the proxy) writes the flag as a lock-free
  // atomic; kernels read the same 4 bytes as a uint32_t with system-scope
  // loads (cuda_coop.cuh). The layouts must agree.
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t) && std::atomic<uint32_t>::is_always_lock_free,
                "the abort flag is shared with kernels as a plain uint32_t");
  WEFT_RETURN_IF_ERROR(cuda::hostAllocMapped(sizeof(std::atomic<uint32_t>), &host, &dev));
  state->abortHost = new (host) std::atomic<uint32_t>(0);
  state->abortDevice = static_cast<uint32_t*>(dev);
  const size_t reportBytes = sizeof(device::WaitReport) * device::kMaxKernelChannels;
  WEFT_RETURN_IF_ERROR(cuda::hostAllocMapped(reportBytes, &host, &dev));
  std::memset(host, 0, reportBytes);  // every block idle
  state->reportsHost = static_cast<device::WaitReport*>(host);
  state->reportsDevice = static_cast<device::WaitReport*>(dev);
  WEFT_ASSIGN_OR_RETURN(state->joinEvent, cuda::eventCreate());
  WEFT_ASSIGN_OR_RETURN(state->doneEvent, cuda::eventCreate());
  state->args = std::make_unique<device::KernelArgs>();
  const PeerInfo& me = comm->peers[static_cast<size_t>(comm->rank)];
  state->sameDeviceRanksInProcess =
      static_cast<int>(std::count_if(comm->peers.begin(), comm->peers.end(), [&](const PeerInfo& p) {
        return p.processHash == me.processHash && std::strcmp(p.busId, me.busId) == 0;
      }));
  if (state->sameDeviceRanksInProcess > 1) {
    state->residentBlocks = device::residentBlocks(state->threads);
    warnSharedQueues(state->device, state->sameDeviceRanksInProcess);
  }
  comm->cuda = std::move(state);
  return okStatus();
}

// Why the proxy raises the kernels' own abort flag on a cuda communicator:
// a kernel waiting on a network FIFO polls only that flag (and its FIFO), and
// nothing on the host waits for the kernel while it runs (the call returned
// at launch). With the proxy as the writer, a network failure stops every
// kernel of the communicator at its next poll (about every 1024 polls), with
// no watcher thread and no call needed from the user; the user's stream then
// completes, and the next collective or send/recv on the communicator (see
// launch.cc) and ncclCommFinalize return the proxy's error, which names the
// link. The proxy never outlives the flag: ~Comm stops it before any member
// (CudaState included) is destroyed.
std::atomic<uint32_t>* proxyFailureFlag(Comm* comm) {
  if (comm->backend == weftBackendCuda && comm->cuda) return comm->cuda->abortHost;
  return &comm->netFailed;
}

namespace {

// At most every WEFT_PEER_CHECK_MS, by whichever thread gets there first:
// an announced wait on a local peer process that is gone stops the kernels.
void checkWaitedPeers(const Comm& comm, CudaState* state) {
  const int64_t now = nowNs();
  int64_t next = state->nextPeerCheckNs.load(std::memory_order_relaxed);
  if (now < next || !state->nextPeerCheckNs.compare_exchange_strong(next, now + comm.waitConfig.peerCheckNs)) return;
  device::WaitFailureInfo found;
  if (!waitOnExitedPeer(state->reportsHost, device::kMaxKernelChannels, comm.waitConfig.peerPids, comm.nranks,
                        processAlive, &found))
    return;
  {
    std::lock_guard<std::mutex> lock(state->watchMutex);
    if (state->hostFound.kind == device::WaitFailure::kNone) state->hostFound = found;
  }
  state->abortHost->store(1u, std::memory_order_release);  // kernels stop at their next poll
}

}  // namespace

Status cudaKernelFailure(const Comm& comm) {
  CudaState* state = comm.cuda.get();
  if (state == nullptr) return okStatus();
  if (state->abortHost->load(std::memory_order_acquire) == 0) {
    checkWaitedPeers(comm, state);
    // Acquire pairs with the release of the flag by the proxy (after it
    // recorded its failure), by a block (after its report) or by the check.
    if (state->abortHost->load(std::memory_order_acquire) == 0) return okStatus();
  }
  // Another rank's failure notice raised it (core/failure.cc).
  const Status noticed = noticedFailure(comm);
  if (!noticed.ok()) return noticed.withContext("the kernels of this communicator were stopped");
  // The proxy first, and only once the flag is up: a thread polling
  // ncclCommGetAsyncError may run while a launch creates the proxy.
  const Status net = comm.proxy ? comm.proxy->failure() : Status();
  if (!net.ok())
    return Status(net.code(), strFormat("rank %d: %s. The network failed under this communicator's kernels, which "
                                        "were stopped: a peer on another node exited, aborted or lost its network; "
                                        "the communicator is unusable: destroy or abort it",
                                        comm.rank, net.message().c_str()));
  device::WaitFailureInfo failure;
  {
    std::lock_guard<std::mutex> lock(state->watchMutex);
    failure = state->hostFound;
  }
  if (failure.kind == device::WaitFailure::kNone &&
      !recordedWaitFailure(state->reportsHost, device::kMaxKernelChannels, &failure)) {
    if (comm.abortFlag.load() != 0) return okStatus();  // raised by ncclCommAbort
    // Every writer of the flag records why first; a flag with no reason
    // would otherwise read as success while the kernels skip their waits.
    return errorStatus(ncclInternalError,
                       "rank %d: the kernels of this communicator were stopped, and no failure was recorded: the "
                       "communicator is unusable: destroy or abort it",
                       comm.rank);
  }
  return describeWaitFailure(comm, failure).withContext("a kernel of this communicator");
}

namespace {

// Device memory of the current device (`device`) holding a copy of `bytes`
// at `src` (null: zero-filled), freed with its last owner.
Result<std::shared_ptr<void>> deviceBlock(int device, const void* src, size_t bytes) {
  WEFT_ASSIGN_OR_RETURN(void* ptr, cuda::deviceAlloc(bytes));
  std::shared_ptr<void> owner(ptr, [device](void* p) {
    cuda::DeviceGuard g(device);
    cuda::deviceFree(p);
  });
  if (src != nullptr) WEFT_RETURN_IF_ERROR(cuda::copyToDevice(ptr, src, bytes));
  return owner;
}

}  // namespace

Status cudaMirrorConnection(const Comm& comm, transport::Connection* conn) {
  cuda::DeviceGuard guard(comm.cudaDev);
  WEFT_ASSIGN_OR_RETURN(conn->deviceEndOwner, deviceBlock(comm.cudaDev, &conn->end, sizeof(device::FifoEnd)));
  conn->deviceEnd = static_cast<device::FifoEnd*>(conn->deviceEndOwner.get());
  return okStatus();
}

Status cudaMirrorChannels(Comm* comm) {
  const PhaseTimer timer(&comm->initTimes.alloc);
  cuda::DeviceGuard guard(comm->cudaDev);
  for (Channel& channel : comm->channels) {
    const size_t bytes = channel.ringOrder.size() * sizeof(int32_t);
    WEFT_ASSIGN_OR_RETURN(channel.deviceRingOrder, deviceBlock(comm->cudaDev, channel.ringOrder.data(), bytes));
  }
  return okStatus();
}

Status cudaMirrorAlgoViews(Comm* comm) {
  for (Channel& channel : comm->channels) {
    if (!channel.hasAlgoViews() || channel.mirroredGeneration == channel.viewGeneration()) continue;
    cuda::DeviceGuard guard(comm->cudaDev);
    if (channel.exchangePlan != nullptr && !channel.devicePhysical) {
      const std::vector<int32_t>& order = channel.exchangePlan->physical;
      WEFT_ASSIGN_OR_RETURN(channel.devicePhysical,
                            deviceBlock(comm->cudaDev, order.data(), order.size() * sizeof(int32_t)));
    }
    if (channel.exchangeScratchBytes > 0 && !channel.deviceExchangeScratch) {
      WEFT_ASSIGN_OR_RETURN(channel.deviceExchangeScratch,
                            deviceBlock(comm->cudaDev, nullptr, static_cast<size_t>(channel.exchangeScratchBytes)));
    }
    device::AlgoViews views;
    WEFT_RETURN_IF_ERROR(channel.mirroredAlgos(comm->rank, static_cast<const int32_t*>(channel.devicePhysical.get()),
                                               channel.deviceExchangeScratch.get(), &views));
    WEFT_ASSIGN_OR_RETURN(std::shared_ptr<void> copy, deviceBlock(comm->cudaDev, &views, sizeof views));
    channel.deviceAlgos.push_back(std::move(copy));
    channel.mirroredGeneration = channel.viewGeneration();
  }
  return okStatus();
}

Status checkBufferKind(const Comm& comm, const char* name, const void* ptr) {
  if (ptr == nullptr || !comm.gpusVisible) return okStatus();  // no device: no pointer can be device memory
  int device = -1;
  const cuda::MemoryKind kind = cuda::pointerKind(ptr, &device);
  if (comm.backend == weftBackendHost && kind == cuda::MemoryKind::kDevice)
    return errorStatus(ncclInvalidArgument,
                       "%s %p is device memory of GPU %d, but this communicator runs on the host backend "
                       "(WEFT_BACKEND=host or no usable GPU at init): pass host memory",
                       name, ptr, device);
  if (comm.backend == weftBackendCuda && kind == cuda::MemoryKind::kDevice && device != comm.cudaDev)
    return errorStatus(ncclInvalidArgument,
                       "%s %p is device memory of GPU %d, but this communicator's rank runs on GPU %d: pass memory "
                       "of GPU %d",
                       name, ptr, device, comm.cudaDev, comm.cudaDev);
  if (comm.backend == weftBackendCuda && kind == cuda::MemoryKind::kHost)
    return errorStatus(ncclInvalidArgument,
                       "%s %p is pageable host memory, but this communicator runs on the cuda backend: pass device "
                       "memory (cudaMalloc, ncclMemAlloc) or pinned mapped host memory",
                       name, ptr);
  return okStatus();
}

Status cudaWaitIdle(Comm* comm, bool aborting) {
  CudaState* state = comm->cuda.get();
  if (state == nullptr) return okStatus();
  // Raised even when nothing was launched outside a capture: a replay of a
  // captured graph may be spinning on this communicator's FIFOs right now,
  // and it has no event here to wait for.
  if (aborting) state->abortHost->store(1u, std::memory_order_release);
  if (!state->launched) return okStatus();
  cuda::DeviceGuard guard(state->device);
  bool stopping = false;
  std::chrono::steady_clock::time_point stopSince;
  for (;;) {
    Result<bool> done = cuda::eventDone(state->doneEvent);
    if (!done.ok()) return done.status();
    if (done.value()) return okStatus();
    // Raised by abort above, by the proxy when the network failed, by a block
    // that timed out, or by the peer check: the kernels stop at their next
    // poll, so from then on the wait is bounded.
    if (!stopping) checkWaitedPeers(*comm, state);
    if (!stopping && state->abortHost->load(std::memory_order_relaxed) != 0) {
      stopping = true;
      stopSince = std::chrono::steady_clock::now();
    }
    if (stopping && std::chrono::steady_clock::now() - stopSince > std::chrono::seconds(10))
      return errorStatus(ncclInternalError, "rank %d: kernels still running 10 s after %s; their memory is leaked",
                         comm->rank, aborting ? "abort" : "they were told to stop (a failure; see the warnings above)");
    std::this_thread::sleep_for(std::chrono::microseconds(stopping ? 1000 : 50));
  }
}

}  // namespace weft::core
