// A schedule whose connections are network flows: each connection is
// declared with the flow it carries, and bind() prices every connection
// from the network once all concurrent flows have been counted.
#pragma once

#include <vector>

#include "sim/engine.h"
#include "sim/network.h"

namespace weft::sim {

// Weft's FIFOs have 8 slots (device::kFifoSteps; tests/unit/sim_test.cc
// checks they agree).
constexpr int kWeftFifoSlots = 8;

class FlowSchedule : public Schedule {
 public:
  const std::vector<Flow>& flows() const { return flows_; }
  const std::vector<Connection>& connections() const override { return conns_; }

  // Prices every connection from `network` (count() every concurrent
  // schedule's flows first).
  void bind(const Network& network) {
    for (size_t c = 0; c < conns_.size(); ++c) {
      const Network::Cost cost = network.cost(flows_[c]);
      conns_[c].latUs = cost.latUs;
      conns_[c].usPerByte = cost.usPerByte;
    }
  }

 protected:
  void reserveConnections(size_t n) {
    conns_.reserve(n);
    flows_.reserve(n);
  }
  int32_t addConnection(int fromActor, int toActor, const Flow& flow, int window) {
    Connection c;
    c.fromActor = fromActor;
    c.toActor = toActor;
    c.window = window;
    conns_.push_back(c);
    flows_.push_back(flow);
    return static_cast<int32_t>(conns_.size() - 1);
  }

  static void addRecv(Op* op, int32_t conn) { op->recv[op->nRecv++] = conn; }
  static void addSend(Op* op, int32_t conn) { op->send[op->nSend++] = conn; }

 private:
  std::vector<Flow> flows_;
  std::vector<Connection> conns_;
};

}  // namespace weft::sim
