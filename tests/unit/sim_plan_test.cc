// The simulator restates the planner's channel and chunk arithmetic
// (sim/weft_plan.h, because it does not link the core layer): it must cut
// every AllReduce exactly as core::planTasks does.
#include <gtest/gtest.h>

#include "core/planner.h"
#include "sim/weft_plan.h"

namespace weft::sim {
namespace {

core::CollTask allReduce(size_t count) {
  core::CollTask t{};
  t.func = device::Func::kAllReduce;
  t.count = count;
  t.dtype = ncclFloat32;
  t.root = 0;
  return t;
}

void expectSamePlan(size_t count, bool tree, int channels, int minChannels, int64_t stepBytes, int chunkSteps,
                    int depth) {
  auto filter = tuning::AlgoFilter::parse(tree ? "Tree" : "Ring");
  ASSERT_TRUE(filter.ok());
  core::PlanInputs in{0, 16, channels, minChannels, stepBytes, chunkSteps};
  in.shape = tuning::Shape{16, 2, 8, depth};
  in.algoFilter = &filter.value();
  in.treesAvailable = true;
  core::Plan plan;
  ASSERT_TRUE(core::planTasks(in, {allReduce(count)}, {}, &plan).ok());
  PlanParams p;
  p.channels = channels;
  p.minChannels = minChannels;
  p.stepBytes = stepBytes;
  p.chunkSteps = chunkSteps;
  p.elemSize = 4;
  const std::vector<ChannelShare> shares = planAllReduce(static_cast<int64_t>(count) * 4, tree, depth, p);
  size_t used = 0;
  for (const auto& items : plan.channels) used += items.empty() ? 0 : 1;
  ASSERT_EQ(shares.size(), used) << count << " elements";
  for (const ChannelShare& s : shares) {
    const device::CollWork& w = plan.channels[static_cast<size_t>(s.channel)].at(0).coll;
    EXPECT_EQ(w.algo, tree ? device::Algo::kTree : device::Algo::kRing);
    EXPECT_EQ(s.start, w.channelStart) << count << " elements, channel " << s.channel;
    EXPECT_EQ(s.count, w.channelCount) << count << " elements, channel " << s.channel;
    EXPECT_EQ(s.chunkElems, w.chunkElems) << count << " elements, channel " << s.channel;
    EXPECT_EQ(s.alignElems, w.alignElems);
  }
}

TEST(SimPlan, CutsLikeThePlanner) {
  for (bool tree : {false, true})
    for (size_t count :
         {size_t{1}, size_t{17}, size_t{1000}, size_t{65536}, size_t{1} << 20, size_t{3} << 22, (size_t{1} << 26) + 5})
      for (int channels : {1, 3, 16}) {
        expectSamePlan(count, tree, channels, 1, 512 << 10, 4, 9);
        expectSamePlan(count, tree, channels, channels, 128 << 10, 2, 3);
      }
}

}  // namespace
}  // namespace weft::sim
