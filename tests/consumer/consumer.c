/* A program that uses an installed Weft the way a user's program does: built
 * by tests/consumer/CMakeLists.txt (find_package) or with pkg-config, against
 * the install tree alone (tests/scripts/check_consumers.sh).
 *
 *   consumer            checks it was compiled against Weft's nccl.h and
 *                       loaded Weft's library, then runs an allreduce on one
 *                       rank on the host backend; prints the library's path
 *   consumer --version  prints the loaded library's ncclGetVersion and path
 *                       only: it must also run on NVIDIA's libnccl.so.2 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef CONSUMER_USES_WEFT
#include <weft.h>
#endif

#ifndef WEFT_NCCL_H
#error "compiled against an nccl.h that is not Weft's (the CUDA toolkit's?)"
#endif

static const char* loadedFrom(void) {
  Dl_info info;
  return dladdr((void*)ncclGetVersion, &info) && info.dli_fname ? info.dli_fname : "(unknown)";
}

static int allreduceOneRank(void) {
  enum { kCount = 1000 };
  float data[kCount];
  for (int i = 0; i < kCount; ++i) data[i] = (float)i;
  ncclUniqueId id;
  ncclComm_t comm;
  if (ncclGetUniqueId(&id) != ncclSuccess || ncclCommInitRank(&comm, 1, id, 0) != ncclSuccess) {
    fprintf(stderr, "consumer: init failed: %s\n", ncclGetLastError(NULL));
    return 1;
  }
  int ok = ncclAllReduce(data, data, kCount, ncclFloat, ncclSum, comm, NULL) == ncclSuccess;
  for (int i = 0; ok && i < kCount; ++i) ok = data[i] == (float)i;
  if (!ok) fprintf(stderr, "consumer: allreduce failed: %s\n", ncclGetLastError(comm));
  ncclCommDestroy(comm);
  return ok ? 0 : 1;
}

int main(int argc, char** argv) {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return 1;
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("%d %s\n", version, loadedFrom());
    return 0;
  }
  if (version != NCCL_VERSION_CODE) {
    fprintf(stderr, "consumer: loaded %s reports %d, nccl.h says %d\n", loadedFrom(), version, NCCL_VERSION_CODE);
    return 1;
  }
#ifdef CONSUMER_USES_WEFT
  if (weftGetVersion() != WEFT_VERSION_CODE) return 1;
#endif
  setenv("WEFT_BACKEND", "host", 0);
  if (allreduceOneRank() != 0) return 1;
  printf("consumer OK: %d from %s\n", version, loadedFrom());
  return 0;
}
