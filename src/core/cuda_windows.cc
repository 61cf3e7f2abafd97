// Windows on a cuda communicator: the exchange at registration and the
// kernels' table (core/window_table.h says what reaches what).
#include <cstring>

#include "common/log.h"
#include "core/bootstrap.h"
#include "core/comm.h"
#include "core/cuda_backend.h"
#include "core/group.h"

namespace weft::core {
namespace {

// This rank's part: its buffer, and a CUDA IPC handle of the allocation
// holding it where the driver gives one (cudaMalloc memory does; a
// stream-ordered pool's or host memory does not: then peers in other
// processes reach it through the slots).
WindowRecord describeOwn(const Comm& comm, void* buff, size_t size) {
  WindowRecord rec{};
  rec.base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buff));
  rec.bytes = size;
  if (buff == nullptr || size == 0) return rec;
  cuda::DeviceGuard guard(comm.cudaDev);
  Result<cuda::AllocationRange> range = cuda::allocationRange(buff);
  Status exported = range.status();
  if (range.ok()) {
    rec.allocOffset = rec.base - static_cast<uint64_t>(reinterpret_cast<uintptr_t>(range.value().base));
    static_assert(kWindowIpcBytes == cuda::kIpcHandleBytes, "IPC handle size");
    exported = cuda::ipcGetHandle(range.value().base, rec.ipc);
  }
  rec.exported = exported.ok() ? 1 : 0;
  if (!exported.ok())
    WEFT_INFO(log::kAlloc, "window: rank %d cannot export %p (%s); peers in other processes use the FIFO", comm.rank,
              buff, exported.message().c_str());
  return rec;
}

Result<std::shared_ptr<void>> openPeer(int device, const WindowRecord& rec) {
  cuda::DeviceGuard guard(device);
  WEFT_ASSIGN_OR_RETURN(void* mapped, cuda::ipcOpenHandle(rec.ipc));
  return std::shared_ptr<void>(mapped, [device](void* p) {
    cuda::DeviceGuard g(device);
    cuda::ipcCloseHandle(p);
  });
}

// Copies the live windows' table to the device; the previous copy is retired.
Status publishTable(Comm* comm) {
  CudaState& state = *comm->cuda;
  if (state.windowTable) state.retiredWindowTables.push_back(std::move(state.windowTable));
  state.windowTable.reset();
  if (state.windows.empty()) return okStatus();
  std::vector<WindowEntry> entries;
  for (const auto& w : state.windows) entries.push_back({w->id, w->base, w->bytes, &w->reach.peers});
  cuda::DeviceGuard guard(state.device);
  const size_t bytes = layOutWindowTable(entries, comm->nranks, 0).size();
  WEFT_ASSIGN_OR_RETURN(void* at, cuda::deviceAlloc(bytes));
  std::shared_ptr<void> owner(at, [device = state.device](void* p) {
    cuda::DeviceGuard g(device);
    cuda::deviceFree(p);
  });
  const std::vector<uint8_t> block = layOutWindowTable(entries, comm->nranks, reinterpret_cast<uintptr_t>(at));
  WEFT_RETURN_IF_ERROR(cuda::copyToDevice(at, block.data(), block.size()));
  state.windowTable = std::move(owner);
  return okStatus();
}

// Fills `window`'s reach from every rank's record (collective).
Status exchange(Comm* comm, CudaWindow* window, const WindowRecord& own) {
  std::vector<WindowRecord> records(static_cast<size_t>(comm->nranks));
  records[static_cast<size_t>(comm->rank)] = own;
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(records.data(), sizeof(WindowRecord)));
  const int device = comm->cudaDev;
  window->reach = windowPeers(comm->rank, comm->peers, records,
                              [device](int, const WindowRecord& rec) { return openPeer(device, rec); });
  if (window->reach.unreachableLocal > 0)
    WEFT_INFO(log::kInit, "rank %d: window %llu: %d peers of this node in other processes are not mapped", comm->rank,
              static_cast<unsigned long long>(window->id), window->reach.unreachableLocal);
  return okStatus();
}

void dropWindow(CudaState* state, const CudaWindow* window) {
  for (auto it = state->windows.begin(); it != state->windows.end(); ++it)
    if (it->get() == window) {
      state->windows.erase(it);
      return;
    }
}

// A group's registrations on one communicator, one after another in the
// order they were made (the same on every rank: each exchange is one
// all-gather on the communicator's bootstrap, which carries one at a time),
// then one table for all of them.
Status exchangePending(Comm* comm) {
  CudaState& state = *comm->cuda;
  std::vector<std::pair<CudaWindow*, WindowRecord>> pending;
  pending.swap(state.pendingWindows);
  Status failed;
  for (auto& [window, own] : pending) {
    if (!failed.ok()) continue;
    failed = exchange(comm, window, own);
  }
  WEFT_RETURN_IF_ERROR(failed);
  return publishTable(comm);
}

}  // namespace

Result<uint64_t> cudaWindowRegister(Comm* comm, void* buff, size_t size) {
  if (!comm->cuda)
    return errorStatus(ncclInvalidUsage,
                       "rank %d: the communicator is not initialised yet (created in the same group?): register "
                       "windows after the group that creates it has ended",
                       comm->rank);
  CudaState& state = *comm->cuda;
  auto window = std::make_unique<CudaWindow>();
  window->id = state.nextWindowId++;
  window->base = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(buff));
  window->bytes = size;
  // Until the exchange, no peer is reachable.
  window->reach.peers.assign(static_cast<size_t>(comm->nranks), device::WindowPeer{0, 0});
  const uint64_t id = window->id;
  // Without direct mode no kernel asks for a window: bookkeeping, no exchange.
  if (!comm->directAllowed) {
    state.windows.push_back(std::move(window));
    return id;
  }
  const WindowRecord own = describeOwn(*comm, buff, size);
  CudaWindow* raw = window.get();
  if (inGroup()) {
    if (state.pendingWindows.empty()) groupDeferInit(comm, [comm] { return exchangePending(comm); });
    state.pendingWindows.emplace_back(raw, own);
    state.windows.push_back(std::move(window));
    return id;
  }
  WEFT_RETURN_IF_ERROR(exchange(comm, raw, own));
  state.windows.push_back(std::move(window));
  Status published = publishTable(comm);
  if (!published.ok()) {
    dropWindow(&state, raw);  // the caller gets no handle: nothing may name it
    return published;
  }
  return id;
}

Status cudaWindowDeregister(Comm* comm, uint64_t id) {
  CudaState& state = *comm->cuda;
  for (const auto& pending : state.pendingWindows)
    if (pending.first->id == id)
      return errorStatus(ncclInvalidUsage,
                         "window %llu was registered in a group that has not ended: deregister it after ncclGroupEnd",
                         static_cast<unsigned long long>(id));
  WEFT_RETURN_IF_ERROR(cudaWaitIdle(comm, false));
  for (const auto& w : state.windows) {
    if (w->id != id) continue;
    dropWindow(&state, w.get());
    WEFT_RETURN_IF_ERROR(publishTable(comm));
    // Collective where registration was (direct mode: the exchange), as in
    // NCCL 2.27: no rank returns before every rank has closed its mappings
    // of the window's buffers, so an owner may free its buffer once its own
    // call returns (memory freed while a peer still maps it is undefined
    // for CUDA IPC). In a group, at its end, as registration's exchange.
    if (!comm->directAllowed) return okStatus();
    if (inGroup()) {
      groupDeferInit(comm, [comm] { return comm->bootstrap->barrier(); });
      return okStatus();
    }
    return comm->bootstrap->barrier();
  }
  return errorStatus(ncclInvalidArgument, "window %llu is not registered on rank %d", static_cast<unsigned long long>(id),
                     comm->rank);
}

Result<bool> cudaDirectMappedCalls(const Comm& comm, uint64_t* calls) {
  *calls = 0;
  const CudaState& state = *comm.cuda;
  if (state.launched) {
    WEFT_ASSIGN_OR_RETURN(const bool done, cuda::eventDone(state.doneEvent));
    if (!done) return false;
  }
  cuda::DeviceGuard guard(comm.cudaDev);
  for (const Channel& channel : comm.channels)
    for (const auto& conn : channel.send) {
      if (!conn || conn->deviceEnd == nullptr) continue;
      device::FifoEnd end{};
      WEFT_RETURN_IF_ERROR(cuda::copyFromDevice(&end, conn->deviceEnd, sizeof end));
      *calls += end.directMapped;
    }
  return true;
}

}  // namespace weft::core
