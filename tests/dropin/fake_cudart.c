/* A stand-in for libcudart.so with two devices, for the test of
 * bench/onegpu_shim.c: records the device each call was given, and which
 * synchronization reached it. Device
 * numbers outside 0..1 are refused (101: cudaErrorInvalidDevice), as the
 * real runtime refuses them. */
static int current = -1;

int cudaGetDeviceCount(int* count) {
  *count = 2;
  return 0;
}

int cudaSetDevice(int device) {
  if (device < 0 || device >= 2) return 101;
  current = device;
  return 0;
}

int fakeCurrentDevice(void) { return current; }

int cudaDeviceGetAttribute(int* value, int attr, int device) {
  if (device < 0 || device >= 2) return 101;
  *value = attr * 10 + device;
  return 0;
}

int cudaGetDeviceProperties(void* prop, int device) {
  if (device < 0 || device >= 2) return 101;
  *(int*)prop = 200 + device;
  return 0;
}

static void* lastSynced = 0;
static int deviceSyncs = 0;

int cudaStreamSynchronize(void* stream) {
  lastSynced = stream;
  return 0;
}

int cudaDeviceSynchronize(void) {
  deviceSyncs++;
  return 0;
}

void* fakeLastSyncedStream(void) { return lastSynced; }
int fakeDeviceSyncs(void) { return deviceSyncs; }

static int hostFrees = 0;

int cudaFreeHost(void* ptr) {
  (void)ptr;
  hostFrees++;
  return 0;
}

int fakeHostFrees(void) { return hostFrees; }
