// Communicator initialisation: bootstrap, exchange of peer information,
// channels and their ring connections. Split reuses everything after the
// bootstrap.
#pragma once

#include "common/status.h"
#include "core/unique_id.h"

namespace weft::core {

struct Comm;

// Joins the bootstrap described by `id`, then sets up the communicator.
Status initComm(Comm* comm, const UniqueIdContents& id);

// Everything after the bootstrap exists: peers, channels, connections.
Status setupComm(Comm* comm);

}  // namespace weft::core
