/* Drop-in proof: this file is compiled against NVIDIA's own nccl.h (never
 * ours) and linked to Weft's libnccl.so. It runs a 3-rank allreduce and a
 * broadcast with ranks as threads on the host backend, a simulated group and
 * a shrink without rank 2, and checks results and the version of the library
 * actually loaded. */
#include <nccl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef WEFT_NCCL_H
#error "compiled against Weft's nccl.h; this test must use NVIDIA's"
#endif

#define RANKS 3
#define COUNT 100003

static ncclUniqueId id;
static int failures;

static void* rankMain(void* arg) {
  const int rank = (int)(long)arg;
  ncclComm_t comm;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER; /* NVIDIA's (newer) config layout */
  float* data = malloc(sizeof(float) * COUNT);
  int ok = ncclCommInitRankConfig(&comm, RANKS, id, rank, &config) == ncclSuccess;
  for (int i = 0; i < COUNT; ++i) data[i] = (float)(rank + 1);
  ok = ok && ncclAllReduce(data, data, COUNT, ncclFloat, ncclSum, comm, NULL) == ncclSuccess;
  for (int i = 0; ok && i < COUNT; ++i) ok = data[i] == 6.0f;
  if (rank == 2) data[7] = 42.0f;
  ok = ok && ncclBroadcast(data, data, COUNT, ncclFloat, 2, comm, NULL) == ncclSuccess && data[7] == 42.0f;
  /* NVIDIA's ncclSimInfo_t and NCCL_SIM_INFO_INITIALIZER: a simulated group runs nothing. */
  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;
  data[0] = -1.0f;
  ok = ok && ncclGroupStart() == ncclSuccess &&
       ncclAllReduce(data, data, COUNT, ncclFloat, ncclSum, comm, NULL) == ncclSuccess &&
       ncclGroupSimulateEnd(&sim) == ncclSuccess && sim.estimatedTime > 0.0f && data[0] == -1.0f;
  /* ncclCommShrink without rank 2, which does not call it. */
  if (ok && rank != 2) {
    int exclude[1] = {2};
    ncclComm_t child = NULL;
    int count = 0;
    ok = ncclCommShrink(comm, exclude, 1, &child, NULL, NCCL_SHRINK_DEFAULT) == ncclSuccess;
    ok = ok && ncclCommCount(child, &count) == ncclSuccess && count == 2;
    for (int i = 0; ok && i < COUNT; ++i) data[i] = (float)(rank + 1);
    ok = ok && ncclAllReduce(data, data, COUNT, ncclFloat, ncclSum, child, NULL) == ncclSuccess && data[COUNT - 1] == 3.0f;
    if (child != NULL) ncclCommDestroy(child);
  }
  if (!ok) {
    fprintf(stderr, "dropin: rank %d failed: %s\n", rank, ncclGetLastError(NULL));
    __atomic_add_fetch(&failures, 1, __ATOMIC_SEQ_CST);
  }
  ncclCommDestroy(comm);
  free(data);
  return NULL;
}

int main(void) {
  setenv("WEFT_BACKEND", "host", 0);
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess || version / 100 != 227) {
    fprintf(stderr, "dropin: loaded library reports version %d, expected Weft's 2.27.x\n", version);
    return 1;
  }
  if (ncclGetUniqueId(&id) != ncclSuccess) return 1;
  pthread_t threads[RANKS];
  for (long r = 0; r < RANKS; ++r) pthread_create(&threads[r], NULL, rankMain, (void*)r);
  for (int r = 0; r < RANKS; ++r) pthread_join(threads[r], NULL);
  printf("dropin: NVIDIA's nccl.h, library version %d: %s\n", version, failures ? "FAIL" : "PASS");
  return failures ? 1 : 0;
}
