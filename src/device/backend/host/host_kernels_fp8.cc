// Host instantiations of the reducing collectives for one type family.
#include "device/backend/host/host_run.h"
#include "device/run_work.h"

namespace weft::device {

#define X(T, kind)                                                                                \
  void hostRunReducing_##kind(HostCoop& coop, const ChannelView& channel, const CollWork& work) { \
    runReducing<T>(coop, channel, work);                                                          \
  }
X(fp8e4m3_t, kFp8E4M3) X(fp8e5m2_t, kFp8E5M2)
#undef X

}  // namespace weft::device
