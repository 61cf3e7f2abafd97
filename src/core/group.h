// Groups (ncclGroupStart/End): per-thread state. Inside a group, operations
// are queued on their communicators and launched together by the outermost
// ncclGroupEnd; communicator inits inside a group run concurrently there.
#pragma once

#include <atomic>
#include <functional>

#include "common/status.h"

namespace weft::core {

struct Comm;

// Threads now inside a group. A thread sees its own changes to it, so 0
// means "not this one" without the thread-local lookup (a __tls_get_addr
// call in a shared library) that every collective call would otherwise pay.
extern std::atomic<int> gThreadsInGroup;
bool inGroupSlow();
inline bool inGroup() { return gThreadsInGroup.load(std::memory_order_relaxed) != 0 && inGroupSlow(); }
Status groupStart();
Status groupEnd();
// ncclGroupSimulateEnd: ends the group as groupEnd does (inits inside it
// run), but plans its operations instead of running them and drops them;
// *estimatedUs is the model's time of the group: per communicator the sum
// of its operations' estimates, the largest over the communicators (which
// run side by side). An inner group's end leaves *estimatedUs as it is.
Status groupSimulateEnd(double* estimatedUs);

// Called by enqueue inside a group: the communicator has queued work.
void groupAddComm(Comm* comm);
// Called by init inside a group: run `init` at the outermost group end.
void groupDeferInit(Comm* comm, std::function<Status()> init);
// An error inside the group: returned again by ncclGroupEnd, whose queued
// operations are then dropped.
void groupRecordError(const Status& status);

// Runs several inits concurrently (one thread each beyond the first) and
// returns the first failure; used by group end and ncclCommInitAll.
Status runInitsConcurrently(std::vector<std::function<Status()>>& inits);

// Starts a group for a scope (used by AlltoAll, Gather, Scatter).
class GroupScope {
 public:
  GroupScope() { (void)groupStart(); }
  ~GroupScope() {
    if (!ended_) (void)groupEnd();
  }
  Status end() {
    ended_ = true;
    return groupEnd();
  }
  GroupScope(const GroupScope&) = delete;
  GroupScope& operator=(const GroupScope&) = delete;

 private:
  bool ended_ = false;
};

}  // namespace weft::core
