// The planner's protocol and direct-mode choices on narrow inputs: LL for
// small calls and with it LL-sized chunks; Simple beyond the threshold and
// wherever LL is impossible; direct mode only for ring AllReduce, AllGather
// and Broadcast (and ReduceScatter where the backend reads in place) under
// Simple, from each collective's threshold, where the backend has it.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "core/planner.h"
#include "plan_one.h"

namespace weft::core {
namespace {

PlanInputs inputs(const tuning::ProtoFilter* filter) {
  PlanInputs in{0, 2, 1, 1, 8192, 4};
  in.shape = tuning::Shape{2, 1, 2, 0};
  in.protoFilter = filter;
  in.llPossible = true;
  in.llByDefault = true;
  in.directPossible = true;
  return in;
}

device::CollWork planOne(const PlanInputs& in, device::Func func, size_t count) {
  const Plan plan = planOneTask(in, func, ncclFloat32, device::RedOpKind::kSum, count);
  if (plan.channels.empty() || plan.channels[0].empty()) return device::CollWork{};
  return plan.channels[0][0].coll;
}

TEST(PlanProto, SmallCallsRunLLWithChunksOfLLSteps) {
  const tuning::ProtoFilter any;
  const device::CollWork w = planOne(inputs(&any), device::Func::kAllReduce, 2);
  EXPECT_EQ(w.proto, device::Proto::kLL);
  EXPECT_EQ(w.direct, 0);
  // 8 KiB slots -> 2 KiB LL steps (a quarter of a slot: kLineSteps line
  // steps for kFifoSteps slots) carrying 1 KiB; 4 steps a chunk.
  static_assert(device::kLineSteps == 4 * device::kFifoSteps, "a quarter of a slot per line step");
  EXPECT_EQ(w.chunkElems, 4u * 1024 / sizeof(float));
}

TEST(PlanProto, LargeCallsRunSimpleAndDirect) {
  const tuning::ProtoFilter any;
  for (device::Func func : {device::Func::kAllReduce, device::Func::kAllGather, device::Func::kBroadcast}) {
    const device::CollWork w = planOne(inputs(&any), func, 1 << 20);
    EXPECT_EQ(w.proto, device::Proto::kSimple);
    EXPECT_EQ(w.direct, 1) << static_cast<int>(func);
    EXPECT_EQ(w.chunkElems, 4u * 8192 / (func == device::Func::kAllReduce ? sizeof(float) : 1));
  }
  EXPECT_EQ(planOne(inputs(&any), device::Func::kReduceScatter, 1 << 20).direct, 0);
  EXPECT_EQ(planOne(inputs(&any), device::Func::kReduce, 1 << 20).direct, 0);
}

// Each collective's threshold (the built-in figures' directMinBytes, all
// ranks' bytes): direct from it, not from half of it; AllReduce and
// ReduceScatter lower between threads, whose inputs are always readable.
TEST(PlanProto, DirectFromEachCollectivesThreshold) {
  const tuning::ProtoFilter any;
  struct Case {
    device::Func func;
    tuning::CollKind coll;
    size_t elemBytes;  // of the count the call takes
    int64_t threads, processes;
  };
  const Case cases[] = {
      {device::Func::kAllReduce, tuning::CollKind::kAllReduce, sizeof(float), 16 << 10, 32 << 10},
      {device::Func::kReduceScatter, tuning::CollKind::kReduceScatter, sizeof(float), 16 << 10, 64 << 10},
      {device::Func::kAllGather, tuning::CollKind::kAllGather, sizeof(float), 64 << 10, 64 << 10},
      {device::Func::kBroadcast, tuning::CollKind::kBroadcast, sizeof(float), 256 << 10, 256 << 10},
  };
  for (const Case& c : cases) {
    for (bool threads : {true, false}) {
      const int64_t min = threads ? c.threads : c.processes;
      PlanInputs in = inputs(&any);
      in.readsInPlace = true;
      in.intraLink = threads ? tuning::LinkType::kThreads : tuning::LinkType::kShm;
      EXPECT_EQ(tuning::defaultFigures(true).directMinBytes(in.intraLink, c.coll), min) << tuning::collKindName(c.coll);
      // AllGather and ReduceScatter count one rank's part of the 2 ranks' bytes.
      const bool perRank = c.func == device::Func::kAllGather || c.func == device::Func::kReduceScatter;
      const size_t count = static_cast<size_t>(min) / c.elemBytes / (perRank ? 2 : 1);
      EXPECT_EQ(planOne(in, c.func, count).direct, 1) << tuning::collKindName(c.coll) << " threads " << threads;
      EXPECT_EQ(planOne(in, c.func, count / 2).direct, 0) << tuning::collKindName(c.coll) << " threads " << threads;
    }
  }
}

// A tuning file's thresholds (weft-tune measures them) move the choice,
// per collective and link, and 1e15 bytes means never.
TEST(PlanProto, DirectThresholdsFollowTheFigures) {
  const tuning::ProtoFilter any;
  auto parsed = tuning::parseTuningFile(
      "version 1\n"
      "threads.direct.allreduce_min_bytes 4096\n"
      "shm.direct.allreduce_min_bytes 1e15\n"
      "threads.direct.broadcast_min_bytes 8192\n",
      "test", tuning::defaultFigures(true));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const tuning::TuningFigures figures = parsed.value();
  PlanInputs in = inputs(&any);
  in.figures = &figures;
  in.intraLink = tuning::LinkType::kThreads;
  // Below the LL bound the protocol decides first: sizes from 4 KiB on are Simple.
  EXPECT_EQ(planOne(in, device::Func::kAllReduce, 4096 / sizeof(float)).direct, 1);
  EXPECT_EQ(planOne(in, device::Func::kAllReduce, 2048 / sizeof(float)).direct, 0);
  EXPECT_EQ(planOne(in, device::Func::kBroadcast, 8192 / sizeof(float)).direct, 1);
  EXPECT_EQ(planOne(in, device::Func::kBroadcast, 4096 / sizeof(float)).direct, 0);
  // AllGather keeps its built-in threshold (the file does not name it).
  EXPECT_EQ(planOne(in, device::Func::kAllGather, (64 << 10) / sizeof(float) / 2).direct, 1);
  EXPECT_EQ(planOne(in, device::Func::kAllGather, (32 << 10) / sizeof(float) / 2).direct, 0);
  in.intraLink = tuning::LinkType::kShm;
  EXPECT_EQ(planOne(in, device::Func::kAllReduce, 64 << 20).direct, 0);
  EXPECT_EQ(figures.directMinBytes(tuning::LinkType::kShm, tuning::CollKind::kAllReduce),
            std::numeric_limits<int64_t>::max());
  EXPECT_EQ(figures.directMinBytes(tuning::LinkType::kThreads, tuning::CollKind::kReduce),
            std::numeric_limits<int64_t>::max());
}

TEST(PlanProto, NoDirectAcrossProcessesOrUnderLL) {
  const tuning::ProtoFilter any;
  PlanInputs in = inputs(&any);
  in.directPossible = false;
  EXPECT_EQ(planOne(in, device::Func::kAllReduce, 1 << 20).direct, 0);
  auto ll = tuning::ProtoFilter::parse("LL");
  ASSERT_TRUE(ll.ok());
  const tuning::ProtoFilter onlyLL = ll.value();
  const device::CollWork w = planOne(inputs(&onlyLL), device::Func::kAllReduce, 1 << 20);
  EXPECT_EQ(w.proto, device::Proto::kLL);
  EXPECT_EQ(w.direct, 0);
}

TEST(PlanProto, NoLLThroughTheNetwork) {
  const tuning::ProtoFilter any;
  PlanInputs in = inputs(&any);
  in.llPossible = false;
  EXPECT_EQ(planOne(in, device::Func::kAllReduce, 2).proto, device::Proto::kSimple);
}

// A backend with LL kernels for the sum and data-only calls alone (cuda)
// keeps every other op on Simple, even when NCCL_PROTO asks for LL only.
TEST(PlanProto, LLSumOnlyBackendKeepsOtherOpsOnSimple) {
  auto llOnly = tuning::ProtoFilter::parse("LL");
  ASSERT_TRUE(llOnly.ok());
  PlanInputs in = inputs(&llOnly.value());
  in.llSumOnly = true;
  EXPECT_EQ(planOne(in, device::Func::kAllReduce, 2).proto, device::Proto::kLL);
  EXPECT_EQ(planOne(in, device::Func::kAllGather, 2).proto, device::Proto::kLL);
  const Plan plan = planOneTask(in, device::Func::kAllReduce, ncclFloat32, device::RedOpKind::kMax, 2);
  ASSERT_FALSE(plan.channels.empty() || plan.channels[0].empty());
  EXPECT_EQ(plan.channels[0][0].coll.proto, device::Proto::kSimple);
}

// LL128 in the cost model: with the built-in figures (measured on the
// host, tuning/figures.cc) it never wins, so no size runs it unless
// NCCL_PROTO leaves it alone; figures that make it the cheapest (a tuning
// file measured where LL128 is fast) make the planner pick it by itself,
// for the sum and the data-only calls, never for an op without its kernel,
// and never on a backend that picks line protocols only on request.
TEST(PlanProto, LL128ChosenByTheModelOnlyWhereItsFiguresWin) {
  PlanInputs in = inputs(nullptr);
  in.ll128Possible = true;
  in.llSumOnly = true;
  tuning::TuningFigures figures = tuning::defaultFigures(true);
  in.figures = &figures;
  for (size_t count = 2; count <= (size_t{16} << 20); count *= 8)
    for (device::Func func : {device::Func::kAllReduce, device::Func::kAllGather, device::Func::kBroadcast})
      EXPECT_NE(planOne(in, func, count).proto, device::Proto::kLL128)
          << "built-in figures, func " << static_cast<int>(func) << ", " << count << " elements";
  // LL128 as fast per hand-off as LL and as Simple per byte: it wins from
  // where LL's bandwidth stops paying.
  figures.value[static_cast<int>(tuning::Figure::kShmLL128LatUs)] = 0.3;
  figures.value[static_cast<int>(tuning::Figure::kShmLL128GBs)] = 16.0;
  figures.value[static_cast<int>(tuning::Figure::kThreadsLL128LatUs)] = 0.3;
  figures.value[static_cast<int>(tuning::Figure::kThreadsLL128GBs)] = 16.0;
  const device::CollWork sum = planOne(in, device::Func::kAllReduce, 1 << 16);
  EXPECT_EQ(sum.algo, device::Algo::kRing);
  EXPECT_EQ(sum.proto, device::Proto::kLL128);
  EXPECT_EQ(planOne(in, device::Func::kAllGather, 1 << 16).proto, device::Proto::kLL128);
  const Plan max = planOneTask(in, device::Func::kAllReduce, ncclFloat32, device::RedOpKind::kMax, 1 << 16);
  EXPECT_NE(max.channels[0][0].coll.proto, device::Proto::kLL128) << "no LL128 kernel for max";
  auto noLL128 = tuning::ProtoFilter::parse("^LL128");
  ASSERT_TRUE(noLL128.ok());
  PlanInputs excluded = in;
  excluded.protoFilter = &noLL128.value();
  EXPECT_NE(planOne(excluded, device::Func::kAllReduce, 1 << 16).proto, device::Proto::kLL128);
  PlanInputs onRequest = in;
  onRequest.llByDefault = false;  // the cuda backend
  EXPECT_EQ(planOne(onRequest, device::Func::kAllReduce, 1 << 16).proto, device::Proto::kSimple);
}

// NCCL_PROTO=LL128 where it can run: rings and trees under LL128 with
// chunks of LL128 steps (15/16 of their line bytes); one-shot, which has
// no LL128 form, and links that may split a line keep Simple.
TEST(PlanProto, LL128WhenNamedWithChunksOfLL128Steps) {
  auto parsed = tuning::ProtoFilter::parse("LL128");
  ASSERT_TRUE(parsed.ok());
  const tuning::ProtoFilter onlyLL128 = parsed.value();
  PlanInputs in = inputs(&onlyLL128);
  in.ll128Possible = true;
  for (device::Func func : {device::Func::kAllReduce, device::Func::kAllGather, device::Func::kBroadcast,
                            device::Func::kReduceScatter, device::Func::kReduce}) {
    const device::CollWork w = planOne(in, func, 1 << 20);
    EXPECT_EQ(w.proto, device::Proto::kLL128) << static_cast<int>(func);
    EXPECT_EQ(w.direct, 0);
    // 8 KiB slots -> 2 KiB LL128 steps (a quarter of a slot) carrying 16
    // lines x 120 bytes; 4 steps a chunk.
    const uint64_t elem = func == device::Func::kAllGather || func == device::Func::kBroadcast ? 1 : sizeof(float);
    const uint64_t align = 64 / elem;
    EXPECT_EQ(w.chunkElems, 4u * 16 * 120 / elem / align * align) << static_cast<int>(func);
  }
  auto tree = tuning::AlgoFilter::parse("Tree");
  ASSERT_TRUE(tree.ok());
  PlanInputs treeIn = in;
  treeIn.treesAvailable = true;
  treeIn.ll128Trees = true;
  treeIn.shape = tuning::Shape{2, 1, 2, 1};
  treeIn.algoFilter = &tree.value();
  const device::CollWork t = planOne(treeIn, device::Func::kAllReduce, 4096);
  EXPECT_EQ(t.algo, device::Algo::kTree);
  EXPECT_EQ(t.proto, device::Proto::kLL128);
  // A backend without LL128 trees (cuda): a named tree keeps Simple.
  treeIn.ll128Trees = false;
  const device::CollWork cudaTree = planOne(treeIn, device::Func::kAllReduce, 4096);
  EXPECT_EQ(cudaTree.algo, device::Algo::kTree);
  EXPECT_EQ(cudaTree.proto, device::Proto::kSimple);
  auto oneShot = tuning::AlgoFilter::parse("OneShot");
  ASSERT_TRUE(oneShot.ok());
  PlanInputs flat = in;
  flat.oneShotAvailable = true;
  flat.algoFilter = &oneShot.value();
  const device::CollWork f = planOne(flat, device::Func::kAllReduce, 64);
  EXPECT_EQ(f.algo, device::Algo::kOneShot);
  EXPECT_EQ(f.proto, device::Proto::kSimple);
  // Unnamed, one-shot (no LL128 form) is not offered under NCCL_PROTO=LL128:
  // the small call runs a ring under LL128 instead of Simple.
  flat.algoFilter = nullptr;
  for (size_t count : {size_t{2}, size_t{1024}}) {
    const device::CollWork r = planOne(flat, device::Func::kAllReduce, count);
    EXPECT_EQ(r.algo, device::Algo::kRing) << count;
    EXPECT_EQ(r.proto, device::Proto::kLL128) << count;
  }
  // Only sums and data-only calls have LL128 kernels: a max keeps Simple.
  const Plan maxPlan = planOneTask(in, device::Func::kAllReduce, ncclFloat32, device::RedOpKind::kMax, 1024);
  ASSERT_FALSE(maxPlan.channels.empty() || maxPlan.channels[0].empty());
  EXPECT_EQ(maxPlan.channels[0][0].coll.proto, device::Proto::kSimple);
  in.ll128Possible = false;
  EXPECT_EQ(planOne(in, device::Func::kAllReduce, 1 << 20).proto, device::Proto::kSimple);
  // Unnamed, LL128 is never picked.
  const tuning::ProtoFilter any;
  PlanInputs byDefault = inputs(&any);
  byDefault.ll128Possible = true;
  for (size_t count : {size_t{2}, size_t{4096}, size_t{1} << 20})
    EXPECT_NE(planOne(byDefault, device::Func::kAllReduce, count).proto, device::Proto::kLL128) << count;
}

}  // namespace
}  // namespace weft::core
