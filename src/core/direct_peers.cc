#include "core/direct_peers.h"

#include <errno.h>
#include <unistd.h>

#include <cstring>

#include "common/log.h"
#include "common/process.h"

namespace weft::core {

DirectPeers::DirectPeers(int rank, int nranks, bool crossMemory, bool refuseForTest)
    : rank_(rank),
      crossMemory_(crossMemory),
      refuseForTest_(refuseForTest),
      cma_(static_cast<size_t>(nranks), Cma::kUnknown),
      mapFailureLogged_(static_cast<size_t>(nranks), false),
      pids_(static_cast<size_t>(nranks), 0) {}

device::DirectPost DirectPeers::describe(const void* base, uint64_t bytes) {
  device::DirectPost post{static_cast<uint64_t>(reinterpret_cast<uintptr_t>(base)), 0, 0, 0,
                          static_cast<uint64_t>(thisProcessId()) << 32};
  SharedSpan span;
  if (bytes > 0 && sharedFind(base, bytes, &span)) {
    post.segment = span.segment;
    post.segOffset = span.offset;
    post.segBytes = span.segBytes;
    post.owner |= static_cast<uint32_t>(span.fd);
  }
  return post;
}

char* DirectPeers::mapPosted(int peer, const device::DirectPost& post, bool* gone) {
  const pid_t pid = static_cast<pid_t>(post.owner >> 32);
  SharedSpan span;
  span.segment = post.segment;
  span.offset = post.segOffset;
  span.segBytes = post.segBytes;
  span.pid = static_cast<int32_t>(pid);
  span.fd = static_cast<int32_t>(post.owner & 0xffffffffu);
  std::string why;
  if (char* base = segments_.map(span, &why, gone)) return base + post.segOffset;
  if (*gone) return nullptr;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!mapFailureLogged_[static_cast<size_t>(peer)]) {
    mapFailureLogged_[static_cast<size_t>(peer)] = true;
    WEFT_WARN(
        "rank %d cannot map the shared buffers of rank %d (pid %d): %s; direct writes to it and reads from it "
        "use the FIFO",
        rank_, peer, static_cast<int>(pid), why.c_str());
  }
  return nullptr;
}

device::DirectWay DirectPeers::resolve(int peer, const device::DirectPost& post, uint64_t* addr) {
  const pid_t pid = static_cast<pid_t>(post.owner >> 32);
  *addr = post.base;
  if (pid == thisProcessId()) return device::DirectWay::kPointer;  // threads over the shm transport
  if (post.segment != 0) {
    bool gone = false;
    if (char* at = mapPosted(peer, post, &gone)) {
      *addr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(at));
      mapped_.fetch_add(1, std::memory_order_relaxed);
      return device::DirectWay::kPointer;
    }
    // Freed by its owner: the owner finished the call that posted it without
    // a step from us on this link, so nothing will be written; not counted.
    if (gone) return device::DirectWay::kSlot;
  }
  if (crossMemoryAllowed(peer, pid, post.base)) {
    crossMemoryCalls_.fetch_add(1, std::memory_order_relaxed);
    return device::DirectWay::kCrossMemory;
  }
  slots_.fetch_add(1, std::memory_order_relaxed);
  return device::DirectWay::kSlot;
}

bool DirectPeers::resolveRead(int peer, const device::DirectPost& post, uint64_t* addr) {
  const pid_t pid = static_cast<pid_t>(post.owner >> 32);
  *addr = post.base;
  if (pid == thisProcessId()) return true;  // threads over the shm transport
  if (post.segment != 0) {
    bool gone = false;
    if (char* at = mapPosted(peer, post, &gone)) {
      *addr = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(at));
      readsMapped_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
  }
  readsRefused_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

int DirectPeers::writeOrRefuse(pid_t pid, const void* from, uint64_t remote, uint64_t bytes) const {
  if (refuseForTest_) return EPERM;
  return crossMemoryWrite(pid, from, remote, static_cast<size_t>(bytes));
}

bool DirectPeers::crossWrite(int peer, const void* from, uint64_t remote, void* slot, uint64_t bytes) {
  pid_t pid = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    pid = pids_[static_cast<size_t>(peer)];
  }
  const int err = writeOrRefuse(pid, from, remote, bytes);
  if (err == 0) return true;
  refuse(peer, pid, err, "process_vm_writev");
  refusedSteps_.fetch_add(1, std::memory_order_relaxed);
  std::memcpy(slot, from, static_cast<size_t>(bytes));
  return false;
}

// The probe: a read of one word of the peer's posted buffer, the first time
// a call could use cross-memory attach towards that peer.
bool DirectPeers::crossMemoryAllowed(int peer, pid_t pid, uint64_t probeAddr) {
  if (!crossMemory_) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  Cma& state = cma_[static_cast<size_t>(peer)];
  if (state == Cma::kUnknown || pids_[static_cast<size_t>(peer)] != pid) {
    uint64_t word = 0;
    const int err = refuseForTest_ ? EPERM : crossMemoryRead(pid, &word, probeAddr, 1);
    pids_[static_cast<size_t>(peer)] = pid;
    // EFAULT: the buffer is gone (its owner finished the call without a
    // step of ours, and freed it): no verdict on the kernel; ask next time.
    if (err == EFAULT) return false;
    if (err != 0) {
      state = Cma::kRefused;
      WEFT_INFO(log::kShm, "rank %d: cross-memory attach to rank %d (pid %d) refused (%s): the FIFO carries its data",
                rank_, peer, static_cast<int>(pid), strerror(err));
    } else {
      state = Cma::kAllowed;
      WEFT_INFO(log::kShm, "rank %d: cross-memory attach to rank %d (pid %d) allowed", rank_, peer,
                static_cast<int>(pid));
    }
  }
  return state == Cma::kAllowed;
}

void DirectPeers::refuse(int peer, pid_t pid, int err, const char* what) {
  std::lock_guard<std::mutex> lock(mutex_);
  Cma& state = cma_[static_cast<size_t>(peer)];
  if (state == Cma::kRefused) return;
  state = Cma::kRefused;
  WEFT_WARN("rank %d: %s to rank %d (pid %d) failed (%s): its data goes through the FIFO from now on", rank_, what,
            peer, static_cast<int>(pid), strerror(err));
}

DirectCounts DirectPeers::counts() const {
  DirectCounts c;
  c.mapped = mapped_.load(std::memory_order_relaxed);
  c.crossMemory = crossMemoryCalls_.load(std::memory_order_relaxed);
  c.slots = slots_.load(std::memory_order_relaxed);
  c.refusedSteps = refusedSteps_.load(std::memory_order_relaxed);
  c.readsMapped = readsMapped_.load(std::memory_order_relaxed);
  c.readsRefused = readsRefused_.load(std::memory_order_relaxed);
  return c;
}

}  // namespace weft::core
