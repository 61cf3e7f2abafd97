// How many FIFO steps a work item moves on each of its connections, found by
// running the very algorithm templates the data path runs with primitives
// that count instead of moving data. The proxy needs these counts to post
// exactly the network sends and receives a collective will use; deriving
// them from the same code means they cannot drift from what the data path
// does. Cost: one call per verb (per chunk), no data touched. Host only.
#pragma once

#include <stdint.h>

#include <utility>
#include <vector>

#include "device/butterfly.h"
#include "device/halving_doubling.h"
#include "device/halving_doubling_scatter.h"
#include "device/hier_ring.h"
#include "device/oneshot.h"
#include "device/p2p.h"
#include "device/portable.h"
#include "device/ring.h"
#include "device/step_fifo.h"
#include "device/torus.h"
#include "device/tree.h"
#include "device/work.h"

namespace weft::device {

// Steps per connection end. A channel's work list may reach many peers
// (point-to-point rounds), so the ends are not bounded by the algorithms'
// fan: host-only code, a small vector searched linearly.
class StepTally {
 public:
  void clear() { entries_.clear(); }  // keeps the capacity
  void add(const FifoEnd* end, uint64_t steps) {
    if (end == nullptr || steps == 0) return;
    for (auto& entry : entries_)
      if (entry.first == end) {
        entry.second += steps;
        return;
      }
    entries_.emplace_back(end, steps);
  }
  int size() const { return static_cast<int>(entries_.size()); }
  const FifoEnd* end(int i) const { return entries_[static_cast<size_t>(i)].first; }
  uint64_t steps(int i) const { return entries_[static_cast<size_t>(i)].second; }

 private:
  std::vector<std::pair<const FifoEnd*, uint64_t>> entries_;
};

// The verbs of Primitives, counting: a verb on n elements moves
// ceil(n / stepElems) steps on every peer it receives from or sends to.
template <typename T>
class CountingPrims {
 public:
  CountingPrims(StepTally* tally, FifoEnd* const* recvs, int nRecv, FifoEnd* const* sends, int nSend)
      : tally_(tally), nRecv_(nRecv), nSend_(nSend) {
    int64_t stepBytes = 0;
    auto narrowest = [&](const FifoEnd* e) { stepBytes = stepBytes ? minOf(stepBytes, e->stepBytes) : e->stepBytes; };
    for (int i = 0; i < nRecv; ++i) narrowest(recv_[i] = recvs[i]);
    for (int i = 0; i < nSend; ++i) narrowest(send_[i] = sends[i]);
    stepElems_ = stepBytes / static_cast<int64_t>(sizeof(T));
  }

  void send(const T*, int64_t n) { count(n, false, true); }
  void recv(T*, int64_t n) { count(n, true, false); }
  void recvReduceSend(const T*, int64_t n) { count(n, true, true); }
  void recvReduceCopy(const T*, T*, int64_t n, bool) { count(n, true, false); }
  void recvReduceCopyInOrder(const T*, T*, int64_t n, int, bool) { count(n, true, false); }
  void recvReduceCopyResult(const T*, T*, int64_t n, int, bool) { count(n, true, false); }
  void recvSend(int64_t n) { count(n, true, true); }
  void recvReduceCopySend(const T*, T*, int64_t n, bool) { count(n, true, true); }
  void recvCopySend(T*, int64_t n) { count(n, true, true); }
  void copySend(const T*, T*, int64_t n) { count(n, false, true); }
  void directSend(const T*, int64_t n) { count(n, false, true); }
  void directRecv(T*, int64_t n) { count(n, true, false); }
  void directRecvCopySend(T*, int64_t n) { count(n, true, true); }
  void directCopySend(const T*, T*, int64_t n) { count(n, false, true); }
  void directRecvReduceCopySend(const T*, T*, int64_t n, bool) { count(n, true, true); }
  void directReadSend(const T*, int64_t n) { count(n, false, true); }
  void directReadsDone() {}
  void localCopy(const T*, T*, int64_t) {}

 private:
  void count(int64_t n, bool recv, bool send) {
    if (n <= 0 || stepElems_ <= 0) return;
    const uint64_t steps = static_cast<uint64_t>(divUp(n, stepElems_));
    if (recv)
      for (int i = 0; i < nRecv_; ++i) tally_->add(recv_[i], steps);
    if (send)
      for (int i = 0; i < nSend_; ++i) tally_->add(send_[i], steps);
  }

  StepTally* tally_;
  int nRecv_, nSend_;
  int64_t stepElems_ = 0;
  static constexpr int kMaxFan = kMaxTreeChildren > kMaxFlatPeers ? kMaxTreeChildren : kMaxFlatPeers;
  FifoEnd* recv_[kMaxFan] = {};
  FifoEnd* send_[kMaxFan] = {};
};

// The algorithm choice mirrors run_work.h: T only sets the element size.
template <typename T>
void tallyCollective(const ChannelView& channel, const CollWork& work, StepTally* tally) {
  // LL moves lines, not slots, and is planned only on links within a node,
  // which no proxy drives: nothing to count.
  if (work.proto != Proto::kSimple) return;
  if (work.algo == Algo::kOneShot) {
    CountingPrims<T> fan(tally, channel.flatRecv, channel.nFlat, channel.flatSend, channel.nFlat);
    auto peerRecv = [&](int i) { return CountingPrims<T>(tally, &channel.flatRecv[i], 1, nullptr, 0); };
    auto peerSend = [&](int i) { return CountingPrims<T>(tally, nullptr, 0, &channel.flatSend[i], 1); };
    switch (work.func) {
      case Func::kAllReduce: return oneShotAllReduce<T>(fan, work, channel.flatOwnAt);
      case Func::kAllGather: return oneShotAllGather<T>(fan, peerRecv, channel.nFlat, work, channel.flatOwnAt);
      case Func::kReduceScatter: return oneShotReduceScatter<T>(fan, peerSend, channel.nFlat, work, channel.flatOwnAt);
      case Func::kBroadcast: return oneShotBroadcast<T>(fan, peerRecv, work, channel.flatOwnAt);
      default: return;
    }
  }
  if (work.algo == Algo::kHierRing && work.func == Func::kAllReduce && channel.algos != nullptr) {
    const HierView& h = channel.algos->hier;
    CountingPrims<T> intra(tally, &h.intraRecv, 1, &h.intraSend, 1);
    CountingPrims<T> inter(tally, &h.interRecv, 1, &h.interSend, 1);
    return hierRingAllReduce<T>(intra, inter, h, work);
  }
  if (work.algo == Algo::kTorus2D && work.func == Func::kAllReduce && channel.algos != nullptr) {
    const HierView& t = channel.algos->torus;
    if (torusIsLine(t)) {
      FifoEnd* recvs[1] = {torusLineRecv(t)};
      FifoEnd* sends[1] = {torusLineSend(t)};
      CountingPrims<T> line(tally, recvs, 1, sends, 1);
      return torusLineAllReduce<T>(line, t, work);
    }
    CountingPrims<T> row(tally, &t.intraRecv, 1, &t.intraSend, 1);
    CountingPrims<T> column(tally, &t.interRecv, 1, &t.interSend, 1);
    return torusAllReduce<T>(row, column, t, work);
  }
  if ((work.algo == Algo::kButterfly || work.algo == Algo::kHalvingDoubling) && channel.algos != nullptr &&
      (work.func == Func::kAllReduce || work.func == Func::kAllGather ||
       (work.func == Func::kReduceScatter && work.algo == Algo::kHalvingDoubling))) {
    const ExchangeView& ex = channel.algos->exchange;
    auto slot = [&](int s) {
      const int peers = ex.send[s] != nullptr ? 1 : 0;
      return CountingPrims<T>(tally, &ex.recv[s], peers, &ex.send[s], peers);
    };
    auto relay = [&](int d) { return CountingPrims<T>(tally, &ex.relays[d].recv, 1, &ex.relays[d].send, 1); };
    if (work.func == Func::kAllGather) return doublingAllGather<T>(ex, work, slot, relay);
    if (work.func == Func::kReduceScatter) return halvingReduceScatter<T>(ex, work, slot, relay);
    if (work.algo == Algo::kButterfly) return butterflyAllReduce<T>(ex, work, slot, relay);
    return halvingDoublingAllReduce<T>(ex, work, slot, relay);
  }
  if (work.algo == Algo::kTree && work.func == Func::kAllReduce) {
    const TreeView& tree = channel.tree;
    const int parents = tree.up >= 0 ? 1 : 0;
    FifoEnd* upSend[1] = {channel.treeUpSend};
    FifoEnd* downRecv[1] = {channel.treeDownRecv};
    CountingPrims<T> up(tally, channel.treeUpRecv, tree.nDown, upSend, parents);
    CountingPrims<T> down(tally, downRecv, parents, channel.treeDownSend, tree.nDown);
    return treeAllReduce<T>(up, down, tree, work);
  }
  const int peers = channel.ring.nranks > 1 ? 1 : 0;
  FifoEnd* recvs[1] = {channel.ringRecv};
  FifoEnd* sends[1] = {channel.ringSend};
  CountingPrims<T> prims(tally, recvs, peers, sends, peers);
  switch (work.func) {
    case Func::kAllReduce: return ringAllReduce<T>(prims, channel.ring, work);
    case Func::kReduceScatter: return ringReduceScatter<T>(prims, channel.ring, work);
    case Func::kReduce: return ringReduce<T>(prims, channel.ring, work, channel.rank);
    case Func::kAllGather: return ringAllGather<T>(prims, channel.ring, work);
    case Func::kBroadcast: return ringBroadcast<T>(prims, channel.ring, work, channel.rank);
    default: return;
  }
}

// Adds the steps `item` moves on each connection of `channel` to `tally`.
inline void tallyWorkItem(const ChannelView& channel, const WorkItem& item, StepTally* tally) {
  if (item.kind == WorkItem::Kind::kP2p) {
    const P2pWork& p = item.p2p;
    if (p.sendEnd && p.sendBytes > 0) tally->add(p.sendEnd, divUp<uint64_t>(p.sendBytes, p.sendEnd->stepBytes));
    if (p.recvEnd && p.recvBytes > 0) tally->add(p.recvEnd, divUp<uint64_t>(p.recvBytes, p.recvEnd->stepBytes));
    return;
  }
  const CollWork& work = item.coll;
  const bool dataOnly = work.func == Func::kAllGather || work.func == Func::kBroadcast;
  switch (dataOnly ? 1 : dataTypeBytes(work.dtype)) {
    case 1: return tallyCollective<uint8_t>(channel, work, tally);
    case 2: return tallyCollective<uint16_t>(channel, work, tally);
    case 4: return tallyCollective<uint32_t>(channel, work, tally);
    default: return tallyCollective<uint64_t>(channel, work, tally);
  }
}

}  // namespace weft::device
