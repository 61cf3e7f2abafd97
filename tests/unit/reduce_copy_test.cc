// The host's data loop (device/reduce_copy.h) against a scalar reference:
// every source and output count a verb uses, sizes on both sides of the
// blocks (kHostBlockBytes) that a result with several outputs is written in (combined
// into the first output, then copied to the others), pre- and post-ops,
// in place, an output given twice, and pointers off 16-byte alignment.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "device/reduce_copy.h"
#include "device/reduce_ops.h"

namespace weft::device {
namespace {

// The host backend's team: one thread.
struct OneThread {
  static constexpr int size() { return 1; }
  static constexpr int threadRank() { return 0; }
};

// Element counts around the block (kHostBlockBytes) for 4-byte types and
// for doubles, and across several blocks.
constexpr int64_t kBlock4 = kHostBlockBytes / 4;
const std::vector<int64_t> kCounts = {1,   7, 511, kBlock4 / 2 + 1, kBlock4 - 1, kBlock4, kBlock4 + 1, 2 * kBlock4 + 3,
                                      1500};

template <typename T>
T inputValue(int source, int64_t i) {
  return static_cast<T>((i * (source + 3)) % 97 - 40 + source);
}

// Combines nSrcs inputs (the op's pre on source `pre` only, post when asked)
// the way reduceCopy must, in source order.
template <typename T, typename Op>
std::vector<T> reference(const Op& op, const std::vector<std::vector<T>>& in, int64_t n, int pre, bool post) {
  std::vector<T> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    T acc = pre == 0 ? op.pre(in[0][static_cast<size_t>(i)]) : in[0][static_cast<size_t>(i)];
    for (size_t k = 1; k < in.size(); ++k) {
      const T x = in[k][static_cast<size_t>(i)];
      acc = op(acc, static_cast<int>(k) == pre ? op.pre(x) : x);
    }
    out[static_cast<size_t>(i)] = post ? op.post(acc) : acc;
  }
  return out;
}

// Runs reduceCopy on nSrcs x nDsts buffers of n elements, `offset` elements
// into their allocations, and checks every output against the reference.
template <typename T, typename Op>
void check(const Op& op, int nSrcs, int nDsts, int64_t n, int pre, bool post, int64_t offset) {
  SCOPED_TRACE(::testing::Message() << nSrcs << " sources, " << nDsts << " outputs, " << n << " elements, pre " << pre
                                    << ", post " << post << ", offset " << offset);
  std::vector<std::vector<T>> in(static_cast<size_t>(nSrcs));
  std::vector<std::vector<T>> out(static_cast<size_t>(nDsts), std::vector<T>(static_cast<size_t>(n + offset), T(-7)));
  const T* srcs[kMaxSrcs] = {};
  T* dsts[kMaxDsts] = {};
  for (int k = 0; k < nSrcs; ++k) {
    in[static_cast<size_t>(k)].resize(static_cast<size_t>(n + offset));
    for (int64_t i = 0; i < n + offset; ++i) in[static_cast<size_t>(k)][static_cast<size_t>(i)] = inputValue<T>(k, i);
    srcs[k] = in[static_cast<size_t>(k)].data() + offset;
  }
  for (int k = 0; k < nDsts; ++k) dsts[k] = out[static_cast<size_t>(k)].data() + offset;
  std::vector<std::vector<T>> shifted;
  for (const auto& v : in) shifted.emplace_back(v.begin() + offset, v.end());
  const std::vector<T> want = reference<T>(op, shifted, n, pre, post);
  OneThread coop;
  reduceCopy<1, 3, 1, 3>(coop, op, srcs, nSrcs, dsts, nDsts, n, pre, post);
  for (int k = 0; k < nDsts; ++k)
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(dsts[k][i], want[static_cast<size_t>(i)]) << "output " << k << ", element " << i;
  for (int k = 0; k < nDsts; ++k)
    for (int64_t i = 0; i < offset; ++i) ASSERT_EQ(out[static_cast<size_t>(k)][static_cast<size_t>(i)], T(-7));
}

TEST(HostReduceCopy, EveryCountOfSourcesAndOutputsAcrossBlockBorders) {
  for (int64_t n : kCounts)
    for (int nSrcs = 1; nSrcs <= 3; ++nSrcs)
      for (int nDsts = 1; nDsts <= 3; ++nDsts) {
        check<float>(FuncSum<float>{}, nSrcs, nDsts, n, -1, false, 0);
        check<int32_t>(FuncMax<int32_t>{}, nSrcs, nDsts, n, -1, false, 0);
      }
}

TEST(HostReduceCopy, PreAndPostOpsWithSeveralOutputs) {
  for (int64_t n : kCounts)
    for (int nDsts = 2; nDsts <= 3; ++nDsts) {
      check<int32_t>(FuncPreMulSum<int32_t>{3}, 2, nDsts, n, 1, false, 0);
      check<int32_t>(FuncPreMulSum<int32_t>{-2}, 3, nDsts, n, 0, false, 0);
      check<int32_t>(FuncPreMulSum<int32_t>{5}, 1, nDsts, n, 0, false, 0);  // a scaled send
      check<int32_t>(FuncSumPostDiv<int32_t>{3}, 2, nDsts, n, -1, true, 0);
      check<double>(FuncSumPostDiv<double>{4}, 3, nDsts, n, -1, true, 0);
    }
}

TEST(HostReduceCopy, PointersOffSixteenByteAlignment) {
  for (int64_t offset : {1, 2, 3})
    for (int64_t n : {int64_t{513}, kHostBlockBytes / 4 + 5}) {
      check<float>(FuncSum<float>{}, 2, 2, n, -1, false, offset);
      check<int32_t>(FuncPreMulSum<int32_t>{7}, 3, 3, n, 2, false, offset);
    }
}

// In place: the first output is the first source (a ring rank's own buffer
// when sendbuff == recvbuff), and a second output receives the same result.
TEST(HostReduceCopy, InPlaceFirstOutputIsTheFirstSource) {
  for (int64_t n : kCounts) {
    SCOPED_TRACE(n);
    std::vector<float> own(static_cast<size_t>(n)), peer(static_cast<size_t>(n)), slot(static_cast<size_t>(n), -1.f);
    for (int64_t i = 0; i < n; ++i) {
      own[static_cast<size_t>(i)] = static_cast<float>(i % 13);
      peer[static_cast<size_t>(i)] = static_cast<float>(100 + i % 5);
    }
    const std::vector<float> before = own;
    const float* srcs[2] = {own.data(), peer.data()};
    float* dsts[2] = {own.data(), slot.data()};
    OneThread coop;
    reduceCopy<2, 2, 2, 2>(coop, FuncSum<float>{}, srcs, 2, dsts, 2, n, -1, false);
    for (int64_t i = 0; i < n; ++i) {
      const float want = before[static_cast<size_t>(i)] + peer[static_cast<size_t>(i)];
      ASSERT_EQ(own[static_cast<size_t>(i)], want) << i;
      ASSERT_EQ(slot[static_cast<size_t>(i)], want) << i;
    }
  }
}

// An output given twice (a cross-memory send names the own output again):
// written once, right.
TEST(HostReduceCopy, OutputGivenTwice) {
  for (int64_t n : kCounts) {
    SCOPED_TRACE(n);
    std::vector<int32_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n)), out(static_cast<size_t>(n), -1);
    for (int64_t i = 0; i < n; ++i) {
      a[static_cast<size_t>(i)] = static_cast<int32_t>(i);
      b[static_cast<size_t>(i)] = static_cast<int32_t>(3 * i + 1);
    }
    const int32_t* srcs[2] = {a.data(), b.data()};
    int32_t* dsts[2] = {out.data(), out.data()};
    OneThread coop;
    reduceCopy<2, 2, 2, 2>(coop, FuncSum<int32_t>{}, srcs, 2, dsts, 2, n, -1, false);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out[static_cast<size_t>(i)], static_cast<int32_t>(4 * i + 1)) << i;
  }
}

}  // namespace
}  // namespace weft::device
