// The topology a communicator uses, and the transport policy read from it.
//
// cuda backend: every rank describes the machine around its own GPU
// (detection: hwloc, CUDA driver, NVML, sysfs; or NCCL_TOPO_FILE, which
// replaces detection), and the ranks of each host fuse their views into one
// (graph/topo_fuse.h): each sends its view to the host's first rank, which
// fuses them in rank order and sends the result back, so every rank of the
// host holds the same model. GPUs no rank of the communicator drives are
// dropped.
//
// host backend: the model is this rank's node (a host, or a group of
// WEFT_RANKS_PER_NODE ranks): the synthetic machine of graph/topo.h, or
// NCCL_TOPO_FILE, whose i-th GPU the node's i-th rank drives.
//
// The first rank of each host writes NCCL_TOPO_DUMP_FILE.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "graph/topo.h"
#include "graph/xml.h"

namespace weft::core {

struct Comm;

struct CommTopology {
  graph::Topology model;                // cuda: this host; host backend: this rank's node
  std::unique_ptr<graph::XmlNode> xml;  // `model` in NCCL's format
  std::vector<int> gpuOfRank;           // per rank: its device's node in `model`, -1 when absent
  std::string source;                   // where the model came from, for the log
  // Transport policy (NCCL_P2P_DISABLE, NCCL_P2P_LEVEL, NCCL_SHM_DISABLE).
  graph::PathType p2pLevel = graph::PathType::kSys;
  bool shmDisabled = false;
};

// nodeRanks: the ranks of this rank's node, in rank order. Collective over
// the ranks of this host on the cuda backend (the views are exchanged).
Result<std::shared_ptr<const CommTopology>> buildCommTopology(Comm* comm, const std::vector<int>& nodeRanks);

// The model of a node for the search: `t.model` restricted to the devices of
// nodeRanks, each GPU carrying its rank.
Result<graph::Topology> nodeModel(const CommTopology& t, const std::vector<int>& nodeRanks);

// The class of the path between the devices of two ranks; `unknown` when
// either is not in the model.
graph::PathType pathBetween(const CommTopology& t, int rankA, int rankB, graph::PathType unknown);

}  // namespace weft::core
