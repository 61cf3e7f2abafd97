/* Run with bench/onegpu_shim.c preloaded and WEFT_ONEGPU_DEVICES=8 over a
 * runtime with two devices (fake_cudart.c): the program must see 8 devices,
 * each device number must reach the runtime modulo 2, and a device-wide
 * synchronization must reach it as one of the legacy default stream, and a
 * pinned free must not reach it (it would wait for the device). Exits
 * non-zero, naming the call, on any difference. */
#include <stdio.h>

int cudaGetDeviceCount(int* count);
int cudaSetDevice(int device);
int cudaDeviceGetAttribute(int* value, int attr, int device);
int cudaGetDeviceProperties(void* prop, int device);
int cudaDeviceSynchronize(void);
int cudaFreeHost(void* ptr);
int fakeHostFrees(void);
int fakeCurrentDevice(void);
void* fakeLastSyncedStream(void);
int fakeDeviceSyncs(void);

static int failures = 0;

static void expect(const char* what, int got, int want) {
  if (got != want) {
    fprintf(stderr, "%s: got %d, expected %d\n", what, got, want);
    failures++;
  }
}

int main(void) {
  int count = 0;
  expect("cudaGetDeviceCount's result", cudaGetDeviceCount(&count), 0);
  expect("cudaGetDeviceCount (WEFT_ONEGPU_DEVICES=8 over 2 real devices)", count, 8);
  for (int device = 0; device < 8; device++) {
    expect("cudaSetDevice's result", cudaSetDevice(device), 0);
    expect("the runtime's device after cudaSetDevice", fakeCurrentDevice(), device % 2);
    int value = -1;
    expect("cudaDeviceGetAttribute's result", cudaDeviceGetAttribute(&value, 3, device), 0);
    expect("cudaDeviceGetAttribute's device", value, 30 + device % 2);
    int prop = -1;
    expect("cudaGetDeviceProperties's result", cudaGetDeviceProperties(&prop, device), 0);
    expect("cudaGetDeviceProperties's device", prop, 200 + device % 2);
  }
  /* A negative device is passed on as it is, for the runtime to refuse. */
  expect("cudaSetDevice(-1)", cudaSetDevice(-1), 101);
  expect("cudaDeviceSynchronize's result", cudaDeviceSynchronize(), 0);
  expect("device-wide synchronizations reaching the runtime", fakeDeviceSyncs(), 0);
  expect("the stream synchronized instead (1: cudaStreamLegacy)", (int)(long)fakeLastSyncedStream(), 1);
  static char page[4096];
  expect("cudaFreeHost's result", cudaFreeHost(page), 0);
  expect("pinned frees reaching the runtime (kept until exit)", fakeHostFrees(), 0);
  if (failures == 0)
    printf("onegpu shim: 8 devices over 2, every call mapped, device syncs on the legacy stream, no host frees\n");
  return failures == 0 ? 0 : 1;
}
