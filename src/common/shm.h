// POSIX shared-memory segments for the shm transport. Names are unique per
// job and connection; the creator's peer unlinks the name as soon as it has
// mapped the segment, so a crash afterwards leaves nothing in /dev/shm.
// Both sides map with MAP_POPULATE: a FIFO's pages are in the page tables
// before the first collective, not faulted in one by one by its first calls
// (a fault costs ~10 us on a small VM, more than a whole 8 B collective).
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace weft {

class ShmSegment {
 public:
  ShmSegment() = default;
  ~ShmSegment() { unmap(); }
  ShmSegment(ShmSegment&& other) noexcept { *this = std::move(other); }
  ShmSegment& operator=(ShmSegment&& other) noexcept;
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Creates and maps a zero-filled segment, reserving its pages up front so a
  // full /dev/shm fails here, with the size needed, and not later with SIGBUS.
  static Result<ShmSegment> create(const std::string& name, size_t bytes);
  // Maps an existing segment of exactly `bytes`.
  static Result<ShmSegment> open(const std::string& name, size_t bytes);
  // Removes the name (the mapping stays valid). Idempotent.
  static void unlinkName(const std::string& name);

  void* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  void unmap();
  void* data_ = nullptr;
  size_t size_ = 0;
  std::string name_;
  bool creator_ = false;  // the creator unlinks again on destruction, in case the peer never did
};

// A name for a new segment, unique across jobs on this host:
// "/weft-<pid namespace>-<pid>-<random>-<what>", so that the leftovers of a
// process that died before its peer opened (and unlinked) them can be found.
std::string makeShmName(const std::string& what);

// Removes the segments named by makeShmName whose creator, a process of this
// pid namespace, no longer exists. Run at init and after a communicator
// failed: a rank killed between creating a segment and its peer opening it
// leaves a name that only such a sweep can find. Returns how many it removed.
int removeShmOfDeadProcesses();

}  // namespace weft
