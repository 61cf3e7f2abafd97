#include "sim/weft_plan.h"

#include <algorithm>

#include "tuning/tuning.h"

namespace weft::sim {
namespace {

uint64_t divUp(uint64_t a, uint64_t b) { return (a + b - 1) / b; }
uint64_t roundUp(uint64_t a, uint64_t b) { return divUp(a, b) * b; }

}  // namespace

std::vector<ChannelShare> planAllReduce(int64_t bytes, bool tree, int treeDepth, const PlanParams& p) {
  std::vector<ChannelShare> shares;
  const uint64_t elem = static_cast<uint64_t>(std::max(1, p.elemSize));
  const uint64_t count = static_cast<uint64_t>(std::max<int64_t>(0, bytes)) / elem;
  if (count == 0) return shares;
  const int64_t total = static_cast<int64_t>(count * elem);
  const uint64_t align = std::max<uint64_t>(1, static_cast<uint64_t>(kAlignBytes) / elem);
  const uint64_t ringChunk = static_cast<uint64_t>(p.stepBytes) * static_cast<uint64_t>(p.chunkSteps) / elem;
  const int nch = tuning::collChannels(total, {p.minChannels, p.channels});
  const uint64_t perChannel = roundUp(divUp(count, static_cast<uint64_t>(nch)), align);
  for (int c = 0; c < nch; ++c) {
    ChannelShare s;
    s.channel = c;
    s.start = perChannel * static_cast<uint64_t>(c);
    if (s.start >= count) break;
    s.count = std::min(perChannel, count - s.start);
    s.alignElems = align;
    s.chunkElems = ringChunk;
    if (tree) {
      // The planner's tree chunk: the pipeline should fill 2 x depth hops.
      const uint64_t hops = 2 * static_cast<uint64_t>(std::max(1, treeDepth));
      const uint64_t wanted = roundUp(divUp(s.count, hops), align);
      s.chunkElems = std::max<uint64_t>(align, std::min<uint64_t>(ringChunk, wanted));
    }
    shares.push_back(s);
  }
  return shares;
}

}  // namespace weft::sim
