// How Weft's planner splits one AllReduce over channels and chunks. The
// planner itself (core/planner.cc) lives in the core layer, which the
// simulator does not link (it needs only graph and tuning), so this is the
// planner's arithmetic restated on the same pure functions
// (tuning::collChannels) and the same constants; tests/unit/sim_plan_test.cc
// checks it against core::planTasks item by item.
#pragma once

#include <cstdint>
#include <vector>

namespace weft::sim {

struct PlanParams {
  int channels = 1;               // channels the communicator built
  int minChannels = 1;            // NCCL_MIN_NCHANNELS
  int64_t stepBytes = 512 << 10;  // FIFO slot: NCCL_BUFFSIZE / 8 (the cuda default: 4 MiB / 8)
  int chunkSteps = 4;             // WEFT_CHUNK_STEPS
  int elemSize = 4;               // bytes per element (float)
};

// One channel's share, in elements.
struct ChannelShare {
  int channel = 0;
  uint64_t start = 0;
  uint64_t count = 0;
  uint64_t chunkElems = 0;  // the ring's chunk, or the tree's (shrunk so the pipeline fills)
  uint64_t alignElems = 1;
};

// The channels an AllReduce of `bytes` uses and each one's share; `tree`
// chooses the tree chunk rule (treeDepth: the channel trees' depth).
std::vector<ChannelShare> planAllReduce(int64_t bytes, bool tree, int treeDepth, const PlanParams& params);

// Alignment of channel and chunk boundaries (core::kAlignBytes).
constexpr int64_t kAlignBytes = 64;

}  // namespace weft::sim
