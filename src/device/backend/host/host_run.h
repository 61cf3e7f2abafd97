// Entry point of the host backend: run one channel's work list on the
// calling thread. The core decides which thread runs which channel.
#pragma once

#include <cstddef>

#include "device/backend/host/host_coop.h"
#include "device/work.h"

namespace weft::device {

// Runs items in order; stops at the first failed wait and reports it.
// `signatures`, when given, are the items' itemSignature() (a repeated call
// keeps them and changes only the sequence: core/launch.cc).
WaitFailureInfo hostRunChannel(const ChannelView& channel, const WorkItem* items, size_t count,
                               const HostWaitConfig& config, const CallSignature* signatures = nullptr);

// Per-type instantiations, one translation unit per type family so the
// build parallelises (host_kernels_*.cc).
#define WEFT_HOST_TYPES(X)                                                                            \
  X(int8_t, kInt8)                                                                                    \
  X(uint8_t, kUint8)                                                                                  \
  X(int32_t, kInt32) X(uint32_t, kUint32) X(int64_t, kInt64) X(uint64_t, kUint64) X(half_t, kFloat16) \
      X(float, kFloat32) X(double, kFloat64) X(bfloat16_t, kBfloat16) X(fp8e4m3_t, kFp8E4M3) X(fp8e5m2_t, kFp8E5M2)

#define WEFT_DECLARE_HOST_REDUCING(T, kind) \
  void hostRunReducing_##kind(HostCoop& coop, const ChannelView& channel, const CollWork& work);
WEFT_HOST_TYPES(WEFT_DECLARE_HOST_REDUCING)
#undef WEFT_DECLARE_HOST_REDUCING

}  // namespace weft::device
