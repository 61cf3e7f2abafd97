#include "sim/weft_schedules.h"

#include <algorithm>

namespace weft::sim {
namespace {

uint64_t divUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t roundUp(uint64_t a, uint64_t b) { return divUp(a, b) * b; }

int64_t ringMod(int64_t a, int64_t k) { return ((a % k) + k) % k; }

}  // namespace

WeftRingSchedule::WeftRingSchedule(const std::vector<int>& order, const ChannelShare& share, const PlanParams& params,
                                   int positions, int rail)
    : k_(static_cast<int>(order.size())),
      positions_(positions),
      share_(share),
      stepElems_(static_cast<double>(params.stepBytes / params.elemSize)),
      elemSize_(params.elemSize),
      meanTail_(positions < static_cast<int>(order.size())),
      cursors_(static_cast<size_t>(positions)) {
  // Connection i carries position i -> i+1; the last simulated position
  // sends to the first (node-periodic mode: the next node's first rank).
  for (int i = 0; i < positions_; ++i) {
    const Flow flow{order[static_cast<size_t>(i)], order[static_cast<size_t>((i + 1) % k_)], rail, 0};
    addConnection(i, (i + 1) % positions_, flow, kWeftFifoSlots);
  }
}

// The ring loop covers chunk x k elements; its tail loop shrinks the chunk
// so every rank gets a share (device/ring.h).
double WeftRingSchedule::segment(uint64_t base, int64_t j, int64_t* filled) const {
  const uint64_t rest = share_.count - base;
  const uint64_t k = static_cast<uint64_t>(k_);
  const uint64_t realChunk = std::min(share_.chunkElems, roundUp(divUp(rest, k), share_.alignElems));
  if (meanTail_) {
    *filled = k_;
    return rest >= share_.chunkElems * k ? static_cast<double>(realChunk) : static_cast<double>(rest) / k_;
  }
  *filled = static_cast<int64_t>(divUp(rest, realChunk));
  const uint64_t offset = static_cast<uint64_t>(j) * realChunk;
  return offset >= rest ? 0.0 : static_cast<double>(std::min(realChunk, rest - offset));
}

// Verb v of a loop handles segment (index - 1 - v) mod k: v = 0 send,
// 1..k-2 recvReduceSend, k-1 recvReduceCopySend, k..2k-3 recvCopySend,
// 2k-2 recv. Empty segments are skipped, as the primitives skip them.
bool WeftRingSchedule::next(int actor, Op* op) {
  Cursor& c = cursors_[static_cast<size_t>(actor)];
  const int64_t k = k_;
  const int64_t lastVerb = 2 * k - 2;
  while (true) {
    if (c.base >= share_.count) return false;
    if (c.verb > lastVerb) {
      c.base += share_.chunkElems * static_cast<uint64_t>(k);
      c.verb = 0;
      c.offset = 0;
      continue;
    }
    const int64_t j = ringMod(actor - 1 - c.verb, k);
    int64_t filled = 0;
    const double len = segment(c.base, j, &filled);
    if (j >= filled) {  // j falls by one per verb: jump to the first filled segment
      c.verb += j - filled + 1;
      c.offset = 0;
      continue;
    }
    if (c.offset >= len) {
      ++c.verb;
      c.offset = 0;
      continue;
    }
    const double step = std::min(stepElems_, len - c.offset);
    c.offset += step;
    op->bytes = step * elemSize_;
    const int32_t sendConn = actor;
    const int32_t recvConn = static_cast<int32_t>((actor + positions_ - 1) % positions_);
    if (c.verb > 0) addRecv(op, recvConn);
    if (c.verb < lastVerb) addSend(op, sendConn);
    if (c.verb > 0 && c.verb < k) op->reduceBytes = op->bytes;
    return true;
  }
}

double WeftRingSchedule::fullOperations(const ChannelShare& share, const PlanParams& params, int nranks) {
  const uint64_t k = static_cast<uint64_t>(nranks);
  const double stepElems = static_cast<double>(params.stepBytes / params.elemSize);
  double ops = 0;
  for (uint64_t base = 0; base < share.count; base += share.chunkElems * k) {
    const uint64_t rest = share.count - base;
    const uint64_t realChunk = std::min(share.chunkElems, roundUp(divUp(rest, k), share.alignElems));
    const double filled = static_cast<double>(divUp(rest, realChunk));
    // Each filled segment is touched by 2k-1 verbs, one per rank on its way.
    ops += filled * (2.0 * nranks - 1) * std::max(1.0, static_cast<double>(realChunk) / stepElems);
  }
  return ops;
}

WeftTreeSchedule::WeftTreeSchedule(const graph::RankTree& tree, const ChannelShare& share, const PlanParams& params,
                                   int rail)
    : tree_(tree),
      share_(share),
      stepElems_(static_cast<double>(params.stepBytes / params.elemSize)),
      elemSize_(params.elemSize),
      upConn_(tree.up.size(), -1),
      downConn_(tree.up.size(), -1),
      cursors_(tree.up.size()) {
  reserveConnections(2 * tree.up.size());
  for (size_t r = 0; r < tree.up.size(); ++r) {
    const int parent = tree.up[r];
    if (parent < 0) continue;
    const int rank = static_cast<int>(r);
    upConn_[r] = addConnection(rank, parent, Flow{rank, parent, rail, 0}, kWeftFifoSlots);
    downConn_[r] = addConnection(parent, rank, Flow{parent, rank, rail, 1}, kWeftFifoSlots);
  }
}

// Up: leaf send, middle recvReduceSend, root recvReduceCopy. Down: root
// send, middle recvCopySend, leaf recv (device/tree.h).
bool WeftTreeSchedule::next(int actor, Op* op) {
  const size_t r = static_cast<size_t>(actor);
  const std::vector<int>& children = tree_.down[r];
  const bool root = tree_.up[r] < 0;
  const bool leaf = children.empty();
  if (root && leaf) return false;
  Cursor& c = cursors_[r];
  while (true) {
    if (c.phase > 1) return false;
    if (c.base >= share_.count) {
      ++c.phase;
      c.base = 0;
      c.offset = 0;
      continue;
    }
    const double len = static_cast<double>(std::min(share_.chunkElems, share_.count - c.base));
    if (c.offset >= len) {
      c.base += share_.chunkElems;
      c.offset = 0;
      continue;
    }
    const double step = std::min(stepElems_, len - c.offset);
    c.offset += step;
    op->bytes = step * elemSize_;
    if (c.phase == 0) {
      for (int child : children) addRecv(op, upConn_[static_cast<size_t>(child)]);
      if (!root) addSend(op, upConn_[r]);
      op->reduceBytes = op->bytes * static_cast<double>(children.size());
    } else {
      if (!root) addRecv(op, downConn_[r]);
      for (int child : children) addSend(op, downConn_[static_cast<size_t>(child)]);
    }
    return true;
  }
}

WeftOneShotSchedule::WeftOneShotSchedule(int nranks, const ChannelShare& share, const PlanParams& params)
    : nranks_(nranks),
      bytes_(static_cast<double>(share.count) * params.elemSize),
      chunkBytes_(static_cast<double>(share.chunkElems) * params.elemSize),
      stepBytes_(static_cast<double>(params.stepBytes)),
      conn_(static_cast<size_t>(nranks) * nranks, -1),
      cursors_(static_cast<size_t>(nranks)) {
  for (int from = 0; from < nranks; ++from)
    for (int to = 0; to < nranks; ++to)
      if (from != to)
        conn_[static_cast<size_t>(from) * nranks + to] = addConnection(from, to, Flow{from, to, 0, 0}, kWeftFifoSlots);
}

// Per chunk: send (fan-out to every peer), then recvReduceCopyInOrder
// (fan-in from every peer), each one operation per FIFO step.
bool WeftOneShotSchedule::next(int actor, Op* op) {
  const size_t a = static_cast<size_t>(actor);
  Cursor& c = cursors_[a];
  while (true) {
    if (c.base >= bytes_) return false;
    const double len = std::min(chunkBytes_, bytes_ - c.base);
    if (c.offset >= len) {
      if (c.combining) c.base += chunkBytes_;
      c.combining = !c.combining;
      c.offset = 0;
      continue;
    }
    op->bytes = std::min(stepBytes_, len - c.offset);
    c.offset += op->bytes;
    for (int peer = 0; peer < nranks_; ++peer) {
      if (peer == actor) continue;
      if (!c.combining)
        addSend(op, conn_[a * nranks_ + static_cast<size_t>(peer)]);
      else
        addRecv(op, conn_[static_cast<size_t>(peer) * nranks_ + a]);
    }
    if (c.combining) op->reduceBytes = op->bytes * (nranks_ - 1);
    return true;
  }
}

}  // namespace weft::sim
