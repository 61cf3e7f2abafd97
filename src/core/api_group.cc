// Group entry points.
#include "core/api.h"
#include "core/group.h"

using namespace weft::core;

WEFT_NCCL_API(ncclResult_t, ncclGroupStart) {
  return apiCall("ncclGroupStart", nullptr, [] { return groupStart(); });
}

WEFT_NCCL_API(ncclResult_t, ncclGroupEnd) {
  return apiCall("ncclGroupEnd", nullptr, [] { return groupEnd(); });
}

WEFT_NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  (void)simInfo;
  return apiCall("ncclGroupSimulateEnd", nullptr, [] {
    return notSupported("ncclGroupSimulateEnd",
                        "the cost model that estimates a group's time is not built yet; "
                        "the group stays open, end it with ncclGroupEnd");
  });
}
