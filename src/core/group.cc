#include "core/group.h"

#include <algorithm>
#include <thread>
#include <vector>

#include "core/comm.h"
#include "core/launch.h"

namespace weft::core {
namespace {

struct DeferredInit {
  Comm* comm;
  std::function<Status()> run;
};

struct GroupState {
  std::vector<Comm*> comms;
  std::vector<DeferredInit> inits;
  Status error;
};

thread_local GroupState tlsGroup;
// Kept apart from GroupState: a thread_local with a constructor is reached
// through an initialisation check on every use; a plain int is one lookup
// (inGroup() makes it only while some thread is inside a group).
thread_local int tlsGroupDepth = 0;

// Every change of a thread's depth between 0 and 1 moves gThreadsInGroup.
void leaveOuterGroup() { gThreadsInGroup.fetch_sub(1, std::memory_order_relaxed); }

}  // namespace

std::atomic<int> gThreadsInGroup{0};

bool inGroupSlow() { return tlsGroupDepth > 0; }

Status groupStart() {
  if (tlsGroupDepth++ == 0) gThreadsInGroup.fetch_add(1, std::memory_order_relaxed);
  return okStatus();
}

void groupAddComm(Comm* comm) {
  if (std::find(tlsGroup.comms.begin(), tlsGroup.comms.end(), comm) == tlsGroup.comms.end())
    tlsGroup.comms.push_back(comm);
}

void groupDeferInit(Comm* comm, std::function<Status()> init) { tlsGroup.inits.push_back({comm, std::move(init)}); }

void groupRecordError(const Status& status) {
  if (inGroup() && tlsGroup.error.ok()) tlsGroup.error = status;
}

Status runInitsConcurrently(std::vector<std::function<Status()>>& inits) {
  std::vector<Status> results(inits.size());
  std::vector<std::thread> threads;
  for (size_t i = 1; i < inits.size(); ++i) threads.emplace_back([&, i] { results[i] = inits[i](); });
  if (!inits.empty()) results[0] = inits[0]();
  for (std::thread& t : threads) t.join();
  for (const Status& s : results)
    if (!s.ok()) return s;
  return okStatus();
}

namespace {

// The outermost end's common part: the group's state taken, its inits run;
// an error recorded in the group or an init's failure drops its operations.
Status closeGroup(GroupState* state) {
  *state = std::move(tlsGroup);
  tlsGroup = GroupState();
  Status status;
  if (!state->inits.empty()) {
    std::vector<std::function<Status()>> inits;
    for (DeferredInit& d : state->inits) inits.push_back(std::move(d.run));
    status = runInitsConcurrently(inits);
  }
  if (!state->error.ok() || !status.ok()) {
    discardTasks(state->comms);
    return !state->error.ok() ? state->error : status;
  }
  return okStatus();
}

}  // namespace

Status groupEnd() {
  if (tlsGroupDepth == 0) return errorStatus(ncclInvalidUsage, "ncclGroupEnd called without a matching ncclGroupStart");
  if (--tlsGroupDepth > 0) return okStatus();
  leaveOuterGroup();
  GroupState state;
  WEFT_RETURN_IF_ERROR(closeGroup(&state));
  if (state.comms.empty()) return okStatus();
  return launchComms(state.comms);
}

Status groupSimulateEnd(double* estimatedUs) {
  if (tlsGroupDepth == 0)
    return errorStatus(ncclInvalidUsage, "ncclGroupSimulateEnd called without a matching ncclGroupStart");
  if (--tlsGroupDepth > 0) return okStatus();
  leaveOuterGroup();
  GroupState state;
  WEFT_RETURN_IF_ERROR(closeGroup(&state));
  double longest = 0;
  Status status;
  for (Comm* comm : state.comms) {
    Result<double> us = simulateComm(comm);
    if (!us.ok()) {
      status = us.status();
      break;
    }
    longest = std::max(longest, us.value());
  }
  discardTasks(state.comms);
  WEFT_RETURN_IF_ERROR(status);
  *estimatedUs = longest;
  return okStatus();
}

}  // namespace weft::core
