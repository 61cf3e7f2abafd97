// From a work descriptor to an algorithm: resolves the reduction functor and
// the algorithm at run time (it costs nothing), instantiating only on what
// changes generated code: element type, functor, protocol and team.
#pragma once

#include "device/p2p.h"
#include "device/primitives.h"
#include "device/reduce_ops.h"
#include "device/ring.h"
#include "device/types.h"
#include "device/work.h"

namespace weft::device {

template <typename T, typename RedOp, typename Coop>
WEFT_HD void runRingCollective(Coop& coop, const ChannelView& channel, const CollWork& work, const RedOp& op) {
  const bool connected = channel.ring.nranks > 1;
  FifoEnd* recvs[1] = {channel.ringRecv};
  FifoEnd* sends[1] = {channel.ringSend};
  Primitives<T, RedOp, Fan<1, 1>, ProtoSimple, Coop> prims(coop, op, channel.id, recvs, connected ? 1 : 0, sends,
                                                           connected ? 1 : 0);
  switch (work.func) {
    case Func::kAllReduce:
      return ringAllReduce<T>(prims, channel.ring, work);
    case Func::kReduceScatter:
      return ringReduceScatter<T>(prims, channel.ring, work);
    case Func::kReduce:
      return ringReduce<T>(prims, channel.ring, work, channel.rank);
    case Func::kAllGather:
      return ringAllGather<T>(prims, channel.ring, work);
    case Func::kBroadcast:
      return ringBroadcast<T>(prims, channel.ring, work, channel.rank);
    default:
      return;
  }
}

template <typename T>
WEFT_HD T resolveScalar(const CollWork& work) {
  if (work.scalarIsPointer) return *static_cast<const T*>(work.scalarPtr);
  T value;
  memcpy(&value, &work.scalarBits, sizeof(T));
  return value;
}

// Reducing collectives of element type T.
template <typename T, typename Coop>
WEFT_HD void runReducing(Coop& coop, const ChannelView& channel, const CollWork& work) {
  switch (work.op) {
    case RedOpKind::kSum:
      return runRingCollective<T>(coop, channel, work, FuncSum<T>());
    case RedOpKind::kProd:
      return runRingCollective<T>(coop, channel, work, FuncProd<T>());
    case RedOpKind::kMax:
      return runRingCollective<T>(coop, channel, work, FuncMax<T>());
    case RedOpKind::kMin:
      return runRingCollective<T>(coop, channel, work, FuncMin<T>());
    case RedOpKind::kPreMulSum:
      return runRingCollective<T>(coop, channel, work, FuncPreMulSum<T>{resolveScalar<T>(work)});
    case RedOpKind::kSumPostDiv:
      return runRingCollective<T>(coop, channel, work, FuncSumPostDiv<T>{work.scalarBits});
    default:
      return;
  }
}

// Data-only collectives run on bytes whatever the user's type.
template <typename Coop>
WEFT_HD void runDataOnly(Coop& coop, const ChannelView& channel, const CollWork& work) {
  runRingCollective<uint8_t>(coop, channel, work, FuncCopy<uint8_t>());
}

}  // namespace weft::device
