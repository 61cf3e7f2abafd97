// Group entry points.
#include "core/api.h"
#include "core/group.h"

using namespace weft::core;

namespace {
// NCCL_SIM_INFO_INITIALIZER's magic (nccl.h).
constexpr unsigned int kSimInfoMagic = 0x74685283;
}  // namespace

WEFT_NCCL_API(ncclResult_t, ncclGroupStart) {
  return apiCall("ncclGroupStart", nullptr, [] { return groupStart(); });
}

WEFT_NCCL_API(ncclResult_t, ncclGroupEnd) {
  return apiCall("ncclGroupEnd", nullptr, [] { return groupEnd(); });
}

// The group ends as under ncclGroupEnd, but its operations are planned and
// dropped, not run: simInfo->estimatedTime is the cost model's time of the
// group in microseconds (docs/api.md says how a group's time is counted).
// A simInfo that is missing or not initialised leaves the group open.
WEFT_NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  return apiCall("ncclGroupSimulateEnd", nullptr, [&]() -> weft::Status {
    if (simInfo == nullptr)
      return weft::errorStatus(ncclInvalidArgument,
                               "simInfo is NULL, expected an ncclSimInfo_t set to NCCL_SIM_INFO_INITIALIZER");
    if (simInfo->magic != kSimInfoMagic || simInfo->size < sizeof(ncclSimInfo_t))
      return weft::errorStatus(ncclInvalidArgument,
                               "simInfo has magic 0x%x and size %zu, expected 0x%x and at least %zu: initialise it "
                               "with NCCL_SIM_INFO_INITIALIZER",
                               simInfo->magic, simInfo->size, kSimInfoMagic, sizeof(ncclSimInfo_t));
    double us = 0;
    WEFT_RETURN_IF_ERROR(groupSimulateEnd(&us));
    simInfo->estimatedTime = static_cast<float>(us);
    return weft::okStatus();
  });
}
