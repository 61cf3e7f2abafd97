/* libweft-onegpu.so: lets a stock CUDA program that gives each rank its own
 * device number (nccl-tests' -g N and -t N, which use devices 0..N-1) run
 * all of them on the GPUs a machine has, so several ranks share one GPU.
 * Loaded with LD_PRELOAD in front of the program's libcudart.so:
 *   WEFT_ONEGPU_DEVICES=4 LD_PRELOAD=build/lib/libweft-onegpu.so \
 *     LD_LIBRARY_PATH=build/lib all_reduce_perf -t 4 -g 1 ...
 * cudaGetDeviceCount reports WEFT_ONEGPU_DEVICES devices (the real count when
 * unset), and every call taking a device number (cudaSetDevice,
 * cudaGetDeviceProperties, cudaDeviceGetAttribute) is given that number
 * modulo the real count. Weft links its CUDA runtime statically, so none of
 * its own calls pass through here: it sees the device the program's thread
 * made current, which is what a rank on a shared GPU must see.
 * cudaDeviceSynchronize becomes cudaStreamSynchronize of the legacy default
 * stream: a program written for a GPU per rank waits for its whole device
 * (nccl-tests does, around its data checks), and on a shared GPU that is
 * every rank's kernels, one of which may be waiting for this very thread's
 * next launch: a deadlock until the timeout. The legacy stream holds the
 * program's own set-up and check kernels, and the ranks' collectives run on
 * non-blocking streams, which it does not wait for. cudaFreeHost waits for
 * the whole device too (nccl-tests frees a pinned word after each data
 * check, while the other rank may already be in its next call): it frees
 * nothing here, the memory stays pinned until the process exits (one page
 * per data check for nccl-tests).
 * A benchmark tool, never part of the library. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*CountFn)(int*);
typedef int (*SetFn)(int);
typedef int (*PropFn)(void*, int);
typedef int (*AttrFn)(int*, int, int);
typedef int (*StreamSyncFn)(void*);

static void* nextSymbol(const char* name) {
  void* fn = dlsym(RTLD_NEXT, name);
  if (fn == NULL) {
    fprintf(stderr, "weft-onegpu: %s is not defined after the shim: is the program linked to libcudart.so?\n", name);
    abort();
  }
  return fn;
}

/* The real count, asked once (every thread computes the same value). Returns
 * the runtime's error, 0 on success. */
static int realCount(int* count) {
  static int known = 0;
  int seen = __atomic_load_n(&known, __ATOMIC_RELAXED);
  if (seen > 0) {
    *count = seen;
    return 0;
  }
  int n = 0;
  int err = ((CountFn)nextSymbol("cudaGetDeviceCount"))(&n);
  if (err != 0) return err;
  if (n <= 0) n = 1; /* the runtime reports "no device" itself on the next call */
  __atomic_store_n(&known, n, __ATOMIC_RELAXED);
  *count = n;
  return 0;
}

static int mapDevice(int device, int* mapped) {
  int count = 0;
  int err = realCount(&count);
  if (err != 0) return err;
  *mapped = device < 0 ? device : device % count;
  return 0;
}

int cudaGetDeviceCount(int* count) {
  int err = realCount(count);
  if (err != 0) return err;
  const char* want = getenv("WEFT_ONEGPU_DEVICES");
  if (want != NULL && atoi(want) > 0) *count = atoi(want);
  return 0;
}

int cudaSetDevice(int device) {
  int mapped = 0;
  int err = mapDevice(device, &mapped);
  return err != 0 ? err : ((SetFn)nextSymbol("cudaSetDevice"))(mapped);
}

int cudaGetDeviceProperties(void* prop, int device) {
  int mapped = 0;
  int err = mapDevice(device, &mapped);
  return err != 0 ? err : ((PropFn)nextSymbol("cudaGetDeviceProperties"))(prop, mapped);
}

/* CUDA 12's name for the same call (its header renames it). */
int cudaGetDeviceProperties_v2(void* prop, int device) {
  int mapped = 0;
  int err = mapDevice(device, &mapped);
  return err != 0 ? err : ((PropFn)nextSymbol("cudaGetDeviceProperties_v2"))(prop, mapped);
}

int cudaDeviceGetAttribute(int* value, int attr, int device) {
  int mapped = 0;
  int err = mapDevice(device, &mapped);
  return err != 0 ? err : ((AttrFn)nextSymbol("cudaDeviceGetAttribute"))(value, attr, mapped);
}

int cudaDeviceSynchronize(void) {
  void* const legacyStream = (void*)0x1; /* cudaStreamLegacy */
  return ((StreamSyncFn)nextSymbol("cudaStreamSynchronize"))(legacyStream);
}

int cudaFreeHost(void* ptr) {
  (void)ptr; /* kept until exit: see above */
  return 0;
}
