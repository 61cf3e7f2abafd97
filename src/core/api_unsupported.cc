// Entry points exported for ABI completeness that Weft does not implement
// yet. Each fails with ncclInvalidUsage and a message saying so; none
// pretends to succeed. docs/api.md lists them.
#include "core/api.h"

using namespace weft::core;

// NCCL 2.28: exported so programs built against a 2.28 header link.
WEFT_NCCL_API(ncclResult_t, ncclCommRevoke, ncclComm_t comm, int revokeFlags) {
  (void)revokeFlags;
  return apiCall("ncclCommRevoke", comm,
                 [] { return notSupported("ncclCommRevoke", "use ncclCommAbort, which always returns"); });
}

// NCCL 2.28's device API: a program built against a 2.28 header (nccl-tests
// 2.19 among them) refers to these, so they must exist for it to load. The
// requirement and result types come from that header's nccl_device/core.h,
// which a 2.27 header lacks; only their addresses cross this boundary.
WEFT_NCCL_API(ncclResult_t, ncclDevCommCreate, ncclComm_t comm, const void* requirements, void* outDevComm) {
  (void)requirements, (void)outDevComm;
  return apiCall("ncclDevCommCreate", comm, [] {
    return notSupported("ncclDevCommCreate",
                        "the NCCL 2.28 device API (kernels calling into the communicator) has no Weft "
                        "counterpart; use the host API's collectives");
  });
}

WEFT_NCCL_API(ncclResult_t, ncclDevCommDestroy, ncclComm_t comm, const void* devComm) {
  (void)devComm;
  return apiCall("ncclDevCommDestroy", comm, [] {
    return notSupported("ncclDevCommDestroy", "no device communicator can exist: ncclDevCommCreate is unsupported");
  });
}
