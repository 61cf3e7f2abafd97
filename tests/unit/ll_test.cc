// The line protocols (LL, LL128) on the host data path: a producer and a
// consumer thread over one in-process FIFO, through their Primitives.
//  - Many calls whose sizes cross pack and LL-step borders, starting just
//    below 2^32 steps, so the 32-bit line flags wrap in the middle: every
//    call delivers exactly what was sent (a stale line accepted, or a fresh
//    one refused, shows up as wrong data or a timeout).
//  - The consumer combines with its own input (recvReduceCopy) in the same
//    run, so the reducing path and its tail packs are checked too; and with
//    an order-revealing operation, its input first or last
//    (recvReduceCopyInOrder), as a 2-rank one-shot AllReduce does.
//  - LL128 the same way across its line (120 payload bytes) and step borders,
//    with the LL region left untouched, and both protocols in turn on one
//    link (each keeps to its own region and step sequence).
//  - The region layout: LL lines sit after the Simple slots, LL128's after
//    them, and the Simple counters do not move when only lines run.
//  - The producer's write hint (device/prefetch.h) is issued exactly where
//    the kernel says the processor has PREFETCHW.
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "device/backend/host/host_coop.h"
#include "device/prefetch.h"
#include "device/primitives.h"
#include "device/reduce_ops.h"
#include "fifo_link.h"

namespace weft::device {
namespace {

template <typename T, typename P = ProtoLL>
using LinePrimsOf = Primitives<T, FuncSum<T>, Fan<1, 1>, P, HostCoop>;

template <typename P>
LineRegion& regionOf(FifoEnd& end) {
  if constexpr (std::is_same_v<P, ProtoLL>)
    return end.ll;
  else
    return end.ll128;
}

template <typename P, typename T>
int64_t sliceElemsOf(FifoEnd& end) {
  if constexpr (std::is_same_v<P, ProtoLL>)
    return end.ll.stepBytes / 2 / static_cast<int64_t>(sizeof(T));
  else
    return end.ll128.stepBytes / kLL128LineBytes * kLL128PayloadBytes / static_cast<int64_t>(sizeof(T));
}

HostWaitConfig testConfig() {
  HostWaitConfig config;
  config.spinCount = 64;
  config.timeoutNs = 10 * 1000000000ll;  // a protocol error ends as a failed wait, not a hang
  return config;
}

// Starts both ends of the protocol's region at `step` (as if that many steps had run).
template <typename P>
void startAt(Link& link, uint64_t step) {
  regionOf<P>(link.producer).step = regionOf<P>(link.producer).seen = step;
  regionOf<P>(link.consumer).step = regionOf<P>(link.consumer).seen = step;
  *regionOf<P>(link.producer).head = step;
}

int64_t sizeOfCall(int call, int64_t sliceElems) {
  const int64_t sizes[] = {1, 2, 3, sliceElems - 1, sliceElems, sliceElems + 1, 3 * sliceElems + 5, 0, 17};
  return sizes[call % 9];
}

template <typename T, typename P = ProtoLL>
void runWrapStress(int64_t stepBytes, uint64_t start, int calls) {
  Link link(stepBytes, 0, 1);
  startAt<P>(link, start);
  const int64_t sliceElems = sliceElemsOf<P, T>(link.producer);
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
      LinePrimsOf<T, P> prims(coop, FuncSum<T>(), 0, nullptr, 0, sends, 1);
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
      LinePrimsOf<T, P> prims(coop, FuncSum<T>(), 0, recvs, 1, nullptr, 0);
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
  const LineRegion& sent = regionOf<P>(link.producer);
  const LineRegion& read = regionOf<P>(link.consumer);
  EXPECT_EQ(sent.step, read.step);
  EXPECT_EQ(*read.head, read.step);
  EXPECT_GT(sent.step, start);
  if (start > (uint64_t{1} << 31)) {
    EXPECT_GT(sent.step, uint64_t{1} << 32) << "the run did not cross the 32-bit wrap";
  }
  EXPECT_EQ(link.published(), 0u);
  EXPECT_EQ(link.released(), 0u);
  // The other line region was not touched.
  const LineRegion& other = std::is_same_v<P, ProtoLL> ? link.consumer.ll128 : link.consumer.ll;
  EXPECT_EQ(other.step, 0u);
  EXPECT_EQ(*other.head, 0u);
}

TEST(LL, FlagsWrapAcross32BitsUint32) { runWrapStress<uint32_t>(1024, (uint64_t{1} << 32) - 1000, 4000); }

TEST(LL, FlagsWrapAcross32BitsInt64SpansTwoLines) { runWrapStress<int64_t>(256, (uint64_t{1} << 32) - 333, 3000); }

TEST(LL, BytesFromStepZero) { runWrapStress<uint8_t>(128, 0, 2000); }

TEST(LL128, EveryLineAndStepBorderUint8) { runWrapStress<uint8_t, ProtoLL128>(1024, 0, 2000); }

TEST(LL128, Float64AcrossTheWrapOfLLsFlags) { runWrapStress<double, ProtoLL128>(128, (uint64_t{1} << 32) - 333, 3000); }

TEST(LL128, Int32WithLargeSteps) { runWrapStress<int32_t, ProtoLL128>(1 << 20, 12345, 300); }

// A combination whose order shows: op(a, b) = 3a + b. A consumer combines
// the packs of kPeers producers with its own input placed at every position
// of the order in turn (ownAt), as one-shot AllReduce does, in calls whose
// sizes end inside a pack and on its border (whole packs and the tail take
// different code on the host, prims_ll.h).
template <typename T>
struct FuncOrdered {
  static constexpr bool kHasPre = false;
  static constexpr bool kHasPost = false;
  T operator()(T a, T b) const { return static_cast<T>(3 * a + b); }
  T pre(T x) const { return x; }
  T post(T x) const { return x; }
};

template <typename T, int kPeers>
void runOrdered(int64_t stepBytes, int calls) {
  std::vector<std::unique_ptr<Link>> links;
  for (int i = 0; i < kPeers; ++i) links.push_back(std::make_unique<Link>(stepBytes, i, kPeers));
  using Prims = Primitives<T, FuncOrdered<T>, Fan<kPeers, kPeers>, ProtoLL, HostCoop>;
  const int64_t sliceElems = sliceElemsOf<ProtoLL, T>(links[0]->producer);
  const HostWaitConfig config = testConfig();
  std::vector<WaitFailureInfo> failures(kPeers + 1);
  std::vector<int> bad;
  auto peerValue = [](int peer, int call, int64_t i) { return static_cast<T>(call + 7 * i + 13 * peer + 1); };
  auto ownValue = [](int call, int64_t i) { return static_cast<T>(2 * call + i + 5); };
  std::vector<std::thread> producers;
  for (int peer = 0; peer < kPeers; ++peer) {
    producers.emplace_back([&, peer] {
      HostCoop coop(config);
      FifoEnd* sends[1] = {&links[static_cast<size_t>(peer)]->producer};
      std::vector<T> data;
      for (int call = 0; call < calls && !coop.failed(); ++call) {
        const int64_t n = sizeOfCall(call, sliceElems);
        data.resize(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) data[static_cast<size_t>(i)] = peerValue(peer, call, i);
        Primitives<T, FuncOrdered<T>, Fan<1, 1>, ProtoLL, HostCoop> prims(coop, FuncOrdered<T>(), 0, nullptr, 0, sends,
                                                                          1);
        prims.send(data.data(), n);
      }
      failures[static_cast<size_t>(peer)] = coop.failure();
    });
  }
  std::thread consumer([&] {
    HostCoop coop(config);
    FifoEnd* recvs[kPeers];
    for (int i = 0; i < kPeers; ++i) recvs[i] = &links[static_cast<size_t>(i)]->consumer;
    std::vector<T> own, out;
    for (int call = 0; call < calls && !coop.failed(); ++call) {
      const int64_t n = sizeOfCall(call, sliceElems);
      const int ownAt = call / 9 % (kPeers + 1);  // every size (sizeOfCall: 9 in turn) at every position
      own.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) own[static_cast<size_t>(i)] = ownValue(call, i);
      out.assign(static_cast<size_t>(n), static_cast<T>(0));
      Prims prims(coop, FuncOrdered<T>(), 0, recvs, kPeers, nullptr, 0);
      prims.recvReduceCopyInOrder(own.data(), out.data(), n, ownAt, true);
      for (int64_t i = 0; i < n; ++i) {
        // Sources in order: the peers, the own input inserted at ownAt.
        std::vector<T> order;
        for (int peer = 0; peer < kPeers; ++peer) order.push_back(peerValue(peer, call, i));
        order.insert(order.begin() + ownAt, ownValue(call, i));
        T want = order[0];
        for (size_t k = 1; k < order.size(); ++k) want = static_cast<T>(3 * want + order[k]);
        if (out[static_cast<size_t>(i)] != want) {
          bad.push_back(call);
          break;
        }
      }
    }
    failures[kPeers] = coop.failure();
  });
  for (std::thread& t : producers) t.join();
  consumer.join();
  for (const WaitFailureInfo& f : failures) ASSERT_EQ(f.kind, WaitFailure::kNone);
  EXPECT_TRUE(bad.empty()) << bad.size() << " calls combined in the wrong order, first call " << bad.front();
}

TEST(LL, OwnInputKeepsItsPlaceInTheOrderUint8) { runOrdered<uint8_t, 1>(128, 600); }

TEST(LL, OwnInputKeepsItsPlaceInTheOrderUint32) { runOrdered<uint32_t, 1>(256, 600); }

TEST(LL, OwnInputKeepsItsPlaceAmongTwoPeersUint16) { runOrdered<uint16_t, 2>(128, 600); }

// Calls alternate between LL and LL128 on one link, each protocol on its own
// region: every call delivers its data, and each region counted its own steps.
TEST(LineProtocols, AlternateOnOneLink) {
  Link link(512, 0, 1);
  const HostWaitConfig config = testConfig();
  constexpr int kCalls = 400;
  std::vector<int> bad;
  WaitFailureInfo sendFailure, recvFailure;
  auto sizeOf = [](int call) { return static_cast<int64_t>(1 + (call * 97) % 700); };
  std::thread producer([&] {
    HostCoop coop(config);
    FifoEnd* sends[1] = {&link.producer};
    std::vector<int32_t> data;
    for (int call = 0; call < kCalls && !coop.failed(); ++call) {
      const int64_t n = sizeOf(call);
      data.resize(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) data[static_cast<size_t>(i)] = call * 1000 + static_cast<int32_t>(i);
      if (call % 2) {
        LinePrimsOf<int32_t, ProtoLL128> prims(coop, FuncSum<int32_t>(), 0, nullptr, 0, sends, 1);
        prims.send(data.data(), n);
      } else {
        LinePrimsOf<int32_t, ProtoLL> prims(coop, FuncSum<int32_t>(), 0, nullptr, 0, sends, 1);
        prims.send(data.data(), n);
      }
    }
    sendFailure = coop.failure();
  });
  std::thread consumer([&] {
    HostCoop coop(config);
    FifoEnd* recvs[1] = {&link.consumer};
    std::vector<int32_t> out;
    for (int call = 0; call < kCalls && !coop.failed(); ++call) {
      const int64_t n = sizeOf(call);
      out.assign(static_cast<size_t>(n), -1);
      if (call % 2) {
        LinePrimsOf<int32_t, ProtoLL128> prims(coop, FuncSum<int32_t>(), 0, recvs, 1, nullptr, 0);
        prims.recv(out.data(), n);
      } else {
        LinePrimsOf<int32_t, ProtoLL> prims(coop, FuncSum<int32_t>(), 0, recvs, 1, nullptr, 0);
        prims.recv(out.data(), n);
      }
      for (int64_t i = 0; i < n; ++i)
        if (out[static_cast<size_t>(i)] != call * 1000 + static_cast<int32_t>(i)) {
          bad.push_back(call);
          break;
        }
    }
    recvFailure = coop.failure();
  });
  producer.join();
  consumer.join();
  ASSERT_EQ(sendFailure.kind, WaitFailure::kNone);
  ASSERT_EQ(recvFailure.kind, WaitFailure::kNone);
  EXPECT_TRUE(bad.empty()) << bad.size() << " calls delivered wrong data, first call " << bad.front();
  EXPECT_GT(link.consumer.ll.step, uint64_t{kCalls / 2});
  EXPECT_GT(link.consumer.ll128.step, uint64_t{kCalls / 4});
  EXPECT_EQ(*link.consumer.ll.head, link.consumer.ll.step);
  EXPECT_EQ(*link.consumer.ll128.head, link.consumer.ll128.step);
}

// The payload word each (line, lane, word) holds, for the GPU's eight lanes
// of two words as for the host's one lane of sixteen: every payload word of
// a line once, in order, and the flag at the line's last word.
TEST(LL128, UnitWordsTileTheLine) {
  static_assert(kLL128Lanes * kLL128UnitWords == kLL128LineWords, "lanes tile the line");
  for (int64_t line = 0; line < 3; ++line) {
    int64_t expect = line * kLL128PayloadWords;
    int flags = 0;
    for (int lane = 0; lane < kLL128Lanes; ++lane)
      for (int j = 0; j < kLL128UnitWords; ++j) {
        if (ll128IsFlag(lane, j)) {
          ++flags;
          continue;
        }
        EXPECT_EQ(ll128PayloadWord(line, lane, j), expect++);
      }
    EXPECT_EQ(flags, 1);
    EXPECT_EQ(expect, (line + 1) * kLL128PayloadWords);
  }
  EXPECT_EQ(ll128Flag(0), 1u);
  EXPECT_EQ(ll128Flag(uint64_t{1} << 32), (uint64_t{1} << 32) + 1) << "64-bit flags do not wrap at 2^32";
}

TEST(LL, RegionLayout) {
  Link link(4096, 0, 1);
  EXPECT_EQ(link.producer.ll.lines, link.producer.slots + 4096 * kFifoSteps);
  EXPECT_EQ(link.producer.ll.lines, link.consumer.ll.lines);
  // A line step is the slot's share (kLineSteps / kFifoSteps line steps per
  // slot), so the region takes no more memory than the slots.
  static_assert(kLineSteps == 4 * kFifoSteps, "the expectations below count 4 line steps a slot");
  EXPECT_EQ(link.producer.ll.stepBytes, 1024);
  EXPECT_EQ(llStepBytesFor(64), 128);
  EXPECT_EQ(llStepBytesFor(200), 128);
  EXPECT_EQ(llStepBytesFor(1000), 128) << "250 bytes a line step, rounded down to whole 128-byte lines";
  EXPECT_EQ(llStepBytesFor(1 << 20), kLLMaxStepBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(link.producer.ll.lines) % 16, 0u);
  EXPECT_EQ(link.producer.ll128.lines, link.producer.ll.lines + 1024 * kLineSteps);
  EXPECT_EQ(link.producer.ll128.lines - link.producer.ll.lines, 4096 * kFifoSteps) << "as much as the slots";
  EXPECT_EQ(link.producer.ll128.stepBytes, 1024);
  EXPECT_EQ(ll128StepBytesFor(1 << 20), kLL128MaxStepBytes);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(link.producer.ll128.lines) % 128, 0u);
  EXPECT_NE(link.producer.ll128.head, link.producer.ll.head);
  EXPECT_NE(link.producer.ll128.sigPacks, link.producer.ll.sigPacks);
  // An odd step size still puts LL128's lines on a 128-byte boundary.
  Link odd(1000, 0, 1);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(odd.producer.ll128.lines) % 128, 0u);
  EXPECT_LE(static_cast<size_t>(odd.producer.ll128.lines + odd.producer.ll128.stepBytes * kLineSteps -
                                static_cast<char*>(odd.memory.get())),
            transport::FifoLayout::totalBytes(1000));
}

#if defined(__x86_64__)
// Linux names CPUID 0x80000001 ECX bit 8 "3dnowprefetch" in /proc/cpuinfo:
// the hint must be on exactly when that flag is listed (a processor without
// it would at best ignore the opcode, so Weft does not rely on that).
TEST(Prefetch, WriteHintFollowsTheProcessorsFlag) {
  std::ifstream cpuinfo("/proc/cpuinfo");
  if (!cpuinfo) GTEST_SKIP() << "no /proc/cpuinfo";
  std::string line;
  bool listed = false;
  bool sawFlags = false;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    sawFlags = true;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string word;
    while (words >> word) listed = listed || word == "3dnowprefetch";
    break;
  }
  ASSERT_TRUE(sawFlags) << "/proc/cpuinfo has no flags line";
  EXPECT_EQ(kHostPrefetchW, listed);
  EXPECT_EQ(cpuHasPrefetchW(), listed);
}
#endif

}  // namespace
}  // namespace weft::device
