// A communicator's channels from the graph layer's plan: per channel a ring
// over all ranks and a tree, built on the shape of the communicator (nodes
// are hosts, or WEFT_RANKS_PER_NODE groups), and the connections they need.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "weft.h"

namespace weft::core {

struct Comm;

// Fills comm->channels' rings and trees, nnodes, ranksPerNode, treeDepth,
// and parses NCCL_ALGO; logs the result under NCCL_DEBUG=INFO.
Status buildChannels(Comm* comm);
// Whether direct mode may run (WEFT_DIRECT): unset (-1) on the host backend
// only, until the cuda backend's has been measured on a GPU; 1 on both; 0 never.
bool directAllowedFor(int64_t setting, weftBackend_t backend);

// Connects every ring and tree neighbour of every channel.
Status connectChannels(Comm* comm);

}  // namespace weft::core
