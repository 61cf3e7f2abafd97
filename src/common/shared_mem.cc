#include "common/shared_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "common/log.h"
#include "common/process.h"

namespace weft {
namespace {

constexpr size_t kPageBytes = 4096;

struct Allocation {
  size_t bytes;
  int fd;
  uint64_t inode;
};

// base -> allocation, ordered so that a pointer finds the one it may lie in.
struct SharedTable {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> live;
};

SharedTable& table() {
  static SharedTable* t = new SharedTable();  // never destroyed: frees may come from atexit handlers
  return *t;
}

}  // namespace

Result<void*> sharedAlloc(size_t bytes) {
  const size_t rounded = (bytes + kPageBytes - 1) / kPageBytes * kPageBytes;
  const int fd = memfd_create("weft-memalloc", MFD_CLOEXEC);
  if (fd < 0) return errorStatus(ncclSystemError, "memfd_create: %s", strerror(errno));
  if (ftruncate(fd, static_cast<off_t>(rounded)) != 0) {
    const int err = errno;
    close(fd);
    return errorStatus(ncclSystemError, "ftruncate of a %zu-byte memfd: %s", rounded, strerror(err));
  }
  struct stat st {};
  void* base = fstat(fd, &st) == 0 ? mmap(nullptr, rounded, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) : MAP_FAILED;
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return errorStatus(ncclSystemError, "mmap of a %zu-byte memfd: %s", rounded, strerror(err));
  }
  std::lock_guard<std::mutex> lock(table().mutex);
  table().live[reinterpret_cast<uintptr_t>(base)] = Allocation{rounded, fd, static_cast<uint64_t>(st.st_ino)};
  return base;
}

bool sharedFree(void* base) {
  Allocation a{};
  {
    std::lock_guard<std::mutex> lock(table().mutex);
    auto it = table().live.find(reinterpret_cast<uintptr_t>(base));
    if (it == table().live.end()) return false;
    a = it->second;
    table().live.erase(it);
  }
  munmap(base, a.bytes);
  close(a.fd);
  return true;
}

bool sharedFind(const void* p, size_t bytes, SharedSpan* out) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(table().mutex);
  auto it = table().live.upper_bound(addr);
  if (it == table().live.begin()) return false;
  --it;
  const uintptr_t offset = addr - it->first;
  if (offset > it->second.bytes || bytes > it->second.bytes - offset) return false;
  out->segment = it->second.inode;
  out->offset = offset;
  out->segBytes = it->second.bytes;
  out->pid = static_cast<int32_t>(thisProcessId());
  out->fd = it->second.fd;
  return true;
}

size_t sharedLiveCount() {
  std::lock_guard<std::mutex> lock(table().mutex);
  return table().live.size();
}

PeerSegments::~PeerSegments() {
  for (const Entry& e : entries_) munmap(e.base, e.bytes);
}

size_t PeerSegments::mapped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

char* PeerSegments::map(const SharedSpan& span, std::string* why, bool* gone) {
  *gone = false;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Entry& e : entries_)
    if (e.segment == span.segment && e.pid == span.pid && e.bytes == span.segBytes) return e.base;
  const std::string path = strFormat("/proc/%d/fd/%d", span.pid, span.fd);
  const int fd = open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    *gone = errno == ENOENT;
    *why = strFormat("open(%s): %s", path.c_str(), strerror(errno));
    return nullptr;
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_ino) != span.segment ||
      static_cast<uint64_t>(st.st_size) != span.segBytes) {
    close(fd);
    *gone = true;  // the fd number now names another file
    *why =
        strFormat("%s is not the segment posted (inode %llu, %llu bytes; found inode %llu, %lld bytes)", path.c_str(),
                  static_cast<unsigned long long>(span.segment), static_cast<unsigned long long>(span.segBytes),
                  static_cast<unsigned long long>(st.st_ino), static_cast<long long>(st.st_size));
    return nullptr;
  }
  // MAP_POPULATE: the pages exist (the owner writes its buffer); mapping them
  // now costs one pass instead of a fault per page in the first calls.
  void* base = mmap(nullptr, span.segBytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  const int err = errno;
  close(fd);
  if (base == MAP_FAILED) {
    *why = strFormat("mmap of %s: %s", path.c_str(), strerror(err));
    return nullptr;
  }
  if (entries_.size() >= kSweepAt) sweepFreed();
  entries_.push_back(Entry{span.segment, span.pid, span.fd, static_cast<char*>(base), span.segBytes});
  WEFT_INFO(log::kShm, "mapped segment %llu of pid %d (%llu bytes) at %p",
            static_cast<unsigned long long>(span.segment), span.pid, static_cast<unsigned long long>(span.segBytes),
            base);
  return static_cast<char*>(base);
}

// Only segments a living owner freed: it freed them after the calls that
// posted them, and those calls' reads and writes through this mapping were
// over before they returned. A dead owner's segments stay mapped until the
// communicator goes: another channel of this rank may still be reading or
// writing through them in a call that is failing because of that death.
void PeerSegments::sweepFreed() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    struct stat st {};
    const std::string path = strFormat("/proc/%d/fd/%d", it->pid, it->fd);
    const bool held = stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_ino) == it->segment;
    const bool ownerGone = !held && stat(strFormat("/proc/%d", it->pid).c_str(), &st) != 0;
    if (held || ownerGone) {
      ++it;
      continue;
    }
    munmap(it->base, it->bytes);
    it = entries_.erase(it);
  }
}

int crossMemoryWrite(pid_t pid, const void* local, uint64_t remote, size_t bytes) {
  iovec here{const_cast<void*>(local), bytes};
  iovec there{reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), bytes};
  const ssize_t n = process_vm_writev(pid, &here, 1, &there, 1, 0);
  if (n < 0) return errno;
  return static_cast<size_t>(n) == bytes ? 0 : EFAULT;
}

int crossMemoryRead(pid_t pid, void* local, uint64_t remote, size_t bytes) {
  iovec here{local, bytes};
  iovec there{reinterpret_cast<void*>(static_cast<uintptr_t>(remote)), bytes};
  const ssize_t n = process_vm_readv(pid, &here, 1, &there, 1, 0);
  if (n < 0) return errno;
  return static_cast<size_t>(n) == bytes ? 0 : EFAULT;
}

}  // namespace weft
