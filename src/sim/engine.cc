#include "sim/engine.h"

#include <algorithm>

namespace weft::sim {
namespace {

// A connection's run-time state. arrive[] holds when each in-flight message
// lands; freed[] when each slot was last released (the receiver's end of
// the operation that consumed it), both indexed by message number mod window.
struct Link {
  uint32_t sent = 0;
  uint32_t consumed = 0;
  uint32_t slotBase = 0;
  bool receiverWaits = false;
  bool senderWaits = false;
};

struct Actor {
  double time = 0;
  Op op;
  bool hasOp = false;
  bool done = false;
};

class Runner {
 public:
  Runner(Schedule& schedule, double usPerReduceByte)
      : schedule_(schedule), conns_(schedule.connections()), usPerReduceByte_(usPerReduceByte) {
    links_.resize(conns_.size());
    uint32_t slots = 0;
    for (size_t c = 0; c < conns_.size(); ++c) {
      links_[c].slotBase = slots;
      slots += static_cast<uint32_t>(std::max(1, conns_[c].window));
    }
    arrive_.assign(slots, 0);
    freed_.assign(slots, 0);
    actors_.resize(static_cast<size_t>(schedule.actors()));
  }

  RunResult run() {
    for (int a = static_cast<int>(actors_.size()) - 1; a >= 0; --a) work_.push_back(a);
    while (!work_.empty()) {
      const int a = work_.back();
      work_.pop_back();
      advance(a);
    }
    RunResult result;
    result.operations = operations_;
    for (size_t a = 0; a < actors_.size(); ++a) {
      if (!actors_[a].done) {
        result.error = "actor " + std::to_string(a) + " never finished (the schedule deadlocks)";
        return result;
      }
      result.finishUs = std::max(result.finishUs, actors_[a].time);
      result.actorFinishUs.push_back(actors_[a].time);
    }
    result.ok = true;
    return result;
  }

 private:
  int window(int32_t c) const { return std::max(1, conns_[static_cast<size_t>(c)].window); }
  uint32_t slot(int32_t c, uint32_t message) const {
    return links_[static_cast<size_t>(c)].slotBase + message % static_cast<uint32_t>(window(c));
  }

  // The earliest start of the actor's pending op, or false (and a waiter
  // flag set) when a message or a slot is missing.
  bool readyAt(const Actor& actor, double* start) {
    double t = actor.time;
    for (int i = 0; i < actor.op.nRecv; ++i) {
      const int32_t c = actor.op.recv[i];
      Link& l = links_[static_cast<size_t>(c)];
      if (l.sent <= l.consumed) {
        l.receiverWaits = true;  // the sender wakes us when it writes
        return false;
      }
      t = std::max(t, arrive_[slot(c, l.consumed)]);
    }
    for (int i = 0; i < actor.op.nSend; ++i) {
      const int32_t c = actor.op.send[i];
      Link& l = links_[static_cast<size_t>(c)];
      const uint32_t w = static_cast<uint32_t>(window(c));
      if (l.sent - l.consumed >= w) {
        l.senderWaits = true;  // the receiver wakes us when it frees a slot
        return false;
      }
      if (l.sent >= w) t = std::max(t, freed_[slot(c, l.sent - w)]);
    }
    *start = t;
    return true;
  }

  void execute(Actor& actor, double start) {
    const Op& op = actor.op;
    const double computed = start + op.reduceBytes * usPerReduceByte_;
    double end = computed;
    for (int i = 0; i < op.nSend; ++i) {
      const int32_t c = op.send[i];
      const Connection& conn = conns_[static_cast<size_t>(c)];
      const double written = computed + op.bytes * conn.usPerByte;
      Link& l = links_[static_cast<size_t>(c)];
      arrive_[slot(c, l.sent)] = written + conn.latUs;
      ++l.sent;
      end = std::max(end, written);
      if (l.receiverWaits) {
        l.receiverWaits = false;
        work_.push_back(conn.toActor);
      }
    }
    for (int i = 0; i < op.nRecv; ++i) {
      const int32_t c = op.recv[i];
      Link& l = links_[static_cast<size_t>(c)];
      freed_[slot(c, l.consumed)] = end;
      ++l.consumed;
      if (l.senderWaits) {
        l.senderWaits = false;
        work_.push_back(conns_[static_cast<size_t>(c)].fromActor);
      }
    }
    actor.time = end;
    ++operations_;
  }

  void advance(int a) {
    Actor& actor = actors_[static_cast<size_t>(a)];
    while (!actor.done) {
      if (!actor.hasOp) {
        actor.op = Op{};
        if (!schedule_.next(a, &actor.op)) {
          actor.done = true;
          return;
        }
        actor.hasOp = true;
      }
      double start = 0;
      if (!readyAt(actor, &start)) return;
      execute(actor, start);
      actor.hasOp = false;
    }
  }

  Schedule& schedule_;
  const std::vector<Connection>& conns_;
  double usPerReduceByte_;
  std::vector<Link> links_;
  std::vector<double> arrive_;
  std::vector<double> freed_;
  std::vector<Actor> actors_;
  std::vector<int> work_;
  int64_t operations_ = 0;
};

}  // namespace

RunResult run(Schedule& schedule, double usPerReduceByte) { return Runner(schedule, usPerReduceByte).run(); }

}  // namespace weft::sim
