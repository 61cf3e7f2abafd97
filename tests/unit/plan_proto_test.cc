// The planner's protocol and direct-mode choices on narrow inputs: LL for
// small calls and with it LL-sized chunks; Simple beyond the threshold and
// wherever LL is impossible; direct mode only for large ring AllReduce,
// AllGather and Broadcast under Simple when every rank is a thread of one
// process.
#include <gtest/gtest.h>

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
  // 8 KiB slots -> 8 KiB LL steps carrying 4 KiB; 4 steps a chunk.
  EXPECT_EQ(w.chunkElems, 4u * 4096 / sizeof(float));
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
  static float buffer[4];
  CollTask task{};
  task.func = device::Func::kAllReduce;
  task.sendbuff = buffer;
  task.recvbuff = buffer;
  task.count = 2;
  task.dtype = ncclFloat32;
  task.op.kind = device::RedOpKind::kMax;
  Plan plan;
  ASSERT_TRUE(planTasks(in, {task}, {}, &plan).ok());
  EXPECT_EQ(plan.channels[0][0].coll.proto, device::Proto::kSimple);
}

}  // namespace
}  // namespace weft::core
