// One rank: collectives whose result is their input are planned as copies
// of the input to the output (the plan's self copies, a cudaMemcpyAsync on
// the cuda backend), not as kernels; a pre-multiplication still runs as a
// kernel, and so does every collective of a group that holds one (self
// copies run before any kernel, so they may not be mixed).
#include <gtest/gtest.h>

#include <vector>

#include "core/planner.h"

namespace weft::core {
namespace {

CollTask task(device::Func func, const void* send, void* recv, size_t count, device::RedOpKind op) {
  CollTask t{};
  t.func = func;
  t.sendbuff = send;
  t.recvbuff = recv;
  t.count = count;
  t.dtype = ncclFloat32;
  t.op.kind = op;
  return t;
}

size_t items(const Plan& plan) {
  size_t n = 0;
  for (const auto& list : plan.channels) n += list.size();
  return n;
}

const PlanInputs kOneRank{0, 1, 2, 1, 8192, 4};

TEST(PlanOneRank, EachCollectiveIsACopyOfItsInput) {
  float a[64], b[64];
  using device::Func;
  using device::RedOpKind;
  for (Func func : {Func::kAllReduce, Func::kReduce, Func::kBroadcast, Func::kAllGather, Func::kReduceScatter}) {
    Plan plan;
    ASSERT_TRUE(planTasks(kOneRank, {task(func, a, b, 64, RedOpKind::kMax)}, {}, &plan).ok());
    ASSERT_EQ(plan.selfCopies.size(), 1u) << static_cast<int>(func);
    EXPECT_EQ(plan.selfCopies[0].src, a);
    EXPECT_EQ(plan.selfCopies[0].dst, b);
    EXPECT_EQ(plan.selfCopies[0].bytes, 64 * sizeof(float));
    EXPECT_EQ(items(plan), 0u) << "no kernel work";
    EXPECT_TRUE(plan.batches.empty());
  }
  Plan inPlace;
  ASSERT_TRUE(planTasks(kOneRank, {task(Func::kAllReduce, a, a, 64, RedOpKind::kSum)}, {}, &inPlace).ok());
  EXPECT_TRUE(inPlace.selfCopies.empty());
  EXPECT_EQ(items(inPlace), 0u);
}

TEST(PlanOneRank, APreMultiplicationKeepsTheWholeGroupInKernels) {
  float a[64], b[64], c[64];
  using device::Func;
  using device::RedOpKind;
  Plan alone;
  ASSERT_TRUE(planTasks(kOneRank, {task(Func::kAllReduce, a, b, 64, RedOpKind::kPreMulSum)}, {}, &alone).ok());
  EXPECT_TRUE(alone.selfCopies.empty());
  EXPECT_GT(items(alone), 0u);
  Plan mixed;
  ASSERT_TRUE(planTasks(kOneRank,
                        {task(Func::kAllReduce, a, b, 64, RedOpKind::kPreMulSum),
                         task(Func::kAllReduce, b, c, 64, RedOpKind::kSum)},
                        {}, &mixed)
                  .ok());
  EXPECT_TRUE(mixed.selfCopies.empty()) << "a copy of b would run before the kernel that writes b";
  EXPECT_EQ(items(mixed), 2u);
}

TEST(PlanOneRank, TwoRanksStillRunKernels) {
  float a[64], b[64];
  PlanInputs two{0, 2, 2, 1, 8192, 4};
  two.shape = tuning::Shape{2, 1, 2, 0};
  Plan plan;
  ASSERT_TRUE(planTasks(two, {task(device::Func::kAllReduce, a, b, 64, device::RedOpKind::kSum)}, {}, &plan).ok());
  EXPECT_TRUE(plan.selfCopies.empty());
  EXPECT_GT(items(plan), 0u);
}

}  // namespace
}  // namespace weft::core
