// Shareable host memory for ncclMemAlloc on the host backend, and the ways
// another process on this host reaches it, or any user buffer:
//
// - Segments: each allocation is its own memfd (no name anywhere, so nothing
//   can outlive the processes that map it: no /dev/shm entry to leak). A
//   process-wide table records base, size and (fd, inode) per allocation.
//   A peer maps it by opening /proc/<owner pid>/fd/<fd> and checking the
//   inode (an fd number reused by another file is refused).
// - Cross-memory attach (process_vm_writev/readv): one kernel copy into a
//   buffer that is in no segment, where the kernel allows it (same user, and
//   ptrace_scope/seccomp/container rules); EPERM/ENOSYS otherwise.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"

namespace weft {

// Where a buffer lies in a segment of process `pid`.
struct SharedSpan {
  uint64_t segment = 0;  // the memfd's inode; 0: in no segment
  uint64_t offset = 0;   // of the buffer from the segment's start
  uint64_t segBytes = 0;
  int32_t pid = 0;
  int32_t fd = -1;  // the segment's fd in process pid
};

// A page-rounded shareable allocation; fails (and the caller falls back to
// private memory) where memfd_create is unavailable.
Result<void*> sharedAlloc(size_t bytes);
// Releases an allocation of sharedAlloc. False: `base` is not one.
bool sharedFree(void* base);
// Whether [p, p + bytes) lies inside one live allocation of this process.
bool sharedFind(const void* p, size_t bytes, SharedSpan* out);
// Live allocations (for tests: ncclMemFree must leave none).
size_t sharedLiveCount();

// This process's mappings of other processes' segments: each segment opened
// once and kept until the object goes away, or until its owner freed it:
// from kSweepAt mappings on, each new one first unmaps those whose owner,
// alive, no longer holds them (a segment read or written in a call is live
// in its owner, so no mapping in use is unmapped; a dead owner's are kept,
// since a failing call of another channel may still use them). Thread-safe.
class PeerSegments {
 public:
  static constexpr size_t kSweepAt = 16;
  PeerSegments() = default;
  ~PeerSegments();
  PeerSegments(const PeerSegments&) = delete;
  PeerSegments& operator=(const PeerSegments&) = delete;

  // The segment's base in this process, or null with *why set (logged by the
  // caller). *gone: the owner no longer holds the segment (freed: it is past
  // the call that posted it), not an error.
  char* map(const SharedSpan& span, std::string* why, bool* gone);
  size_t mapped() const;

 private:
  struct Entry {
    uint64_t segment;
    int32_t pid;
    int32_t fd;
    char* base;
    uint64_t bytes;
  };
  void sweepFreed();
  mutable std::mutex mutex_;
  std::vector<Entry> entries_;
};

// One kernel copy of `bytes` from `local` here to `remote` in process pid:
// 0, or the errno (EPERM, ESRCH, ENOSYS, EFAULT ...). A short copy is EFAULT.
int crossMemoryWrite(pid_t pid, const void* local, uint64_t remote, size_t bytes);
// Reads `bytes` at `remote` in process pid into `local`: 0 or the errno.
int crossMemoryRead(pid_t pid, void* local, uint64_t remote, size_t bytes);

}  // namespace weft
