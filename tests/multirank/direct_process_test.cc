// Direct mode between processes (docs/fifo-protocol.md, "Direct mode between
// processes"): ranks as forked processes whose output buffers come from
// ncclMemAlloc (shared segments the writer maps), from ncclCommRegister'd
// private memory (cross-memory attach or the FIFO), with cross-memory attach
// refused; in and out of place, with aliasing buffers, repeated calls on one
// plan and sizes across slot and chunk borders, checked against a scalar
// reference; weftCommDescribe's counters show which path ran. A receiver
// that arrives late finds its buffer untouched until it posted it.
// AllReduce's first steps are read in place from the sender's ncclMemAlloc
// input by the next rank (direct reads), and from nothing else.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "multirank/coll_check.h"
#include "multirank/harness.h"
#include "nccl.h"
#include "weft.h"

namespace weft::test {
namespace {

enum class Source { kMemAlloc, kRegisteredPrivate, kPrivate };

// Where a call's buffers come from, freed (and deregistered) on scope exit.
class Buffer {
 public:
  Buffer(ncclComm_t comm, Source source, size_t bytes) : comm_(comm), source_(source), bytes_(bytes) {
    if (source == Source::kMemAlloc) {
      EXPECT_EQ(ncclMemAlloc(&data_, bytes), ncclSuccess) << ncclGetLastError(nullptr);
    } else {
      data_ = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
      if (source == Source::kRegisteredPrivate) {
        EXPECT_EQ(ncclCommRegister(comm, data_, bytes, &handle_), ncclSuccess);
      }
    }
  }
  ~Buffer() {
    if (source_ == Source::kMemAlloc) {
      EXPECT_EQ(ncclMemFree(data_), ncclSuccess);
      return;
    }
    if (handle_ != nullptr) {
      EXPECT_EQ(ncclCommDeregister(comm_, handle_), ncclSuccess);
    }
    std::free(data_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  float* floats() const { return static_cast<float*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  ncclComm_t comm_;
  Source source_;
  size_t bytes_;
  void* data_ = nullptr;
  void* handle_ = nullptr;
};

// Small integers: every sum is exact in float, in any order.
float inputOf(int rank, size_t i) { return static_cast<float>((static_cast<size_t>(rank) * 7 + i) % 13); }

enum class Coll { kAllReduce, kAllGather, kBroadcast, kReduceScatter };

struct Case {
  Coll coll;
  size_t count;
  bool inPlace;
};

// Runs one case on buffers from `source` and checks every output element.
void runCase(const RankContext& ctx, Source source, const Case& c) {
  const int n = ctx.nranks, rank = ctx.rank;
  const bool gathers = c.coll == Coll::kAllGather, scatters = c.coll == Coll::kReduceScatter;
  const size_t recvCount = gathers ? c.count * n : c.count;
  const size_t sendCount = scatters ? c.count * n : c.count;
  // In place: one buffer, the larger; AllGather's input and ReduceScatter's
  // output are this rank's segment of it (aliasing at the rank's offset).
  Buffer recv(ctx.comm, source, (c.inPlace ? std::max(recvCount, sendCount) : recvCount) * sizeof(float));
  Buffer sendOwn(ctx.comm, source, c.inPlace ? sizeof(float) : sendCount * sizeof(float));
  float* send = c.inPlace ? recv.floats() + (gathers ? c.count * rank : 0) : sendOwn.floats();
  float* out = c.inPlace && scatters ? recv.floats() + c.count * rank : recv.floats();
  if (!c.inPlace) std::fill(recv.floats(), recv.floats() + recvCount, -1.0f);
  for (size_t i = 0; i < sendCount; ++i) send[i] = inputOf(rank, i);
  ncclResult_t rc = ncclSuccess;
  switch (c.coll) {
    case Coll::kAllReduce: rc = ncclAllReduce(send, out, c.count, ncclFloat32, ncclSum, ctx.comm, nullptr); break;
    case Coll::kAllGather: rc = ncclAllGather(send, out, c.count, ncclFloat32, ctx.comm, nullptr); break;
    case Coll::kBroadcast: rc = ncclBroadcast(send, out, c.count, ncclFloat32, n - 1, ctx.comm, nullptr); break;
    case Coll::kReduceScatter:
      rc = ncclReduceScatter(send, out, c.count, ncclFloat32, ncclSum, ctx.comm, nullptr);
      break;
  }
  ASSERT_EQ(rc, ncclSuccess) << ncclGetLastError(ctx.comm);
  int bad = 0;
  for (size_t i = 0; i < recvCount && bad < 5; ++i) {
    float want = 0;
    if (c.coll == Coll::kAllGather) want = inputOf(static_cast<int>(i / c.count), i % c.count);
    if (c.coll == Coll::kBroadcast) want = inputOf(n - 1, i);
    if (c.coll == Coll::kAllReduce || c.coll == Coll::kReduceScatter)
      for (int r = 0; r < n; ++r) want += inputOf(r, c.coll == Coll::kReduceScatter ? c.count * rank + i : i);
    if (out[i] != want) {
      ADD_FAILURE() << "rank " << rank << " coll " << static_cast<int>(c.coll) << " count " << c.count << " inPlace "
                    << c.inPlace << ": element " << i << " is " << out[i] << ", expected " << want;
      ++bad;
    }
  }
}

std::vector<Case> allCases() {
  std::vector<Case> cases;
  // 300007 floats: not a multiple of any slot or chunk; 65536 + 3 (256 KiB
  // and a bit) crosses the direct threshold and slot borders by 3 elements.
  for (size_t count : {size_t{65539}, size_t{300007}})
    for (bool inPlace : {false, true})
      for (Coll coll : {Coll::kAllReduce, Coll::kAllGather, Coll::kBroadcast, Coll::kReduceScatter})
        cases.push_back({coll, coll == Coll::kReduceScatter ? count / 2 : count, inPlace});
  return cases;
}

struct Counts {
  unsigned long long mapped = 0, crossMemory = 0, slots = 0, refused = 0;
  // Direct reads: steps of this rank's input its consumers read in place;
  // link-calls in which this rank read a producer's input through its
  // mapping, or found the posted input out of reach.
  unsigned long long readSteps = 0, readsMapped = 0, readsOutOfReach = 0;
};

Counts directCounts(ncclComm_t comm) {
  char text[8192];
  EXPECT_EQ(weftCommDescribe(comm, text, sizeof(text)), ncclSuccess);
  const char* at = std::strstr(text, "direct between processes: ");
  Counts c;
  EXPECT_NE(at, nullptr) << text;
  if (at == nullptr) return c;
  EXPECT_EQ(std::sscanf(at,
                        "direct between processes: %llu link-calls mapped, %llu by cross-memory attach, %llu through "
                        "the FIFO, %llu refused steps",
                        &c.mapped, &c.crossMemory, &c.slots, &c.refused),
            4)
      << at;
  const char* reads = std::strstr(text, "direct reads: ");
  EXPECT_NE(reads, nullptr) << text;
  if (reads != nullptr) EXPECT_EQ(std::sscanf(reads, "direct reads: %llu steps", &c.readSteps), 1) << reads;
  const char* byMap = std::strstr(text, "reads between processes: ");
  EXPECT_NE(byMap, nullptr) << text;
  if (byMap != nullptr)
    EXPECT_EQ(std::sscanf(byMap, "reads between processes: %llu link-calls through a mapped segment, %llu out of reach",
                          &c.readsMapped, &c.readsOutOfReach),
              2)
        << byMap;
  // The FIFO ends' own count (FifoEnd::directMapped, what the cuda backend
  // reports) must agree with the host's count of mapped link-calls.
  const char* ends = std::strstr(at, "segments mapped, ");
  unsigned long long byPointer = 0;
  EXPECT_NE(ends, nullptr) << at;
  if (ends != nullptr) {
    EXPECT_EQ(std::sscanf(ends, "segments mapped, %llu link-calls by pointer", &byPointer), 1) << ends;
    EXPECT_EQ(byPointer, c.mapped) << at;
  }
  return c;
}

// Every case twice in a row (the second reuses the plan, on new buffers).
void runAll(const RankContext& ctx, Source source) {
  for (const Case& c : allCases())
    for (int repeat = 0; repeat < 2; ++repeat) runCase(ctx, source, c);
}

class DirectProcesses : public ::testing::TestWithParam<int> {};

TEST_P(DirectProcesses, MemAllocBuffersAreWrittenThroughTheWritersMapping) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv proto("NCCL_PROTO", "Simple");
  runRanks(RankMode::kProcesses, GetParam(), [](RankContext& ctx) {
    runAll(ctx, Source::kMemAlloc);
    const Counts c = directCounts(ctx.comm);
    EXPECT_GT(c.mapped, 0u);
    EXPECT_EQ(c.slots, 0u) << "a direct call to a peer's ncclMemAlloc buffer went through the FIFO";
    EXPECT_EQ(c.crossMemory, 0u);
    // AllReduce's inputs are ncclMemAlloc segments too: read in place.
    EXPECT_GT(c.readSteps, 0u) << "no step of this rank's input was read in place";
    EXPECT_GT(c.readsMapped, 0u);
    EXPECT_EQ(c.readsOutOfReach, 0u);
  });
}

// WEFT_DIRECT_READ=0 on the senders: the same calls, every step through the
// slots, nothing posted as readable.
TEST_P(DirectProcesses, MemAllocInputsAreNotReadWhenReadsAreOff) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv proto("NCCL_PROTO", "Simple");
  ScopedEnv reads("WEFT_DIRECT_READ", "0");
  runRanks(RankMode::kProcesses, GetParam(), [](RankContext& ctx) {
    for (const Case& c : allCases())
      if (c.coll == Coll::kAllReduce) runCase(ctx, Source::kMemAlloc, c);
    const Counts c = directCounts(ctx.comm);
    EXPECT_GT(c.mapped, 0u);
    EXPECT_EQ(c.readSteps, 0u);
    EXPECT_EQ(c.readsMapped + c.readsOutOfReach, 0u);
  });
}

TEST_P(DirectProcesses, RegisteredPrivateBuffersGoThroughTheFifoWithoutCrossMemoryAttach) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv cma("WEFT_CMA", "0");
  runRanks(RankMode::kProcesses, GetParam(), [](RankContext& ctx) {
    runAll(ctx, Source::kRegisteredPrivate);
    const Counts c = directCounts(ctx.comm);
    EXPECT_EQ(c.mapped, 0u);
    EXPECT_EQ(c.crossMemory, 0u);
    EXPECT_GT(c.slots, 0u);
    // Private inputs are posted but out of the next rank's reach.
    EXPECT_EQ(c.readSteps, 0u);
    EXPECT_EQ(c.readsMapped, 0u);
    EXPECT_GT(c.readsOutOfReach, 0u);
  });
}

// A sender that rewrites its input as soon as a call returns: the next rank
// must have read the steps it reads in place by then (ring AllReduce cannot
// return before; ReduceScatter waits for it: docs/fifo-protocol.md). Out of
// place and in place, on the same buffers call after call, each call's
// inputs different.
TEST_P(DirectProcesses, InputsReadInPlaceMayBeRewrittenOnReturn) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv proto("NCCL_PROTO", "Simple");
  runRanks(RankMode::kProcesses, GetParam(), [](RankContext& ctx) {
    const int n = ctx.nranks;
    const size_t count = 300007;  // AllReduce's; ReduceScatter's per rank
    Buffer send(ctx.comm, Source::kMemAlloc, count * n * sizeof(float));
    Buffer recv(ctx.comm, Source::kMemAlloc, count * n * sizeof(float));
    auto value = [](int rank, int call, size_t i) { return inputOf(rank + call, i * 3 + static_cast<size_t>(call)); };
    for (int call = 0; call < 16; ++call) {
      const bool inPlace = call % 2 == 1, scatters = call % 4 >= 2;
      const size_t inCount = scatters ? count * n : count;
      float* in = inPlace ? recv.floats() : send.floats();
      // ReduceScatter in place: the output is this rank's segment of the input.
      float* out = inPlace && scatters ? recv.floats() + count * ctx.rank : recv.floats();
      for (size_t i = 0; i < inCount; ++i) in[i] = value(ctx.rank, call, i);
      const ncclResult_t rc = scatters ? ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, ctx.comm, nullptr)
                                       : ncclAllReduce(in, out, count, ncclFloat32, ncclSum, ctx.comm, nullptr);
      ASSERT_EQ(rc, ncclSuccess) << ncclGetLastError(ctx.comm);
      if (!inPlace) std::fill(in, in + inCount, -3.0f);  // at once, before the peers return
      for (size_t i = 0; i < count; ++i) {
        const size_t at = scatters ? count * ctx.rank + i : i;
        float want = 0;
        for (int r = 0; r < n; ++r) want += value(r, call, at);
        if (out[i] != want) {
          ADD_FAILURE() << "rank " << ctx.rank << " call " << call << (scatters ? " (ReduceScatter)" : " (AllReduce)")
                        << " element " << i << " is " << out[i] << ", expected " << want;
          break;
        }
      }
      if (inPlace) std::fill(in, in + inCount, -5.0f);  // the output read, the buffer rewritten at once too
    }
    EXPECT_GT(directCounts(ctx.comm).readSteps, 0u);
  });
}

INSTANTIATE_TEST_SUITE_P(Ranks, DirectProcesses, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& p) { return std::to_string(p.param) + "ranks"; });

// Cross-memory attach where the kernel allows it: correct either way, and
// every direct link-call went one of the two ways.
TEST(DirectCrossMemory, PrivateBuffersAreCorrectByEitherWay) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv cma("WEFT_CMA", "1");
  runRanks(RankMode::kProcesses, 3, [](RankContext& ctx) {
    runAll(ctx, Source::kPrivate);
    const Counts c = directCounts(ctx.comm);
    EXPECT_EQ(c.mapped, 0u);
    EXPECT_GT(c.crossMemory + c.slots, 0u);
  });
}

// The kernel refusing (forced by the test hook): the probe turns it off, the
// FIFO carries the data, results stay correct.
TEST(DirectCrossMemory, RefusedFallsBackToTheFifo) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv cma("WEFT_CMA", "1");
  ScopedEnv refuse("WEFT_CMA_TEST_REFUSE", "1");
  runRanks(RankMode::kProcesses, 2, [](RankContext& ctx) {
    runAll(ctx, Source::kPrivate);
    const Counts c = directCounts(ctx.comm);
    EXPECT_EQ(c.crossMemory, 0u);
    EXPECT_GT(c.slots, 0u);
  });
}

// Mixed: one rank's buffers shared, the other's private: each link chooses
// by its consumer's post, and the results agree.
TEST(DirectProcessesMixed, SharedAndPrivateBuffersInOneCall) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  ScopedEnv cma("WEFT_CMA", "0");
  runRanks(RankMode::kProcesses, 3, [](RankContext& ctx) {
    for (const Case& c : allCases()) runCase(ctx, ctx.rank == 1 ? Source::kPrivate : Source::kMemAlloc, c);
    const Counts c = directCounts(ctx.comm);
    EXPECT_GT(c.mapped + c.slots, 0u);  // which rank writes to rank 1 depends on the ring
    // Rank 1's input is out of its consumer's reach, the others' are read.
    if (ctx.rank == 1) {
      EXPECT_EQ(c.readSteps, 0u);
    } else {
      EXPECT_GT(c.readSteps, 0u);
    }
  });
}

// The ready signal: after a first call has mapped rank 1's buffer in rank
// 0, rank 1 fills it with a pattern and arrives late to the second call;
// the pattern must be intact until rank 1 entered the call (rank 0, writing
// through its mapping, must wait for rank 1's post of this call).
TEST(DirectReadySignal, LateReceiversBufferIsUntouchedUntilItPosts) {
  ScopedEnv algo("NCCL_ALGO", "Ring");
  runRanks(RankMode::kProcesses, 2, [](RankContext& ctx) {
    const size_t count = 1 << 18;
    Buffer send(ctx.comm, Source::kMemAlloc, count * sizeof(float));
    Buffer recv(ctx.comm, Source::kMemAlloc, count * sizeof(float));
    for (size_t i = 0; i < count; ++i) send.floats()[i] = inputOf(ctx.rank, i);
    for (int call = 0; call < 3; ++call) {
      if (ctx.rank == 1) {
        std::fill(recv.floats(), recv.floats() + count, -7.0f);
        usleep(200 * 1000);  // rank 0 is long inside the call by now
        size_t touched = 0;
        for (size_t i = 0; i < count; ++i) touched += recv.floats()[i] != -7.0f;
        EXPECT_EQ(touched, 0u) << "call " << call << ": rank 0 wrote before rank 1 posted its buffer";
      }
      ASSERT_EQ(ncclAllReduce(send.floats(), recv.floats(), count, ncclFloat32, ncclSum, ctx.comm, nullptr),
                ncclSuccess);
      for (size_t i = 0; i < count; ++i)
        if (recv.floats()[i] != inputOf(0, i) + inputOf(1, i)) {
          ADD_FAILURE() << "call " << call << " element " << i << " is " << recv.floats()[i];
          break;
        }
    }
    EXPECT_GT(directCounts(ctx.comm).mapped, 0u);
  });
}

}  // namespace
}  // namespace weft::test
