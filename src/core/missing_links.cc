#include "core/missing_links.h"

#include <algorithm>

#include "common/log.h"
#include "core/comm.h"
#include "core/topology.h"

namespace weft::core {

std::vector<int> unreachablePeers(const CommTopology& topo, int rank, const std::vector<int>& nodeRanks) {
  std::vector<int> peers;
  for (int peer : nodeRanks)
    if (peer > rank && pathBetween(topo, rank, peer, graph::PathType::kSys) == graph::PathType::kDis)
      peers.push_back(peer);
  return peers;
}

Result<LinkSet> gatherMissingLinks(Comm* comm, const std::vector<int>& nodeRanks) {
  const std::vector<int> mine = unreachablePeers(*comm->topology, comm->rank, nodeRanks);
  const size_t nranks = static_cast<size_t>(comm->nranks);
  std::vector<int32_t> counts(nranks, 0);
  counts[static_cast<size_t>(comm->rank)] = static_cast<int32_t>(mine.size());
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(counts.data(), sizeof(int32_t)));
  const size_t most = static_cast<size_t>(*std::max_element(counts.begin(), counts.end()));
  LinkSet missing;
  if (most == 0) return missing;
  // Each rank's list, padded with -1 to the longest.
  std::vector<int32_t> lists(nranks * most, -1);
  std::copy(mine.begin(), mine.end(), lists.begin() + static_cast<std::ptrdiff_t>(comm->rank * most));
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(lists.data(), most * sizeof(int32_t)));
  for (size_t r = 0; r < nranks; ++r)
    for (size_t i = 0; i < most && lists[r * most + i] >= 0; ++i) missing.add(static_cast<int>(r), lists[r * most + i]);
  for (int peer : mine)
    WEFT_INFO(log::kGraph, "link %d-%d: the topology has no path between the two ranks' devices; treated as broken",
              comm->rank, peer);
  return missing;
}

}  // namespace weft::core
