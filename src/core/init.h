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

// Every rank runs the same backend, and ranks that are processes sharing a
// GPU run under MPS (or WEFT_SHARE_GPU_WITHOUT_MPS=1 lets them take turns).
// comm.peers must be filled in.
Status checkBackends(const Comm& comm);

// Everything after the bootstrap exists: peers, channels, connections.
Status setupComm(Comm* comm);

}  // namespace weft::core
