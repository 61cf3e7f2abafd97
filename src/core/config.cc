#include "core/config.h"

#include <cstddef>
#include <cstring>

#include "common/params.h"

namespace weft::core {
namespace {

constexpr unsigned kConfigMagic = 0xcafebeef;

// Reads field `member` if the caller's struct (of `size` bytes) contains it.
template <typename T>
bool fieldPresent(size_t size, size_t offset) {
  return offset + sizeof(T) <= size;
}

#define WEFT_CONFIG_FIELD(member)                                                                \
  (fieldPresent<decltype(config->member)>(size, offsetof(ncclConfig_t, member)) ? config->member \
                                                                                : NCCL_CONFIG_UNDEF_INT)

Status checkRange(const char* name, int value, int lo, int hi) {
  if (value == NCCL_CONFIG_UNDEF_INT || (value >= lo && value <= hi)) return okStatus();
  return errorStatus(ncclInvalidArgument, "config->%s is %d, expected %d..%d (or NCCL_CONFIG_UNDEF_INT)", name, value,
                     lo, hi);
}

int orDefault(int value, int fallback) { return value == NCCL_CONFIG_UNDEF_INT ? fallback : value; }

}  // namespace

Result<CommConfig> parseConfig(const ncclConfig_t* config) {
  CommConfig out;
  int64_t envBlocking = param::commBlocking();
  if (envBlocking == 0 || envBlocking == 1) out.blocking = envBlocking == 1;
  if (config == nullptr) return out;
  if (config->magic != kConfigMagic)
    return errorStatus(ncclInvalidArgument,
                       "config->magic is 0x%08x, expected 0x%08x: initialise ncclConfig_t with NCCL_CONFIG_INITIALIZER",
                       config->magic, kConfigMagic);
  const size_t size = config->size;
  if (size < offsetof(ncclConfig_t, blocking))
    return errorStatus(ncclInvalidArgument, "config->size is %zu, too small for any ncclConfig_t version", size);
  const int blocking = WEFT_CONFIG_FIELD(blocking);
  const int minCTAs = WEFT_CONFIG_FIELD(minCTAs);
  const int maxCTAs = WEFT_CONFIG_FIELD(maxCTAs);
  WEFT_RETURN_IF_ERROR(checkRange("blocking", blocking, 0, 1));
  WEFT_RETURN_IF_ERROR(checkRange("cgaClusterSize", WEFT_CONFIG_FIELD(cgaClusterSize), 0, 8));
  WEFT_RETURN_IF_ERROR(checkRange("minCTAs", minCTAs, 1, 64));
  WEFT_RETURN_IF_ERROR(checkRange("maxCTAs", maxCTAs, 1, 64));
  WEFT_RETURN_IF_ERROR(checkRange("splitShare", WEFT_CONFIG_FIELD(splitShare), 0, 1));
  WEFT_RETURN_IF_ERROR(checkRange("collnetEnable", WEFT_CONFIG_FIELD(collnetEnable), 0, 1));
  WEFT_RETURN_IF_ERROR(checkRange("CTAPolicy", WEFT_CONFIG_FIELD(CTAPolicy), 0, 1));
  WEFT_RETURN_IF_ERROR(checkRange("shrinkShare", WEFT_CONFIG_FIELD(shrinkShare), 0, 1));
  if (minCTAs != NCCL_CONFIG_UNDEF_INT && maxCTAs != NCCL_CONFIG_UNDEF_INT && minCTAs > maxCTAs)
    return errorStatus(ncclInvalidArgument, "config->minCTAs (%d) is larger than config->maxCTAs (%d)", minCTAs,
                       maxCTAs);
  out.blocking = blocking == NCCL_CONFIG_UNDEF_INT ? out.blocking : blocking == 1;
  out.minChannels = orDefault(minCTAs, -1);
  out.maxChannels = orDefault(maxCTAs, -1);
  out.cgaClusterSize = orDefault(WEFT_CONFIG_FIELD(cgaClusterSize), -1);
  out.splitShare = orDefault(WEFT_CONFIG_FIELD(splitShare), 0);
  out.trafficClass = orDefault(WEFT_CONFIG_FIELD(trafficClass), -1);
  out.collnetEnable = orDefault(WEFT_CONFIG_FIELD(collnetEnable), 0);
  out.ctaPolicy = orDefault(WEFT_CONFIG_FIELD(CTAPolicy), 0);
  out.shrinkShare = orDefault(WEFT_CONFIG_FIELD(shrinkShare), 0);
  out.nvlsCTAs = orDefault(WEFT_CONFIG_FIELD(nvlsCTAs), -1);
  if (fieldPresent<const char*>(size, offsetof(ncclConfig_t, netName)) && config->netName)
    out.netName = config->netName;
  if (fieldPresent<const char*>(size, offsetof(ncclConfig_t, commName)) && config->commName)
    out.commName = config->commName;
  return out;
}

}  // namespace weft::core
