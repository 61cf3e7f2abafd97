// Launch: plan every communicator's queued tasks, connect the peers the plan
// needs, run all channel lists to completion, and clear the queues.
#pragma once

#include <vector>

#include "common/status.h"
#include "core/comm.h"
#include "core/task.h"

namespace weft::core {

struct Comm;

// Comms may repeat; each is launched once. The first failure is returned,
// and a communicator whose data path failed stays failed.
Status launchComms(std::vector<Comm*> comms);
// The same for one communicator (the common, ungrouped call).
Status launchComm(Comm* comm);

// One ungrouped collective, under one take of the lock. A repeat of the
// comm's last collective (same shape, any buffers) whose plan runs on the
// calling thread alone has its buffers patched in and runs at once,
// skipping the general launch; anything else is queued and launched.
Status launchColl(Comm* comm, const CollTask& task);

// The repeat's parts, for a caller that already holds the comm exclusively
// (its lock, or the biased section of exec_lock.h): whether the comm's last
// plan can run as a repeat, and the run itself with new buffers (the caller
// checked that the call has the plan's shape).
// Inline: every collective call asks. A failed comm goes the general way,
// which reports its failure, and so does one with a profiler plugin, whose
// events the general way emits.
inline bool repeatable(const Comm& comm) { return comm.repeatChannel >= 0 && comm.failure.ok() && !comm.profiler; }
void runRepeat(Comm* comm, const void* sendbuff, void* recvbuff, Status* status);

// Drops queued tasks without running them (a group that failed early).
void discardTasks(const std::vector<Comm*>& comms);

// ncclGroupSimulateEnd: the model's time, us, of the comm's queued tasks,
// planned as their launch would plan them (Plan::estimatedUs). Nothing is
// launched or connected, and nothing that ranks must agree on (the call
// sequence, the reusable plan) changes; the tasks stay queued.
Result<double> simulateComm(Comm* comm);

}  // namespace weft::core
