// The modelled network: nodes of equal size, ranks numbered node by node.
// A flow between ranks of one node leaves through the sender's link and
// enters through the receiver's (bandwidth intraGBs each way, latency
// intraLatUs); a flow between nodes leaves through one of the sender
// node's NICs and enters through the same rail's NIC of the receiver's
// node (interGBs each way, interLatUs), never faster than the rank's own
// link.
//
// Contention: flows of one phase that share a port share its bandwidth
// equally; a flow gets the smaller of its two ports' shares. Phases are
// the parts of an algorithm that do not overlap (a tree's reduce and its
// broadcast); flows of different phases do not count against each other.
#pragma once

#include <cstdint>
#include <vector>

#include "tuning/cost_model.h"

namespace weft::sim {

struct ClusterShape {
  int nodes = 1;
  int ranksPerNode = 1;
  int nranks() const { return nodes * ranksPerNode; }
};

// One flow: sender and receiver ranks, the NIC rail it uses when it
// crosses nodes, and its phase (0..kMaxPhases-1).
struct Flow {
  int fromRank = 0;
  int toRank = 0;
  int rail = 0;
  int phase = 0;
};

constexpr int kMaxPhases = 34;  // a butterfly round each, up to 2^32 ranks

class Network {
 public:
  Network(const ClusterShape& shape, const tuning::LinkFigures& links);

  // Adds `copies` concurrent instances of each flow to the port counts (the
  // channels that run identical schedules are counted, not simulated, again).
  void count(const std::vector<Flow>& flows, int copies);

  struct Cost {
    double latUs;
    double usPerByte;
  };
  // The flow's latency and time per byte given everything counted.
  Cost cost(const Flow& flow) const;

  bool sameNode(int a, int b) const { return a / shape_.ranksPerNode == b / shape_.ranksPerNode; }
  const ClusterShape& shape() const { return shape_; }
  const tuning::LinkFigures& links() const { return links_; }

 private:
  // Port indices: [0, n) rank egress, [n, 2n) rank ingress, then NIC
  // egress and NIC ingress per node and rail.
  int egressPort(const Flow& f) const;
  int ingressPort(const Flow& f) const;
  int32_t users(int port, int phase) const;

  ClusterShape shape_;
  tuning::LinkFigures links_;
  int nics_;
  int ports_;
  // Flows per port, one table per phase that has flows (most schedules
  // use one or two of the kMaxPhases).
  std::vector<std::vector<int32_t>> users_;
};

}  // namespace weft::sim
