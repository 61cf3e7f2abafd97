/*
 * Weft's own extensions to the NCCL API. Everything here is prefixed
 * `weft`; nccl.h stays exactly NCCL's interface.
 */
#ifndef WEFT_H_
#define WEFT_H_

#include "nccl.h"

#define WEFT_VERSION_MAJOR 0
#define WEFT_VERSION_MINOR 1
#define WEFT_VERSION_PATCH 0
#define WEFT_VERSION_CODE (WEFT_VERSION_MAJOR * 10000 + WEFT_VERSION_MINOR * 100 + WEFT_VERSION_PATCH)

#ifdef __cplusplus
extern "C" {
#endif

/* Where a communicator's collectives execute. */
typedef enum {
  weftBackendHost = 0, /* host memory; collectives complete on the calling thread's return */
  weftBackendCuda = 1  /* device memory; collectives asynchronous on the user's stream */
} weftBackend_t;

/* Weft's own version as WEFT_VERSION_CODE (ncclGetVersion reports the NCCL API level). */
int weftGetVersion(void);
/* Weft's version and build options, e.g. "weft 0.1.0 (cuda: sm_90)". */
const char* weftGetVersionString(void);

/* The backend a communicator runs on. */
ncclResult_t weftCommGetBackend(ncclComm_t comm, weftBackend_t* backend);

/* Writes a one-paragraph human description of the communicator (rank, size,
 * backend, channels, rings and transports) into buf; always NUL-terminates. */
ncclResult_t weftCommDescribe(ncclComm_t comm, char* buf, size_t len);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_H_ */
