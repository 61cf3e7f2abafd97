// Who gets one-shot, the butterfly, halving-doubling, hierarchical ring and 2D torus:
// the host backend whenever the model or NCCL_ALGO picks them, for every
// op; the cuda backend (PlanInputs::extraSumOnly, extraNamedOnly) only when
// NCCL_ALGO names them, and only for the sum and the data-only calls, whose
// kernels have them. A call the cuda kernels cannot run that way falls back
// to the ring, never to a kernel without the algorithm.
#include <gtest/gtest.h>

#include <string>

#include "core/planner.h"
#include "plan_one.h"

namespace weft::core {
namespace {

tuning::AlgoFilter filterOf(const std::string& text) {
  auto f = tuning::AlgoFilter::parse(text);
  EXPECT_TRUE(f.ok()) << text;
  return f.ok() ? f.value() : tuning::AlgoFilter();
}

// 8 ranks as 2 nodes of 4, with an exchange plan, a hierarchy and a 2 x 4 grid.
PlanInputs inputs(bool cuda, const tuning::AlgoFilter* filter) {
  PlanInputs in{0, 8, 1, 1, 8192, 4};
  in.shape = tuning::Shape{8, 2, 4, 0};
  in.algoFilter = filter;
  in.exchangeAvailable = true;
  in.hierAvailable = true;
  in.torusAvailable = true;
  in.torus = tuning::TorusShape{2, 4};
  in.extraSumOnly = cuda;
  in.extraNamedOnly = cuda;
  return in;
}

struct Planned {
  device::Algo algo;
  bool exchangeChannel;
  bool hierChannel;
  bool torusChannel;
};

Planned planOne(const PlanInputs& in, device::Func func, device::RedOpKind op, size_t count) {
  const Plan plan = planOneTask(in, func, ncclInt32, op, count);
  if (plan.channels.empty() || plan.channels[0].empty()) return {device::Algo::kRing, false, false, false};
  return {plan.channels[0][0].coll.algo, !plan.exchangeChannels.empty(), !plan.hierChannels.empty(),
          !plan.torusChannels.empty()};
}

using device::Algo;
using device::Func;
using device::RedOpKind;

TEST(PlanExtra, NamedAlgorithmsRunOnBothBackendsForTheSum) {
  const struct {
    const char* filter;
    Func func;
    Algo algo;
  } cases[] = {
      {"allreduce:Butterfly", Func::kAllReduce, Algo::kButterfly},
      {"allreduce:HalvingDoubling", Func::kAllReduce, Algo::kHalvingDoubling},
      {"reducescatter:HalvingDoubling", Func::kReduceScatter, Algo::kHalvingDoubling},
      {"allgather:HalvingDoubling", Func::kAllGather, Algo::kHalvingDoubling},
      {"allreduce:HierarchicalRing", Func::kAllReduce, Algo::kHierRing},
      {"allreduce:Torus2D", Func::kAllReduce, Algo::kTorus2D},
  };
  for (const auto& c : cases)
    for (bool cuda : {false, true}) {
      const tuning::AlgoFilter filter = filterOf(c.filter);
      const Planned p = planOne(inputs(cuda, &filter), c.func, RedOpKind::kSum, 4096);
      EXPECT_EQ(p.algo, c.algo) << c.filter << (cuda ? " (cuda)" : " (host)");
      EXPECT_EQ(p.exchangeChannel, c.algo == Algo::kButterfly || c.algo == Algo::kHalvingDoubling) << c.filter;
      EXPECT_EQ(p.hierChannel, c.algo == Algo::kHierRing) << c.filter;
      EXPECT_EQ(p.torusChannel, c.algo == Algo::kTorus2D) << c.filter;
    }
}

// The cuda kernels have them for the sum only: max falls back to the ring
// there, and runs them on the host.
TEST(PlanExtra, OtherOpsStayOnTheRingOnCuda) {
  for (const char* text : {"allreduce:Butterfly", "allreduce:HalvingDoubling", "allreduce:HierarchicalRing",
                           "allreduce:Torus2D", "reducescatter:HalvingDoubling"}) {
    const tuning::AlgoFilter filter = filterOf(text);
    const Func func = std::string(text).rfind("reducescatter", 0) == 0 ? Func::kReduceScatter : Func::kAllReduce;
    const Planned cuda = planOne(inputs(true, &filter), func, RedOpKind::kMax, 4096);
    EXPECT_EQ(cuda.algo, Algo::kRing) << text;
    EXPECT_FALSE(cuda.exchangeChannel || cuda.hierChannel || cuda.torusChannel) << text;
    const Planned host = planOne(inputs(false, &filter), func, RedOpKind::kMax, 4096);
    EXPECT_NE(host.algo, Algo::kRing) << text;
  }
}

// Without NCCL_ALGO the cuda backend keeps to rings and trees at every size,
// while the host backend's model takes an exchange somewhere in the sweep.
TEST(PlanExtra, CudaTakesThemOnlyWhenNamed) {
  bool hostTookOne = false;
  for (size_t count = 1; count <= (size_t{1} << 16); count *= 4) {
    for (Func func : {Func::kAllReduce, Func::kAllGather, Func::kReduceScatter}) {
      const Planned cuda = planOne(inputs(true, nullptr), func, RedOpKind::kSum, count);
      EXPECT_TRUE(cuda.algo == Algo::kRing || cuda.algo == Algo::kTree) << "count " << count;
      EXPECT_FALSE(cuda.exchangeChannel || cuda.hierChannel || cuda.torusChannel) << "count " << count;
      const Planned host = planOne(inputs(false, nullptr), func, RedOpKind::kSum, count);
      hostTookOne = hostTookOne || host.exchangeChannel || host.hierChannel;
    }
  }
  EXPECT_TRUE(hostTookOne);
}

// One-shot on 4 ranks of one node: as the extras, the cuda backend takes it
// only when NCCL_ALGO names it, for the sum and the data-only calls; the
// host's model takes it by itself for small calls.
PlanInputs oneNode(bool cuda, const tuning::AlgoFilter* filter) {
  PlanInputs in{0, 4, 1, 1, 8192, 4};
  in.shape = tuning::Shape{4, 1, 4, 0};
  in.algoFilter = filter;
  in.oneShotAvailable = true;
  in.extraSumOnly = cuda;
  in.extraNamedOnly = cuda;
  return in;
}

TEST(PlanExtra, OneShotOnCudaWhenNamedForTheSumAndDataOnlyCalls) {
  const tuning::AlgoFilter named =
      filterOf("allreduce:OneShot;allgather:OneShot;reducescatter:OneShot;broadcast:OneShot");
  for (Func func : {Func::kAllReduce, Func::kAllGather, Func::kReduceScatter, Func::kBroadcast})
    for (bool cuda : {false, true}) {
      const Plan plan = planOneTask(oneNode(cuda, &named), func, ncclInt32, RedOpKind::kSum, 256);
      ASSERT_FALSE(plan.channels.empty() || plan.channels[0].empty());
      EXPECT_EQ(plan.channels[0][0].coll.algo, Algo::kOneShot) << static_cast<int>(func) << (cuda ? " cuda" : " host");
      EXPECT_FALSE(plan.flatChannels.empty()) << static_cast<int>(func);
    }
  // Max: not in the cuda kernels' one-shot; the host runs it.
  for (Func func : {Func::kAllReduce, Func::kReduceScatter}) {
    const Plan cuda = planOneTask(oneNode(true, &named), func, ncclInt32, RedOpKind::kMax, 256);
    EXPECT_EQ(cuda.channels[0][0].coll.algo, Algo::kRing) << static_cast<int>(func);
    EXPECT_TRUE(cuda.flatChannels.empty()) << static_cast<int>(func);
    const Plan host = planOneTask(oneNode(false, &named), func, ncclInt32, RedOpKind::kMax, 256);
    EXPECT_EQ(host.channels[0][0].coll.algo, Algo::kOneShot) << static_cast<int>(func);
  }
  // Unnamed: never on cuda; the host's model takes it for small sums.
  for (size_t count : {size_t{1}, size_t{64}, size_t{1024}}) {
    const Plan cuda = planOneTask(oneNode(true, nullptr), Func::kAllReduce, ncclInt32, RedOpKind::kSum, count);
    EXPECT_NE(cuda.channels[0][0].coll.algo, Algo::kOneShot) << count;
    EXPECT_TRUE(cuda.flatChannels.empty()) << count;
  }
  const Plan host = planOneTask(oneNode(false, nullptr), Func::kAllReduce, ncclInt32, RedOpKind::kSum, 1);
  EXPECT_EQ(host.channels[0][0].coll.algo, Algo::kOneShot);
}

}  // namespace
}  // namespace weft::core
