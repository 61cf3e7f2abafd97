// The algorithms and collectives the tuning layer prices and chooses among,
// shared by the planner's choice (algo.h) and the cost model (cost_model.h).
#pragma once

namespace weft::tuning {

// kOneShot: every rank of a node sends its input to every other and each
// combines all (device/oneshot.h); Weft's own name for NCCL_ALGO.
// kButterfly (recursive doubling, device/butterfly.h) and kHalvingDoubling
// (Rabenseifner, device/halving_doubling.h): pairwise exchanges in log2
// rounds; NCCL_ALGO also accepts RecDoubling and Rabenseifner for them.
// kHierarchicalRing (device/hier_ring.h; alias HierRing): reduce-scatter in
// each node, allreduce across nodes per local index, allgather in the node.
// kTorus2D (device/torus.h; alias Torus): the same on a grid of rows and
// columns (core/torus_grid.h); chosen only where NCCL_ALGO names it.
enum class Algorithm : int {
  kRing = 0,
  kTree = 1,
  kOneShot = 2,
  kButterfly = 3,
  kHalvingDoubling = 4,
  kHierarchicalRing = 5,
  kTorus2D = 6,
  kCount = 7
};
enum class CollKind : int { kAllReduce = 0, kAllGather, kReduceScatter, kBroadcast, kReduce, kCount };

const char* algorithmName(Algorithm algo);  // "Ring", "Tree", ... (NCCL_ALGO's spelling)
const char* collKindName(CollKind coll);    // "AllReduce", ...

}  // namespace weft::tuning
