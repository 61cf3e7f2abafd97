#include "common/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "common/hash.h"
#include "common/log.h"
#include "common/process.h"

namespace weft {

ShmSegment& ShmSegment::operator=(ShmSegment&& other) noexcept {
  if (this != &other) {
    unmap();
    data_ = other.data_;
    size_ = other.size_;
    name_ = std::move(other.name_);
    creator_ = other.creator_;
    other.creator_ = false;
    other.data_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

void ShmSegment::unmap() {
  if (creator_) shm_unlink(name_.c_str());
  creator_ = false;
  if (data_ != nullptr) munmap(data_, size_);
  data_ = nullptr;
  size_ = 0;
}

void ShmSegment::unlinkName(const std::string& name) { shm_unlink(name.c_str()); }

std::string makeShmName(const std::string& what) {
  return strFormat("/weft-%llx-%d-%016llx-%s", pidNamespaceId(), static_cast<int>(getpid()),
                   static_cast<unsigned long long>(randomU64()), what.c_str());
}

int removeShmOfDeadProcesses() {
  DIR* dir = opendir("/dev/shm");
  if (dir == nullptr) return 0;
  const unsigned long long ourNamespace = pidNamespaceId();
  int removed = 0;
  while (const dirent* entry = readdir(dir)) {
    unsigned long long ns = 0;
    int pid = 0;
    int consumed = 0;
    // Only our own names, of our pid namespace: a pid means nothing elsewhere.
    if (std::sscanf(entry->d_name, "weft-%llx-%d-%n", &ns, &pid, &consumed) != 2 || consumed == 0 ||
        ns != ourNamespace || pid <= 0 || processAlive(pid))
      continue;
    if (shm_unlink((std::string("/") + entry->d_name).c_str()) == 0) ++removed;
  }
  closedir(dir);
  return removed;
}

namespace {

Status spaceError(size_t bytes, int err) {
  struct statvfs vfs {};
  unsigned long long freeBytes = 0;
  if (statvfs("/dev/shm", &vfs) == 0) freeBytes = static_cast<unsigned long long>(vfs.f_bavail) * vfs.f_frsize;
  return errorStatus(ncclSystemError,
                     "cannot reserve %zu bytes of shared memory in /dev/shm (%s; %llu bytes free there). "
                     "Enlarge /dev/shm (docker: --shm-size), or lower NCCL_BUFFSIZE or NCCL_MAX_NCHANNELS, "
                     "or set NCCL_SHM_DISABLE=1",
                     bytes, strerror(err), freeBytes);
}

}  // namespace

Result<ShmSegment> ShmSegment::create(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) return errorStatus(ncclSystemError, "shm_open(%s): %s", name.c_str(), strerror(errno));
  int err = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (err != 0) {
    close(fd);
    shm_unlink(name.c_str());
    return spaceError(bytes, err);
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  err = errno;
  close(fd);
  if (data == MAP_FAILED) {
    shm_unlink(name.c_str());
    return errorStatus(ncclSystemError, "mmap of %zu bytes of %s: %s", bytes, name.c_str(), strerror(err));
  }
  WEFT_INFO(log::kAlloc | log::kShm, "shared memory %s Size %zu pointer %p", name.c_str(), bytes, data);
  ShmSegment seg;
  seg.data_ = data;
  seg.size_ = bytes;
  seg.name_ = name;
  seg.creator_ = true;
  return seg;
}

Result<ShmSegment> ShmSegment::open(const std::string& name, size_t bytes) {
  int fd = shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return errorStatus(ncclSystemError, "shm_open(%s) of a peer's segment: %s", name.c_str(), strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    close(fd);
    return errorStatus(ncclInternalError, "shared segment %s has %lld bytes, expected %zu", name.c_str(),
                       static_cast<long long>(st.st_size), bytes);
  }
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  int err = errno;
  close(fd);
  if (data == MAP_FAILED)
    return errorStatus(ncclSystemError, "mmap of %zu bytes of %s: %s", bytes, name.c_str(), strerror(err));
  ShmSegment seg;
  seg.data_ = data;
  seg.size_ = bytes;
  seg.name_ = name;
  return seg;
}

}  // namespace weft
