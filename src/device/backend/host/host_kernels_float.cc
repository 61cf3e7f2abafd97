// Host instantiations of the reducing collectives for one type family.
#include "device/backend/host/host_run.h"
#include "device/run_work.h"

namespace weft::device {

#define X(T, kind)                                                                                \
  void hostRunReducing_##kind(HostCoop& coop, const ChannelView& channel, const CollWork& work) { \
    runReducing<T>(coop, channel, work);                                                          \
  }
X(half_t, kFloat16) X(float, kFloat32) X(double, kFloat64) X(bfloat16_t, kBfloat16)
#undef X

}  // namespace weft::device
