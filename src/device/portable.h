// Host/device portability. Portable headers under src/device/ use only what
// is here: no threadIdx, no __shared__, no PTX (those live in backend/cuda/).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define WEFT_HD __host__ __device__ inline
#else
#define WEFT_HD inline
#endif

// Loop unrolling hint understood by both compilers.
// Kept out of line in CUDA builds: a large body instantiated for several
// protocols and inlined at every verb would multiply the kernels' build
// time (docs/performance.md, kernel build); host builds inline it.
#if defined(__CUDACC__)
#define WEFT_HD_OUTLINED __host__ __device__ __noinline__
#else
#define WEFT_HD_OUTLINED inline
#endif

#if defined(__CUDACC__)
#define WEFT_UNROLL _Pragma("unroll")
#else
#define WEFT_UNROLL _Pragma("GCC unroll 4")
#endif

// True while compiling device code (the CUDA device pass).
#if defined(__CUDA_ARCH__)
#define WEFT_DEVICE_PASS 1
#else
#define WEFT_DEVICE_PASS 0
#endif

namespace weft::device {

template <typename T>
WEFT_HD constexpr T divUp(T a, T b) {
  return (a + b - 1) / b;
}

template <typename T>
WEFT_HD constexpr T roundUp(T a, T b) {
  return divUp(a, b) * b;
}

template <typename T>
WEFT_HD constexpr T minOf(T a, T b) {
  return a < b ? a : b;
}

template <typename T>
WEFT_HD constexpr T maxOf(T a, T b) {
  return a < b ? b : a;
}

// Position arithmetic on a ring of n: (i mod n) for i possibly negative.
WEFT_HD constexpr int ringMod(int i, int n) { return ((i % n) + n) % n; }

}  // namespace weft::device
