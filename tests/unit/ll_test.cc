// The LL protocol on the host data path: a producer and a consumer thread
// over one in-process FIFO, through the LL Primitives.
//  - Many calls whose sizes cross pack and LL-step borders, starting just
//    below 2^32 steps, so the 32-bit line flags wrap in the middle: every
//    call delivers exactly what was sent (a stale line accepted, or a fresh
//    one refused, shows up as wrong data or a timeout).
//  - The consumer combines with its own input (recvReduceCopy) in the same
//    run, so the reducing path and its tail packs are checked too.
//  - The region layout: LL lines sit after the Simple slots, and the Simple
//    counters do not move when only LL runs.
#include <gtest/gtest.h>

#include <cstdint>
#include <thread>
#include <vector>

#include "device/backend/host/host_coop.h"
#include "device/primitives.h"
#include "device/reduce_ops.h"
#include "fifo_link.h"

namespace weft::device {
namespace {

template <typename T>
using LLPrims = Primitives<T, FuncSum<T>, Fan<1, 1>, ProtoLL, HostCoop>;

HostWaitConfig testConfig() {
  HostWaitConfig config;
  config.spinCount = 64;
  config.timeoutNs = 10 * 1000000000ll;  // a protocol error ends as a failed wait, not a hang
  return config;
}

// Starts both ends of the LL region at `step` (as if that many steps had run).
void startAt(Link& link, uint64_t step) {
  link.producer.llStep = link.producer.llSeen = step;
  link.consumer.llStep = link.consumer.llSeen = step;
  *link.producer.llHead = step;
}

int64_t sizeOfCall(int call, int64_t sliceElems) {
  const int64_t sizes[] = {1, 2, 3, sliceElems - 1, sliceElems, sliceElems + 1, 3 * sliceElems + 5, 0, 17};
  return sizes[call % 9];
}

template <typename T>
void runWrapStress(int64_t stepBytes, uint64_t start, int calls) {
  Link link(stepBytes, 0, 1);
  startAt(link, start);
  const int64_t sliceElems = link.producer.llStepBytes / 2 / static_cast<int64_t>(sizeof(T));
  const HostWaitConfig config = testConfig();
  WaitFailureInfo sendFailure, recvFailure;
  std::vector<int> bad;
  std::thread producer([&] {
    HostCoop coop(config);
    FifoEnd* sends[1] = {&link.producer};
    std::vector<T> data;
    for (int call = 0; call < calls && !coop.failed(); ++call) {
      const int64_t n = sizeOfCall(call, sliceElems);
      data.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) data[static_cast<size_t>(i)] = static_cast<T>(call * 31 + i);
      LLPrims<T> prims(coop, FuncSum<T>(), 0, nullptr, 0, sends, 1);
      prims.send(data.data(), n);
    }
    sendFailure = coop.failure();
  });
  std::thread consumer([&] {
    HostCoop coop(config);
    FifoEnd* recvs[1] = {&link.consumer};
    std::vector<T> own, out;
    for (int call = 0; call < calls && !coop.failed(); ++call) {
      const int64_t n = sizeOfCall(call, sliceElems);
      own.assign(static_cast<size_t>(n), static_cast<T>(call % 3));
      out.assign(static_cast<size_t>(n), static_cast<T>(-1));
      LLPrims<T> prims(coop, FuncSum<T>(), 0, recvs, 1, nullptr, 0);
      if (call % 2)
        prims.recvReduceCopy(own.data(), out.data(), n, true);
      else
        prims.recv(out.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const T sent = static_cast<T>(call * 31 + i);
        const T want = call % 2 ? static_cast<T>(sent + static_cast<T>(call % 3)) : sent;
        if (out[static_cast<size_t>(i)] != want) {
          bad.push_back(call);
          break;
        }
      }
    }
    recvFailure = coop.failure();
  });
  producer.join();
  consumer.join();
  ASSERT_EQ(sendFailure.kind, WaitFailure::kNone);
  ASSERT_EQ(recvFailure.kind, WaitFailure::kNone);
  EXPECT_TRUE(bad.empty()) << bad.size() << " calls delivered wrong data, first call " << bad.front();
  // Both ends agree on how far they went, the flags wrapped, and the Simple
  // counters were never touched.
  EXPECT_EQ(link.producer.llStep, link.consumer.llStep);
  EXPECT_EQ(*link.consumer.llHead, link.consumer.llStep);
  EXPECT_GT(link.producer.llStep, start);
  if (start > 0) {
    EXPECT_GT(link.producer.llStep, uint64_t{1} << 32) << "the run did not cross the 32-bit wrap";
  }
  EXPECT_EQ(link.published(), 0u);
  EXPECT_EQ(link.released(), 0u);
}

TEST(LL, FlagsWrapAcross32BitsUint32) { runWrapStress<uint32_t>(1024, (uint64_t{1} << 32) - 1000, 4000); }

TEST(LL, FlagsWrapAcross32BitsInt64SpansTwoLines) { runWrapStress<int64_t>(256, (uint64_t{1} << 32) - 333, 3000); }

TEST(LL, BytesFromStepZero) { runWrapStress<uint8_t>(128, 0, 2000); }

TEST(LL, RegionLayout) {
  Link link(4096, 0, 1);
  EXPECT_EQ(link.producer.llLines, link.producer.slots + 4096 * kFifoSteps);
  EXPECT_EQ(link.producer.llLines, link.consumer.llLines);
  EXPECT_EQ(link.producer.llStepBytes, 4096);
  EXPECT_EQ(llStepBytesFor(64), 128);
  EXPECT_EQ(llStepBytesFor(200), 128);
  EXPECT_EQ(llStepBytesFor(1 << 20), kLLMaxStepBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(link.producer.llLines) % 16, 0u);
}

}  // namespace
}  // namespace weft::device
