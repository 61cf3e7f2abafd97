/* Link-time proof of drop-in compatibility: compiled against NVIDIA's own
 * nccl.h and linked against Weft's libnccl.so (never NVIDIA's), this program
 * takes the address of every function that header declares -- everything
 * nccl-tests calls when built against a 2.27+ header, and what PyTorch's
 * ProcessGroupNCCL links (ncclCommInitRankScalable, ncclCommSplit,
 * ncclCommShrink, ncclCommFinalize, ncclGroupSimulateEnd, ...). The link
 * fails on any symbol Weft does not export; the run checks that none of the
 * addresses is null and that the version call answers. */
#include <nccl.h>
#include <stdio.h>
#include <string.h>

typedef void (*AnyFunction)(void);
#define ENTRY(f) {#f, (AnyFunction)(f)}

static const struct {
  const char* name;
  AnyFunction address;
} kFunctions[] = {
    ENTRY(ncclGetVersion),          ENTRY(ncclGetUniqueId),         ENTRY(ncclCommInitRank),
    ENTRY(ncclCommInitRankConfig),  ENTRY(ncclCommInitRankScalable), ENTRY(ncclCommInitAll),
    ENTRY(ncclCommFinalize),        ENTRY(ncclCommDestroy),         ENTRY(ncclCommAbort),
    ENTRY(ncclCommRevoke),          ENTRY(ncclCommSplit),           ENTRY(ncclCommShrink),
    ENTRY(ncclCommCount),           ENTRY(ncclCommCuDevice),        ENTRY(ncclCommUserRank),
    ENTRY(ncclCommGetAsyncError),   ENTRY(ncclGetErrorString),      ENTRY(ncclGetLastError),
    ENTRY(ncclResetDebugInit),      ENTRY(ncclCommRegister),        ENTRY(ncclCommDeregister),
    ENTRY(ncclCommWindowRegister),  ENTRY(ncclCommWindowDeregister), ENTRY(ncclMemAlloc),
    ENTRY(ncclMemFree),             ENTRY(ncclRedOpCreatePreMulSum), ENTRY(ncclRedOpDestroy),
    ENTRY(ncclAllReduce),           ENTRY(ncclBroadcast),           ENTRY(ncclBcast),
    ENTRY(ncclReduce),              ENTRY(ncclAllGather),           ENTRY(ncclReduceScatter),
    ENTRY(ncclAlltoAll),            ENTRY(ncclGather),              ENTRY(ncclScatter),
    ENTRY(ncclSend),                ENTRY(ncclRecv),                ENTRY(ncclGroupStart),
    ENTRY(ncclGroupEnd),            ENTRY(ncclGroupSimulateEnd),
};

int main(void) {
  int missing = 0;
  for (size_t i = 0; i < sizeof(kFunctions) / sizeof(kFunctions[0]); ++i)
    if (kFunctions[i].address == NULL) {
      printf("missing: %s\n", kFunctions[i].name);
      missing = 1;
    }
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version < 22700) {
    printf("ncclGetVersion: %d\n", version);
    return 1;
  }
  /* A 2.28 function Weft does not implement answers, with a reason. */
  ncclResult_t revoked = ncclCommRevoke(NULL, 0);
  const char* why = ncclGetLastError(NULL);
  if (revoked != ncclInvalidUsage || why == NULL || strstr(why, "ncclCommRevoke") == NULL) {
    printf("ncclCommRevoke: result %d, last error \"%s\"\n", (int)revoked, why ? why : "(null)");
    return 1;
  }
  printf("%zu functions of NVIDIA's nccl.h resolved in Weft's library (version %d)\n",
         sizeof(kFunctions) / sizeof(kFunctions[0]), version);
  return missing;
}
