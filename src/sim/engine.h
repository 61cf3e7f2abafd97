// The simulator's engine: actors (ranks, or ring positions) run a sequence
// of operations; an operation waits for a message on each connection it
// receives from and for a free slot on each connection it sends on, then
// combines what it received (gamma per byte) and writes to every peer it
// sends to (the link's time per byte), the message arriving one latency
// (alpha) after the write ends. Connections are FIFOs of `window` slots,
// as Weft's step FIFOs are: a sender runs at most `window` messages ahead
// of its receiver.
//
// Times follow from dependencies alone (a max-plus recurrence), so actors
// are advanced in any order that respects them: an actor runs until it
// blocks on a connection, and the peer that unblocks it puts it back on the
// work list. The cost is linear in the operations simulated, and no global
// event queue is needed because links are not arbitrated message by
// message: flows that share a port get a fixed share of its bandwidth
// (network.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace weft::sim {

// Peers one operation talks to in each direction (a tree rank's three
// children, or its parent).
constexpr int kMaxFan = 4;

struct Op {
  uint8_t nRecv = 0;
  uint8_t nSend = 0;
  int32_t recv[kMaxFan] = {};  // connection ids
  int32_t send[kMaxFan] = {};
  double bytes = 0;        // written to each peer sent to
  double reduceBytes = 0;  // bytes combined with the own data (inputs x bytes)
};

// One direction between two actors, with its cost.
struct Connection {
  int fromActor = 0;
  int toActor = 0;
  double latUs = 0;      // alpha
  double usPerByte = 0;  // the share of the link this flow gets
  int window = 1;        // slots: messages the sender may run ahead
};

// What an algorithm's schedule gives the engine: its actors, its
// connections, and each actor's operations in order.
class Schedule {
 public:
  virtual ~Schedule() = default;
  virtual int actors() const = 0;
  virtual const std::vector<Connection>& connections() const = 0;
  // The actor's next operation; false when it has none left.
  virtual bool next(int actor, Op* op) = 0;
};

struct RunResult {
  bool ok = false;
  std::string error;                  // a deadlock: which actor waits and on what
  double finishUs = 0;                // the last actor's end
  std::vector<double> actorFinishUs;  // each actor's end
  int64_t operations = 0;             // operations executed
};

// Runs `schedule` to its end; usPerReduceByte prices reduceBytes.
RunResult run(Schedule& schedule, double usPerReduceByte);

}  // namespace weft::sim
