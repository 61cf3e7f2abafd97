// From a work descriptor to an algorithm: resolves the reduction functor and
// the algorithm at run time (it costs nothing), instantiating only on what
// changes generated code: element type, functor, protocol and team.
#pragma once

#include <string.h>

#include <type_traits>

#include "device/butterfly.h"
#include "device/halving_doubling.h"
#include "device/halving_doubling_scatter.h"
#include "device/hier_ring.h"
#include "device/oneshot.h"
#include "device/p2p.h"
#include "device/primitives.h"
#include "device/reduce_ops.h"
#include "device/ring.h"
#include "device/torus.h"
#include "device/tree.h"
#include "device/types.h"
#include "device/work.h"

namespace weft::device {

template <typename T, typename RedOp, typename Coop, typename P = ProtoSimple>
using RingPrims = Primitives<T, RedOp, Fan<1, 1>, P, Coop>;

// Tree AllReduce: up (children -> parent) and down (parent -> children).
template <typename T, typename RedOp, typename Coop, typename P = ProtoSimple>
WEFT_HD void runTreeAllReduce(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  const TreeView& tree = channel.tree;
  const int parents = tree.up >= 0 ? 1 : 0;
  FifoEnd* const* children = channel.treeUpRecv;
  FifoEnd* upSend[1] = {channel.treeUpSend};
  FifoEnd* downRecv[1] = {channel.treeDownRecv};
  Primitives<T, RedOp, Fan<kMaxTreeChildren, 1>, P, Coop> up(coop, op, channel.id, children, tree.nDown, upSend,
                                                             parents);
  Primitives<T, RedOp, Fan<1, kMaxTreeChildren>, P, Coop> down(coop, op, channel.id, downRecv, parents,
                                                               channel.treeDownSend, tree.nDown);
  treeAllReduce<T>(up, down, tree, work);
}

// One-shot AllReduce: every peer of the node at once (channel.flat*).
template <typename T, typename RedOp, typename Coop, typename P = ProtoSimple>
WEFT_HD void runOneShotAllReduce(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  Primitives<T, RedOp, Fan<kMaxFlatPeers, kMaxFlatPeers>, P, Coop> prims(
      coop, op, channel.id, channel.flatRecv, channel.nFlat, channel.flatSend, channel.nFlat);
  oneShotAllReduce<T>(prims, work, channel.flatOwnAt);
}

// One-shot ReduceScatter: one send per peer, then every peer's slot combined.
template <typename T, typename RedOp, typename Coop, typename P = ProtoSimple>
WEFT_HD void runOneShotReduceScatter(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  Primitives<T, RedOp, Fan<kMaxFlatPeers, kMaxFlatPeers>, P, Coop> in(coop, op, channel.id, channel.flatRecv,
                                                                      channel.nFlat, nullptr, 0);
  auto peerSend = [&](int i) {
    return RingPrims<T, RedOp, Coop, P>(coop, op, channel.id, nullptr, 0, &channel.flatSend[i], 1);
  };
  oneShotReduceScatter<T>(in, peerSend, channel.nFlat, work, channel.flatOwnAt);
}

// Direct mode for a ring call planned so (work.direct): only teams that
// declare it (the host team: peers' user buffers are addressable, mapped or
// reached by cross-memory attach) and only under Simple. The output buffer
// holds count elements, count per rank for AllGather. False when the team's
// wait for a peer failed.
template <typename Prims, typename T, typename Coop, typename P>
WEFT_HD bool beginRingDirect(Prims& prims, const CollWork& work, int nranks) {
  if constexpr (Coop::kHasDirect && std::is_same_v<P, ProtoSimple>) {
    const int64_t outElems = static_cast<int64_t>(work.count) * (work.func == Func::kAllGather ? nranks : 1);
    // AllReduce and ReduceScatter: the links between processes also agree
    // on reads in place (device/direct_reads.h), for which they need the
    // input (count per rank for ReduceScatter).
    const bool reads = work.func == Func::kAllReduce || work.func == Func::kReduceScatter;
    const int64_t inElems = static_cast<int64_t>(work.count) * (work.func == Func::kReduceScatter ? nranks : 1);
    // ReduceScatter writes into no peer's buffer: no output to post.
    T* out = work.func == Func::kReduceScatter ? nullptr : static_cast<T*>(work.recvbuff);
    if (work.direct)
      return prims.beginDirect(out, outElems, work.directRead != 0,
                               reads ? static_cast<const T*>(work.sendbuff) : nullptr, reads ? inElems : 0);
  }
  return true;
}

// Pairwise exchanges (butterfly, halving-doubling): primitives over one
// slot's partner, or one relay duty's two ends, made per use.
template <typename T, typename RedOp, typename Coop>
struct ExchangePrims {
  Coop& coop;
  const RedOp& op;
  const ChannelView& channel;
  WEFT_HD RingPrims<T, RedOp, Coop> slot(int s) const {
    const ExchangeView& ex = channel.algos->exchange;
    const int peers = ex.send[s] != nullptr ? 1 : 0;
    return RingPrims<T, RedOp, Coop>(coop, op, channel.id, &ex.recv[s], peers, &ex.send[s], peers);
  }
  WEFT_HD RingPrims<T, RedOp, Coop> relay(int d) const {
    const RelayDuty& duty = channel.algos->exchange.relays[d];
    return RingPrims<T, RedOp, Coop>(coop, op, channel.id, &duty.recv, 1, &duty.send, 1);
  }
};

template <typename T, typename RedOp, typename Coop>
WEFT_HD void runExchangeAlgo(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  const ExchangePrims<T, RedOp, Coop> make{coop, op, channel};
  auto slot = [&](int s) { return make.slot(s); };
  auto relay = [&](int d) { return make.relay(d); };
  const ExchangeView& ex = channel.algos->exchange;
  if (work.func == Func::kAllGather) return doublingAllGather<T>(ex, work, slot, relay);
  if (work.func == Func::kReduceScatter) return halvingReduceScatter<T>(ex, work, slot, relay);
  if (work.algo == Algo::kButterfly) return butterflyAllReduce<T>(ex, work, slot, relay);
  halvingDoublingAllReduce<T>(ex, work, slot, relay);
}

// Hierarchical ring AllReduce: the node's ring with the user's functor, the
// ring across nodes with it minus its pre-op (it combines partial results).
template <typename T, typename RedOp, typename Coop>
WEFT_HD void runHierRingAllReduce(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  const HierView& h = channel.algos->hier;
  RingPrims<T, RedOp, Coop> intra(coop, op, channel.id, &h.intraRecv, 1, &h.intraSend, 1);
  RingPrims<T, PartialOp<RedOp>, Coop> inter(coop, PartialOp<RedOp>(op), channel.id, &h.interRecv, 1, &h.interSend,
                                             1);
  hierRingAllReduce<T>(intra, inter, h, work);
}

// 2D torus AllReduce: the row ring with the user's functor, the column ring
// with it minus its pre-op; a one-row or one-column grid is that ring alone.
template <typename T, typename RedOp, typename Coop>
WEFT_HD void runTorusAllReduce(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  const HierView& t = channel.algos->torus;
  if (torusIsLine(t)) {
    FifoEnd* recvs[1] = {torusLineRecv(t)};
    FifoEnd* sends[1] = {torusLineSend(t)};
    RingPrims<T, RedOp, Coop> line(coop, op, channel.id, recvs, 1, sends, 1);
    return torusLineAllReduce<T>(line, t, work);
  }
  RingPrims<T, RedOp, Coop> row(coop, op, channel.id, &t.intraRecv, 1, &t.intraSend, 1);
  RingPrims<T, PartialOp<RedOp>, Coop> column(coop, PartialOp<RedOp>(op), channel.id, &t.interRecv, 1, &t.interSend,
                                              1);
  torusAllReduce<T>(row, column, t, work);
}

WEFT_HD bool isExchange(Algo algo) { return algo == Algo::kButterfly || algo == Algo::kHalvingDoubling; }

// The algorithms written for both protocols; the others run under Simple
// whatever the call asked (the planner gives them Simple anyway).
WEFT_HD bool hasLLForm(Algo algo) { return algo == Algo::kRing || algo == Algo::kTree || algo == Algo::kOneShot; }
// LL128 as NCCL has it: rings and trees (trees only for teams that declare
// kLL128Trees; the planner keeps the others' trees off LL128).
template <typename Coop>
WEFT_HD bool hasLL128Form(Algo algo) {
  return algo == Algo::kRing || (Coop::kLL128Trees && algo == Algo::kTree);
}
template <typename P>
constexpr bool kIsLL128 = std::is_same_v<P, ProtoLL128>;

// AllReduce, ReduceScatter and Reduce with functor RedOp.
template <typename T, typename RedOp, typename Coop, typename P = ProtoSimple>
WEFT_HD void runRingReducing(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  const int peers = channel.ring.nranks > 1 ? 1 : 0;
  FifoEnd* recvs[1] = {channel.ringRecv};
  FifoEnd* sends[1] = {channel.ringSend};
  RingPrims<T, RedOp, Coop, P> prims(coop, op, channel.id, recvs, peers, sends, peers);
  if (!beginRingDirect<decltype(prims), T, Coop, P>(prims, work, channel.ring.nranks)) return;
  switch (work.func) {
    case Func::kAllReduce: return ringAllReduce<T>(prims, channel.ring, work);
    case Func::kReduceScatter: return ringReduceScatter<T>(prims, channel.ring, work);
    case Func::kReduce: return ringReduce<T>(prims, channel.ring, work, channel.rank);
    default: return;
  }
}

// AllGather and Broadcast move bytes whatever the user's type.
template <typename Coop, typename P>
WEFT_HD void runDataOnlyProto(Coop& coop, const ChannelView& channel, const CollWork& work) {
  if constexpr (Coop::kHasOneShot && !kIsLL128<P>) {
    if (work.algo == Algo::kOneShot) {
      using Copy = FuncCopy<uint8_t>;
      Primitives<uint8_t, Copy, Fan<kMaxFlatPeers, kMaxFlatPeers>, P, Coop> out(coop, Copy(), channel.id, nullptr, 0,
                                                                                channel.flatSend, channel.nFlat);
      auto peerRecv = [&](int i) {
        return RingPrims<uint8_t, Copy, Coop, P>(coop, Copy(), channel.id, &channel.flatRecv[i], 1, nullptr, 0);
      };
      if (work.func == Func::kAllGather)
        return oneShotAllGather<uint8_t>(out, peerRecv, channel.nFlat, work, channel.flatOwnAt);
      return oneShotBroadcast<uint8_t>(out, peerRecv, work, channel.flatOwnAt);
    }
  }
  if constexpr (Coop::kHasExchange && std::is_same_v<P, ProtoSimple>) {
    if (isExchange(work.algo) && work.func == Func::kAllGather)
      return runExchangeAlgo<uint8_t>(coop, channel, work, FuncCopy<uint8_t>());
  }
  const int peers = channel.ring.nranks > 1 ? 1 : 0;
  FifoEnd* recvs[1] = {channel.ringRecv};
  FifoEnd* sends[1] = {channel.ringSend};
  RingPrims<uint8_t, FuncCopy<uint8_t>, Coop, P> prims(coop, FuncCopy<uint8_t>(), channel.id, recvs, peers, sends,
                                                       peers);
  if (!beginRingDirect<decltype(prims), uint8_t, Coop, P>(prims, work, channel.ring.nranks)) return;
  if (work.func == Func::kAllGather)
    ringAllGather<uint8_t>(prims, channel.ring, work);
  else if (work.func == Func::kBroadcast)
    ringBroadcast<uint8_t>(prims, channel.ring, work, channel.rank);
}

template <typename Coop>
WEFT_HD void runDataOnly(Coop& coop, const ChannelView& channel, const CollWork& work) {
  if constexpr (Coop::kHasLL) {
    if (work.proto == Proto::kLL && hasLLForm(work.algo)) return runDataOnlyProto<Coop, ProtoLL>(coop, channel, work);
  }
  if constexpr (Coop::kHasLL128) {
    if (work.proto == Proto::kLL128 && hasLL128Form<Coop>(work.algo))
      return runDataOnlyProto<Coop, ProtoLL128>(coop, channel, work);
  }
  runDataOnlyProto<Coop, ProtoSimple>(coop, channel, work);
}

template <typename T>
WEFT_HD T resolveScalar(const CollWork& work) {
  if (work.scalarIsPointer) return *static_cast<const T*>(work.scalarPtr);
  T value;
  memcpy(&value, &work.scalarBits, sizeof(T));
  return value;
}

// The functor of kind K for element type T, with its scalar from `work`.
template <typename T, RedOpKind K>
WEFT_HD auto makeOp(const CollWork& work) {
  if constexpr (K == RedOpKind::kSum)
    return FuncSum<T>();
  else if constexpr (K == RedOpKind::kProd)
    return FuncProd<T>();
  else if constexpr (K == RedOpKind::kMax)
    return FuncMax<T>();
  else if constexpr (K == RedOpKind::kMin)
    return FuncMin<T>();
  else if constexpr (K == RedOpKind::kPreMulSum)
    return FuncPreMulSum<T>{resolveScalar<T>(work)};
  else
    return FuncSumPostDiv<T>{work.scalarBits};
}

template <typename T, RedOpKind K, typename Coop, typename P>
WEFT_HD void runReducingProto(Coop& coop, const ChannelView& channel, const CollWork& work) {
  // Trees, one-shot, the pairwise exchanges and the hierarchical ring (and
  // the 2D torus, its relative) are instantiated only for teams that declare
  // them (all of them: both teams; all but trees for the sum alone on the
  // cuda team); the planner never gives them to a backend whose team lacks
  // them. The exchanges, the hierarchical ring and the torus run under
  // Simple only.
  if constexpr (Coop::kHasTree && (!kIsLL128<P> || Coop::kLL128Trees)) {
    if (work.algo == Algo::kTree && work.func == Func::kAllReduce)
      return runTreeAllReduce<T, decltype(makeOp<T, K>(work)), Coop, P>(coop, channel, work, makeOp<T, K>(work));
  }
  constexpr bool kOpHasExtras = K == RedOpKind::kSum || !Coop::kExtraSumOnly;
  if constexpr (Coop::kHasOneShot && kOpHasExtras && !kIsLL128<P>) {
    if (work.algo == Algo::kOneShot && work.func == Func::kAllReduce)
      return runOneShotAllReduce<T, decltype(makeOp<T, K>(work)), Coop, P>(coop, channel, work, makeOp<T, K>(work));
    if (work.algo == Algo::kOneShot && work.func == Func::kReduceScatter)
      return runOneShotReduceScatter<T, decltype(makeOp<T, K>(work)), Coop, P>(coop, channel, work, makeOp<T, K>(work));
  }
  constexpr bool kExtra = std::is_same_v<P, ProtoSimple> && kOpHasExtras;
  if constexpr (Coop::kHasExchange && kExtra) {
    if (isExchange(work.algo) && work.func == Func::kAllReduce)
      return runExchangeAlgo<T>(coop, channel, work, makeOp<T, K>(work));
    if (work.algo == Algo::kHalvingDoubling && work.func == Func::kReduceScatter)
      return runExchangeAlgo<T>(coop, channel, work, makeOp<T, K>(work));
  }
  if constexpr (Coop::kHasHierRing && kExtra) {
    if (work.algo == Algo::kHierRing && work.func == Func::kAllReduce)
      return runHierRingAllReduce<T>(coop, channel, work, makeOp<T, K>(work));
    if (work.algo == Algo::kTorus2D && work.func == Func::kAllReduce)
      return runTorusAllReduce<T>(coop, channel, work, makeOp<T, K>(work));
  }
  runRingReducing<T, decltype(makeOp<T, K>(work)), Coop, P>(coop, channel, work, makeOp<T, K>(work));
}

// The protocol is chosen per call (work.proto); only teams that declare LL
// (LL128) get its instantiations, for the ops they have it for.
template <typename T, RedOpKind K, typename Coop>
WEFT_HD void runReducingOp(Coop& coop, const ChannelView& channel, const CollWork& work) {
  constexpr bool kLLOp = K == RedOpKind::kSum || !Coop::kLLSumOnly;
  if constexpr (Coop::kHasLL && kLLOp) {
    if (work.proto == Proto::kLL && hasLLForm(work.algo))
      return runReducingProto<T, K, Coop, ProtoLL>(coop, channel, work);
  }
  // LL128 for the sum alone on every team: it is taken only when NCCL_PROTO
  // names it, and for every op it would add two thirds to the host kernels'
  // build (the planner keeps the other ops off it: ll128PossibleFor).
  if constexpr (Coop::kHasLL128 && K == RedOpKind::kSum) {
    if (work.proto == Proto::kLL128 && hasLL128Form<Coop>(work.algo))
      return runReducingProto<T, K, Coop, ProtoLL128>(coop, channel, work);
  }
  runReducingProto<T, K, Coop, ProtoSimple>(coop, channel, work);
}

// Reducing collectives of element type T, any functor (the host backend's
// entry; CUDA kernels instantiate one functor each).
template <typename T, typename Coop>
WEFT_HD void runReducing(Coop& coop, const ChannelView& channel, const CollWork& work) {
  switch (work.op) {
    case RedOpKind::kSum: return runReducingOp<T, RedOpKind::kSum>(coop, channel, work);
    case RedOpKind::kProd: return runReducingOp<T, RedOpKind::kProd>(coop, channel, work);
    case RedOpKind::kMax: return runReducingOp<T, RedOpKind::kMax>(coop, channel, work);
    case RedOpKind::kMin: return runReducingOp<T, RedOpKind::kMin>(coop, channel, work);
    case RedOpKind::kPreMulSum: return runReducingOp<T, RedOpKind::kPreMulSum>(coop, channel, work);
    case RedOpKind::kSumPostDiv: return runReducingOp<T, RedOpKind::kSumPostDiv>(coop, channel, work);
    default: return;
  }
}

}  // namespace weft::device
