// Links the topology lacks: two ranks of one node whose devices the model
// (detected, or NCCL_TOPO_FILE) connects by no path at all. Such a pair is
// treated exactly as a WEFT_BROKEN_LINKS pair (core/broken_links.h): rings
// go around it, trees and one-shot avoid it, the exchanges renumber or relay.
// Ranks of different nodes talk through the network and are never missing;
// a device absent from the model proves nothing either.
#pragma once

#include <vector>

#include "common/status.h"
#include "core/broken_links.h"

namespace weft::core {

struct Comm;
struct CommTopology;

// The ranks of nodeRanks above `rank` whose devices have no path to its
// device in `topo` (pure).
std::vector<int> unreachablePeers(const CommTopology& topo, int rank, const std::vector<int>& nodeRanks);

// Every node's missing links, gathered from all ranks so that every rank
// routes around the same set (collective over the communicator). An INFO
// line names each pair.
Result<LinkSet> gatherMissingLinks(Comm* comm, const std::vector<int>& nodeRanks);

}  // namespace weft::core
