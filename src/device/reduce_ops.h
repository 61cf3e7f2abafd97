// Reduction functors. Each has a combine, an optional pre-op applied to a
// rank's own input as it is first read (PreMulSum), and an optional post-op
// applied to the final result as it is written (SumPostDiv, used for integer
// averages). kHasPre/kHasPost let the data loops drop the calls entirely.
#pragma once

#include "device/types.h"

namespace weft::device {

// Which functor a collective uses; chosen on the host from the API op.
enum class RedOpKind : uint8_t { kSum = 0, kProd, kMax, kMin, kPreMulSum, kSumPostDiv, kCount };

template <typename T>
struct FuncSum {
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  WEFT_HD T operator()(T a, T b) const { return Arith<T>::add(a, b); }
  WEFT_HD T pre(T x) const { return x; }
  WEFT_HD T post(T x) const { return x; }
};

template <typename T>
struct FuncProd {
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  WEFT_HD T operator()(T a, T b) const { return Arith<T>::mul(a, b); }
  WEFT_HD T pre(T x) const { return x; }
  WEFT_HD T post(T x) const { return x; }
};

template <typename T>
struct FuncMax {
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  WEFT_HD T operator()(T a, T b) const { return Arith<T>::max(a, b); }
  WEFT_HD T pre(T x) const { return x; }
  WEFT_HD T post(T x) const { return x; }
};

template <typename T>
struct FuncMin {
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  WEFT_HD T operator()(T a, T b) const { return Arith<T>::min(a, b); }
  WEFT_HD T pre(T x) const { return x; }
  WEFT_HD T post(T x) const { return x; }
};

// x -> scalar * x on the way in, then sum. The scalar is resolved before the
// data loops start (from the work descriptor's immediate or pointer).
template <typename T>
struct FuncPreMulSum {
  static constexpr bool kHasPre = true;
  static constexpr bool kHasPost = false;
  T scalar;
  WEFT_HD T operator()(T a, T b) const { return Arith<T>::add(a, b); }
  WEFT_HD T pre(T x) const { return Arith<T>::mul(x, scalar); }
  WEFT_HD T post(T x) const { return x; }
};

// Sum, then divide the final result by `divisor` (truncating for integers).
template <typename T>
struct FuncSumPostDiv {
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = true;
  uint64_t divisor;
  WEFT_HD T operator()(T a, T b) const { return Arith<T>::add(a, b); }
  WEFT_HD T pre(T x) const { return x; }
  WEFT_HD T post(T x) const { return Arith<T>::divide(x, divisor); }
};

// For collectives that only move data (AllGather, Broadcast, send/recv).
template <typename T>
struct FuncCopy {
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  WEFT_HD T operator()(T /*a*/, T b) const { return b; }
  WEFT_HD T pre(T x) const { return x; }
  WEFT_HD T post(T x) const { return x; }
};

}  // namespace weft::device
