// The one data loop: read up to kMaxSrcs inputs, combine them, write the
// result to up to kMaxDsts outputs. Every verb of every protocol ends here.
//
// Threads of a team take elements i = rank, rank + size, ... so a CUDA block
// coalesces; on the host the team is one thread (size() is a constant 1) and
// the loop is a plain contiguous loop the compiler vectorises. Sources and
// destinations may alias element-for-element (in-place collectives), so no
// restrict qualifiers.
#pragma once

#include <string.h>

#include "device/portable.h"

namespace weft::device {

constexpr int kMaxSrcs = 4;
constexpr int kMaxDsts = 4;

template <int NSrc, int NDst, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopyFixed(Coop& coop, const RedOp& op, const T* const* srcs, T* const* dsts, int64_t n,
                             bool applyPre, bool applyPost) {
  // Copies with nothing to compute go through memcpy on the host: it is
  // faster than any loop we could write, with non-temporal stores for big runs.
#if !WEFT_DEVICE_PASS
  if constexpr (NSrc == 1 && NDst == 1 && !RedOp::kHasPre && !RedOp::kHasPost) {
    if (coop.size() == 1) {
      if (dsts[0] != srcs[0]) memcpy(dsts[0], srcs[0], static_cast<size_t>(n) * sizeof(T));
      return;
    }
  }
#endif
  const T* s[NSrc];
  T* d[NDst];
  for (int k = 0; k < NSrc; ++k) s[k] = srcs[k];
  for (int k = 0; k < NDst; ++k) d[k] = dsts[k];
  const bool pre = RedOp::kHasPre && applyPre;
  const bool post = RedOp::kHasPost && applyPost;
  for (int64_t i = coop.threadRank(); i < n; i += coop.size()) {
    T acc = s[0][i];
    if (pre) acc = op.pre(acc);
    WEFT_UNROLL
    for (int k = 1; k < NSrc; ++k) acc = op(acc, s[k][i]);
    if (post) acc = op.post(acc);
    WEFT_UNROLL
    for (int k = 0; k < NDst; ++k) d[k][i] = acc;
  }
}

template <int NSrc, int MaxDsts, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopyDsts(Coop& coop, const RedOp& op, const T* const* srcs, T* const* dsts, int nDsts, int64_t n,
                            bool applyPre, bool applyPost) {
  if constexpr (MaxDsts >= 4)
    if (nDsts == 4) return reduceCopyFixed<NSrc, 4>(coop, op, srcs, dsts, n, applyPre, applyPost);
  if constexpr (MaxDsts >= 3)
    if (nDsts == 3) return reduceCopyFixed<NSrc, 3>(coop, op, srcs, dsts, n, applyPre, applyPost);
  if constexpr (MaxDsts >= 2)
    if (nDsts == 2) return reduceCopyFixed<NSrc, 2>(coop, op, srcs, dsts, n, applyPre, applyPost);
  return reduceCopyFixed<NSrc, 1>(coop, op, srcs, dsts, n, applyPre, applyPost);
}

// Combines nSrcs inputs into nDsts outputs. srcs[0] is the rank's own input
// when applyPre is set (the pre-op applies to it alone); the result is
// post-processed when applyPost is set. MaxSrcs/MaxDsts bound what a caller
// can pass, so only the loops it can reach are instantiated.
template <int MaxSrcs, int MaxDsts, typename T, typename RedOp, typename Coop>
WEFT_HD void reduceCopy(Coop& coop, const RedOp& op, const T* const* srcs, int nSrcs, T* const* dsts, int nDsts,
                        int64_t n, bool applyPre, bool applyPost) {
  static_assert(MaxSrcs >= 1 && MaxSrcs <= kMaxSrcs && MaxDsts >= 1 && MaxDsts <= kMaxDsts, "bad fan");
  if (n <= 0 || nDsts <= 0) return;
  if constexpr (MaxSrcs >= 4)
    if (nSrcs == 4) return reduceCopyDsts<4, MaxDsts>(coop, op, srcs, dsts, nDsts, n, applyPre, applyPost);
  if constexpr (MaxSrcs >= 3)
    if (nSrcs == 3) return reduceCopyDsts<3, MaxDsts>(coop, op, srcs, dsts, nDsts, n, applyPre, applyPost);
  if constexpr (MaxSrcs >= 2)
    if (nSrcs == 2) return reduceCopyDsts<2, MaxDsts>(coop, op, srcs, dsts, nDsts, n, applyPre, applyPost);
  return reduceCopyDsts<1, MaxDsts>(coop, op, srcs, dsts, nDsts, n, applyPre, applyPost);
}

}  // namespace weft::device
