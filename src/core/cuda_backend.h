// The cuda backend's part of core: per-communicator device state, mirroring
// host-built structures into device memory, launching planned work as
// kernels on the user's stream, and waiting for it at teardown.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "common/status.h"
#include "core/planner.h"
#include "core/window_table.h"
#include "device/backend/cuda/kernel_args.h"
#include "device/backend/cuda/runtime.h"
#include "weft.h"

namespace weft::transport {
struct Connection;
}

namespace weft::core {

struct Comm;

struct CudaState {
  CudaState() = default;
  ~CudaState();
  CudaState(const CudaState&) = delete;
  CudaState& operator=(const CudaState&) = delete;

  int device = -1;
  int threads = 512;
  int sameDeviceRanksInProcess = 1;  // ranks of this communicator on our GPU in this process
  // Blocks of `threads` threads of every kernel the GPU holds at once (0:
  // unknown): with ranks sharing the GPU, all their blocks must fit.
  int residentBlocks = 0;
  // The kernels' abort flag, in pinned host memory mapped into the device
  // (abortDevice is the kernels' address of it). Raised by ncclCommAbort, and
  // by the proxy when the network fails: on a cuda communicator it is the
  // proxy's failure flag (proxyFailureFlag), so kernels waiting on a network
  // FIFO stop without any host thread watching (see cudaKernelFailure).
  std::atomic<uint32_t>* abortHost = nullptr;
  uint32_t* abortDevice = nullptr;
  // One wait report per block, pinned host memory mapped into the device
  // (device/wait_report.h; read in cudaKernelFailure).
  device::WaitReport* reportsHost = nullptr;
  device::WaitReport* reportsDevice = nullptr;
  // A peer exit the host found under an announced wait (guarded by
  // watchMutex), and when the reports may next be checked for one.
  std::mutex watchMutex;
  device::WaitFailureInfo hostFound;
  std::atomic<int64_t> nextPeerCheckNs{0};
  cuda::Stream internalStream = nullptr;  // made at its first use (cuda_launch.cc)
  cuda::Event joinEvent = nullptr;
  // Recorded after every launch outside graph capture: teardown waits on it,
  // and a launch on another stream than the last one waits on it first.
  cuda::Event doneEvent = nullptr;
  cuda::Stream lastStream = nullptr;
  bool launched = false;
  std::unique_ptr<device::KernelArgs> args;  // reused launch parameters (31 KB)
  // Registered windows (ncclCommWindowRegister; core/cuda_windows.cc), and
  // the kernels' table of them in device memory (null: none). Older tables
  // are kept while the communicator lives (a kernel in flight may read one);
  // the mappings they list go with their window, so a captured graph must
  // not outlive the windows it uses (as under NCCL). Registrations inside a
  // group wait in `pendingWindows` for the group's end.
  std::vector<std::unique_ptr<CudaWindow>> windows;
  std::vector<std::pair<CudaWindow*, WindowRecord>> pendingWindows;
  uint64_t nextWindowId = 1;
  std::shared_ptr<void> windowTable;
  std::vector<std::shared_ptr<void>> retiredWindowTables;
};

// Chooses the backend for a new communicator: cuda when built with CUDA and
// a device is usable, unless WEFT_BACKEND says otherwise.
Result<weftBackend_t> chooseBackend();

// Creates the cuda state after the peers are known (device, abort flag, stream, events).
Status cudaSetup(Comm* comm);
// The word the communicator's proxy raises when the network fails: the
// kernels' abort flag on the cuda backend (so they stop at their next poll),
// comm->netFailed on the host backend (host waits poll it).
std::atomic<uint32_t>* proxyFailureFlag(Comm* comm);

// Why this communicator's kernels were stopped, as the caller's error: the
// network failed (the proxy's message names the link), a wait outlasted
// WEFT_TIMEOUT, or a peer process of this machine exited under an announced
// wait (checked here, at most every WEFT_PEER_CHECK_MS, by any caller; the
// check raises the kernels' abort flag). OK when nothing failed or when
// ncclCommAbort stopped them. Cheap: an atomic load and a clock read.
Status cudaKernelFailure(const Comm& comm);

// Copies a connection's FifoEnd and the channels' ring orders to the device.
Status cudaMirrorConnection(const Comm& comm, transport::Connection* conn);
Status cudaMirrorChannels(Comm* comm);
// Mirrors each channel's views of the exchanges, hierarchical ring and torus
// (with the exchange order and ReduceScatter scratch) into device memory
// when they changed: before a launch, once its connections are made.
Status cudaMirrorAlgoViews(Comm* comm);

// Launches every communicator's plan (comm->plan) on its stream; returns
// once enqueued.
Status cudaLaunch(const std::vector<Comm*>& comms);
// Before planning (nothing advanced yet, so the comms stay usable): the
// streams the comms' queued calls use are ones the launch can run on.
Status cudaCheckStreams(const std::vector<Comm*>& comms);
// Refuses to capture a communicator with network links into a CUDA graph:
// the proxy is told how many steps to move when the host launches, so a
// graph replayed later would wait for steps nobody posts.
Status cudaCheckCapture(const Comm& comm);

// Waits until the communicator's last launch has finished. With `aborting`,
// or once the network failed (the proxy told the kernels to stop), the wait
// gives up after a bound.
Status cudaWaitIdle(Comm* comm, bool aborting);

// Windows on a cuda communicator (ncclCommWindowRegister/Deregister).
// With direct mode allowed (WEFT_DIRECT=1, alike on every rank) registering
// is collective: every rank's buffer is all-gathered, and each rank maps its
// local peers' buffers of other processes through CUDA IPC
// (core/window_table.h), so direct calls between processes on this node
// write into a peer's window (device/windows.h). Inside a group the
// exchanges run at the group's end, in registration order per communicator
// and concurrently across communicators. Without direct mode a window is
// this rank's bookkeeping only. Returns the window's id (the same on every
// rank).
Result<uint64_t> cudaWindowRegister(Comm* comm, void* buff, size_t size);
// Waits for the communicator's kernels, then drops the window and this
// rank's mappings of its peers' buffers.
Status cudaWindowDeregister(Comm* comm, uint64_t id);

// Link-calls this rank's kernels wrote straight into a peer's window in
// another process (FifoEnd::directMapped of the device ends), for
// weftCommDescribe; false while the communicator's kernels still run (the
// counters are read only when they are settled, and reading never waits).
Result<bool> cudaDirectMappedCalls(const Comm& comm, uint64_t* calls);

// Buffers must suit the backend: device-reachable memory for cuda, host
// memory for host. The message names the argument, the pointer and its kind.
Status checkBufferKind(const Comm& comm, const char* name, const void* ptr);

}  // namespace weft::core
