// Launch: plan every communicator's queued tasks, connect the peers the plan
// needs, run all channel lists to completion, and clear the queues.
#pragma once

#include <vector>

#include "common/status.h"

namespace weft::core {

struct Comm;

// Comms may repeat; each is launched once. The first failure is returned,
// and a communicator whose data path failed stays failed.
Status launchComms(std::vector<Comm*> comms);
// The same for one communicator (the common, ungrouped call).
Status launchComm(Comm* comm);

// Drops queued tasks without running them (a group that failed early).
void discardTasks(const std::vector<Comm*>& comms);

}  // namespace weft::core
