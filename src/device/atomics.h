// One atomics vocabulary for kernels, host workers and the proxy.
//
// Device pass: cuda::atomic_ref (libcu++) at system scope, because FIFO
// counters are read by other GPUs, by the host proxy, or by another process
// through mapped memory. Host pass: GCC __atomic builtins, which are address
// free and therefore valid in shared memory between processes.
// No volatile is used for synchronisation anywhere.
#pragma once

#include "device/portable.h"

#if WEFT_DEVICE_PASS
#include <cuda/atomic>
#endif

namespace weft::device {

template <typename T>
WEFT_HD T loadAcquire(const T* ptr) {
#if WEFT_DEVICE_PASS
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*const_cast<T*>(ptr)).load(cuda::memory_order_acquire);
#else
  return __atomic_load_n(ptr, __ATOMIC_ACQUIRE);
#endif
}

template <typename T>
WEFT_HD T loadRelaxed(const T* ptr) {
#if WEFT_DEVICE_PASS
  return cuda::atomic_ref<T, cuda::thread_scope_system>(*const_cast<T*>(ptr)).load(cuda::memory_order_relaxed);
#else
  return __atomic_load_n(ptr, __ATOMIC_RELAXED);
#endif
}

template <typename T>
WEFT_HD void storeRelease(T* ptr, T value) {
#if WEFT_DEVICE_PASS
  cuda::atomic_ref<T, cuda::thread_scope_system>(*ptr).store(value, cuda::memory_order_release);
#else
  __atomic_store_n(ptr, value, __ATOMIC_RELEASE);
#endif
}

template <typename T>
WEFT_HD void storeRelaxed(T* ptr, T value) {
#if WEFT_DEVICE_PASS
  cuda::atomic_ref<T, cuda::thread_scope_system>(*ptr).store(value, cuda::memory_order_relaxed);
#else
  __atomic_store_n(ptr, value, __ATOMIC_RELAXED);
#endif
}

// Fences for the direct-mode mailbox's sequence lock (prims_simple.h).
WEFT_HD void fenceRelease() {
#if WEFT_DEVICE_PASS
  cuda::atomic_thread_fence(cuda::memory_order_release, cuda::thread_scope_system);
#else
  __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
}

WEFT_HD void fenceAcquire() {
#if WEFT_DEVICE_PASS
  cuda::atomic_thread_fence(cuda::memory_order_acquire, cuda::thread_scope_system);
#else
  __atomic_thread_fence(__ATOMIC_ACQUIRE);
#endif
}

}  // namespace weft::device
