#include "tuning/tuning.h"

#include <algorithm>

namespace weft::tuning {

int collChannels(int64_t bytes, const ChannelLimits& limits, int64_t bytesPerChannel) {
  const int64_t per = std::max<int64_t>(1, bytesPerChannel);
  int64_t wanted = (bytes + per - 1) / per;
  return static_cast<int>(std::clamp<int64_t>(wanted, limits.minChannels, limits.maxChannels));
}

int hostDefaultMaxChannels(int cores, int localRanks) {
  int perRank = localRanks > 0 ? cores / localRanks : cores;
  return std::clamp(perRank, 1, 4);
}

int64_t buffSize(int64_t requested, bool hostBackend, int64_t granule) {
  // Host: 1 MiB keeps 8 slots of 128 KiB inside a core's L2-sized working set;
  // cuda: NCCL's default of 4 MiB.
  if (requested <= 0) return hostBackend ? (1 << 20) : (4 << 20);
  return std::max<int64_t>(granule, requested / granule * granule);
}

}  // namespace weft::tuning
