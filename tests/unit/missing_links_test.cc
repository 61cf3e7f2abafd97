// Links the topology lacks: ranks of one node whose devices the model joins
// by no path are found (and only those); a device absent from the model, or
// a model whose sockets are joined (every NCCL topology file), has none.
#include <gtest/gtest.h>

#include <vector>

#include "core/missing_links.h"
#include "core/topology.h"

namespace weft::core {
namespace {

using graph::LinkType;
using graph::makeNode;
using graph::NodeType;

// Two CPUs, joined by a SYS link or not; GPUs 0 and 2 under the first, 1
// under the second; rank r drives GPU r.
CommTopology twoSockets(bool joined) {
  CommTopology topo;
  graph::Topology& t = topo.model;
  const int cpu0 = t.addNode(makeNode(NodeType::kCpu, "0"));
  const int cpu1 = t.addNode(makeNode(NodeType::kCpu, "1"));
  if (joined) t.connect(cpu0, cpu1, LinkType::kSys, 10);
  std::vector<int> gpus;
  for (int d = 0; d < 3; ++d) {
    graph::Node gpu = makeNode(NodeType::kGpu, "gpu-" + std::to_string(d));
    gpu.dev = d;
    gpu.parent = d == 1 ? cpu1 : cpu0;
    const int id = t.addNode(gpu);
    t.connect(id, gpu.parent, LinkType::kPci, 24);
    gpus.push_back(id);
  }
  t.computePaths();
  topo.gpuOfRank = gpus;
  return topo;
}

TEST(MissingLinks, PairsWithoutAnyPathAreMissing) {
  const CommTopology split = twoSockets(false);
  const std::vector<int> node{0, 1, 2};
  EXPECT_EQ(unreachablePeers(split, 0, node), std::vector<int>{1});
  EXPECT_EQ(unreachablePeers(split, 1, node), std::vector<int>{2});
  EXPECT_TRUE(unreachablePeers(split, 2, node).empty());  // only peers above the rank are listed
  // Only ranks of the node are considered.
  EXPECT_TRUE(unreachablePeers(split, 0, std::vector<int>{0, 2}).empty());
}

TEST(MissingLinks, JoinedSocketsOrAbsentDevicesMissNothing) {
  const CommTopology joined = twoSockets(true);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(unreachablePeers(joined, r, {0, 1, 2}).empty()) << r;
  CommTopology absent = twoSockets(false);
  absent.gpuOfRank[1] = -1;  // rank 1's device is not in the model
  EXPECT_TRUE(unreachablePeers(absent, 0, {0, 1, 2}).empty());
}

}  // namespace
}  // namespace weft::core
