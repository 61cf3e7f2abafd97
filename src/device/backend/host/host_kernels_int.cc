// Host instantiations of the reducing collectives for one type family.
#include "device/backend/host/host_run.h"
#include "device/run_work.h"

namespace weft::device {

#define X(T, kind)                                                                                \
  void hostRunReducing_##kind(HostCoop& coop, const ChannelView& channel, const CollWork& work) { \
    runReducing<T>(coop, channel, work);                                                          \
  }
X(int8_t, kInt8) X(uint8_t, kUint8) X(int32_t, kInt32) X(uint32_t, kUint32) X(int64_t, kInt64) X(uint64_t, kUint64)
#undef X

}  // namespace weft::device
