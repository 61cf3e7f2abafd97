#include "tuning/cost_model.h"

#include <algorithm>
#include <cmath>

#include "tuning/algo.h"

namespace weft::tuning {
namespace {

constexpr double kBytesPerUsPerGBs = 1e3;  // 1 GB/s moves 1e3 bytes per microsecond

int floorLog2(int n) {
  int l = 0;
  while ((2 << l) <= n) ++l;
  return l;
}

int ceilLog2(int n) {
  int l = 0;
  while ((1 << l) < n) ++l;
  return l;
}

double usFor(double bytes, double gbs) { return bytes / (gbs * kBytesPerUsPerGBs); }

// One hop: its latency and the bandwidth one flow gets on it.
struct Hop {
  double latUs;
  double gbs;
};

// A ring phase of `steps` steps of `stepBytes` over `q` ranks of which
// `interHops` hops cross nodes. The steps are pipelined around the ring, so
// in the long run a step costs the larger of the mean hop (latency plus
// wire time: data must go round) and the slowest hop's wire time (every
// rank must push its bytes).
AlgoEstimate ringPhase(double steps, int q, int interHops, double stepBytes, const Hop& intra, const Hop& inter) {
  AlgoEstimate e;
  const double meanLat = ((q - interHops) * intra.latUs + interHops * inter.latUs) / q;
  const double meanWire = ((q - interHops) * usFor(stepBytes, intra.gbs) + interHops * usFor(stepBytes, inter.gbs)) / q;
  const double maxWire =
      std::max(interHops < q ? usFor(stepBytes, intra.gbs) : 0.0, interHops > 0 ? usFor(stepBytes, inter.gbs) : 0.0);
  e.latencyUs = steps * meanLat;
  e.wireUs = steps * std::max(meanWire, maxWire - meanLat);
  return e;
}

void add(AlgoEstimate* total, const AlgoEstimate& part) {
  total->latencyUs += part.latencyUs;
  total->wireUs += part.wireUs;
  total->reduceUs += part.reduceUs;
}

AlgoEstimate notApplicable(const char* reason) {
  AlgoEstimate e;
  e.reason = reason;
  return e;
}

Hop intraHop(const LinkFigures& l) { return {l.intraLatUs, l.intraGBs}; }

// A NIC shared by `flows` concurrent flows of one node, never faster than
// the rank's own link.
Hop interHop(const LinkFigures& l, int flows) {
  const double perFlow = l.interGBs * std::max(1, l.nicsPerNode) / std::max(1, flows);
  return {l.interLatUs, std::min(perFlow, l.intraGBs)};
}

AlgoEstimate ring(double s, const CommShape& c, const LinkFigures& l) {
  const int k = c.nranks;
  AlgoEstimate e = ringPhase(2.0 * (k - 1), k, c.nnodes > 1 ? c.nnodes : 0, s / k, intraHop(l), interHop(l, 1));
  e.reduceUs = usFor(s * (k - 1) / k, l.reduceGBs);
  return e;
}

// Each phase (reduce up, broadcast down) is a pipeline of `depth` hops
// carrying S in p chunks: (depth + p - 1)(alpha + S/(pB)), least at
// p = sqrt(S depth / (alpha B)): depth alpha + S/B + 2 sqrt(depth alpha S/B).
// Both trees run at once, each with half the data, and every node sends
// about S per phase through its NIC (it is interior in one tree).
AlgoEstimate tree(double s, const CommShape& c, const LinkFigures& l) {
  AlgoEstimate e;
  const int levels = c.nnodes > 1 ? ceilLog2(c.nnodes) : 0;
  const double latOneWay = levels * l.interLatUs + (c.ranksPerNode - 1) * l.intraLatUs;
  const double bw = c.nnodes > 1 ? std::min(l.intraGBs, l.interGBs * std::max(1, l.nicsPerNode)) : l.intraGBs;
  const double wireOneWay = usFor(s, bw);
  e.latencyUs = 2 * latOneWay;
  e.wireUs = 2 * (wireOneWay + 2 * std::sqrt(latOneWay * wireOneWay));
  e.reduceUs = usFor(s, l.reduceGBs);
  return e;
}

AlgoEstimate oneShot(double s, const CommShape& c, const LinkFigures& l) {
  if (c.nnodes != 1) return notApplicable("one node only");
  if (c.nranks < 2 || c.nranks > kOneShotMaxRanks) return notApplicable("2 to 4 ranks only");
  AlgoEstimate e;
  e.latencyUs = l.intraLatUs;
  e.wireUs = usFor(s * (c.nranks - 1), l.intraGBs);
  e.reduceUs = usFor(s * (c.nranks - 1), l.reduceGBs);
  return e;
}

// Partner at distance d: within the node when d < ranks per node (ranks are
// numbered node by node), else across, with every rank of the node sending
// through the NICs at once.
Hop exchangeHop(int distance, const CommShape& c, const LinkFigures& l) {
  return distance < c.ranksPerNode ? intraHop(l) : interHop(l, c.ranksPerNode);
}

// Ranks beyond the largest power of two p fold in (send S to a partner
// below p) before and fold out (receive the result) after.
void addFold(double s, const CommShape& c, const LinkFigures& l, AlgoEstimate* e) {
  const int p = 1 << floorLog2(c.nranks);
  if (p == c.nranks) return;
  const Hop hop = exchangeHop(p, c, l);
  e->latencyUs += 2 * hop.latUs;
  e->wireUs += 2 * usFor(s, hop.gbs);
  e->reduceUs += usFor(s, l.reduceGBs);
}

AlgoEstimate butterfly(double s, const CommShape& c, const LinkFigures& l) {
  AlgoEstimate e;
  const int rounds = floorLog2(c.nranks);
  for (int i = 0; i < rounds; ++i) {
    const Hop hop = exchangeHop(1 << i, c, l);
    e.latencyUs += hop.latUs;
    e.wireUs += usFor(s, hop.gbs);
    e.reduceUs += usFor(s, l.reduceGBs);
  }
  addFold(s, c, l, &e);
  return e;
}

// Reduce-scatter by halving from distance 1 up (the largest halves stay in
// the node), allgather by doubling back down: a round is one hand-off while
// its blocks fit in a chunk (device/halving_doubling.h), which is where
// latency matters; larger rounds take a piece per chunk, whose hand-offs the
// bytes outweigh.
AlgoEstimate halvingDoubling(double s, const CommShape& c, const LinkFigures& l) {
  AlgoEstimate e;
  const int rounds = floorLog2(c.nranks);
  double part = s;
  for (int i = 0; i < rounds; ++i) {
    part /= 2;
    const Hop hop = exchangeHop(1 << i, c, l);
    e.latencyUs += 2 * hop.latUs;
    e.wireUs += 2 * usFor(part, hop.gbs);
    e.reduceUs += usFor(part, l.reduceGBs);
  }
  addFold(s, c, l, &e);
  return e;
}

// Row reduce-scatter, column ring allreduce on S/cols, row allgather.
// Ranks are row-major; rows and columns cross nodes as their spacing says.
AlgoEstimate torus(double s, int rows, int cols, const CommShape& c, const LinkFigures& l) {
  const int g = c.ranksPerNode;
  if (rows * cols != c.nranks || rows < 1 || cols < 1) return notApplicable("rows x columns must equal nranks");
  if (cols % g != 0 && g % cols != 0) return notApplicable("a row must hold whole nodes or divide one");
  AlgoEstimate e;
  const int rowInter = cols > g ? cols / g : 0;
  const AlgoEstimate rowPhase = ringPhase(cols - 1, cols, rowInter, s / cols, intraHop(l), interHop(l, 1));
  // Columns: ranks `cols` apart. A node holds min(g, cols) columns' ranks, each column crossing once.
  const int colInter = c.nnodes < 2 ? 0 : cols >= g ? rows : c.nnodes;
  const int colFlows = std::min(g, cols);
  const AlgoEstimate colPhase =
      ringPhase(2.0 * (rows - 1), rows, rows > 1 ? colInter : 0, s / cols / rows, intraHop(l), interHop(l, colFlows));
  add(&e, rowPhase);
  add(&e, rowPhase);
  add(&e, colPhase);
  e.reduceUs = usFor(s * (cols - 1) / cols + s / cols * (rows - 1) / rows, l.reduceGBs);
  return e;
}

// Ring AllGather and ReduceScatter (S = all ranks' bytes): k-1 steps of
// S/k; ReduceScatter combines every byte it receives.
AlgoEstimate ringGather(CollKind coll, double s, const CommShape& c, const LinkFigures& l) {
  const int k = c.nranks;
  AlgoEstimate e = ringPhase(k - 1.0, k, c.nnodes > 1 ? c.nnodes : 0, s / k, intraHop(l), interHop(l, 1));
  if (coll == CollKind::kReduceScatter) e.reduceUs = usFor(s * (k - 1) / k, l.reduceGBs);
  return e;
}

// Ring Broadcast and Reduce: a chain of k-1 hops (nodes-1 of them across
// nodes) pipelining S in chunks: every hop's latency once, the bytes once
// at the slowest hop's bandwidth; Reduce combines S on the way.
AlgoEstimate chain(CollKind coll, double s, const CommShape& c, const LinkFigures& l) {
  AlgoEstimate e;
  const int inter = c.nnodes > 1 ? c.nnodes - 1 : 0;
  e.latencyUs = (c.nranks - 1 - inter) * l.intraLatUs + inter * l.interLatUs;
  e.wireUs = usFor(s, inter > 0 ? interHop(l, 1).gbs : l.intraGBs);
  if (coll == CollKind::kReduce) e.reduceUs = usFor(s, l.reduceGBs);
  return e;
}

// One-shot AllGather and ReduceScatter move what their ring moves, in one
// hand-off; Broadcast one-shot has the root write k-1 copies.
AlgoEstimate oneShotOther(CollKind coll, double s, const CommShape& c, const LinkFigures& l) {
  if (c.nnodes != 1) return notApplicable("one node only");
  if (c.nranks < 2 || c.nranks > kOneShotMaxRanks) return notApplicable("2 to 4 ranks only");
  const double k = c.nranks;
  AlgoEstimate e;
  e.latencyUs = l.intraLatUs;
  e.wireUs = usFor(coll == CollKind::kBroadcast ? s * (k - 1) : s * (k - 1) / k, l.intraGBs);
  if (coll == CollKind::kReduceScatter) e.reduceUs = usFor(s * (k - 1) / k, l.reduceGBs);
  return e;
}

// Halving-doubling AllGather (S = all ranks' bytes): doubling pieces of
// S/p, 2S/p, ... from distance 1 up; ReduceScatter: halving pieces of S/2,
// S/4, ... from distance 1 up, every byte received combined. The round at
// distance d moves d segments one piece each (they lie `count` apart in the
// buffers, so unlike AllReduce's blocks they cannot travel as one), each a
// hand-off: p - 1 in all, as the ring. Ranks beyond p fold in (their part
// or all S) and out (all S or their part).
AlgoEstimate halvingDoublingOther(CollKind coll, double s, const CommShape& c, const LinkFigures& l) {
  AlgoEstimate e;
  const int rounds = floorLog2(c.nranks);
  const int p = 1 << rounds;
  const bool scatter = coll == CollKind::kReduceScatter;
  double part = scatter ? s : s / p;
  for (int i = 0; i < rounds; ++i) {
    if (scatter) part /= 2;
    const Hop hop = exchangeHop(1 << i, c, l);
    e.latencyUs += (1 << i) * hop.latUs;
    e.wireUs += usFor(part, hop.gbs);
    if (scatter) e.reduceUs += usFor(part, l.reduceGBs);
    if (!scatter) part *= 2;
  }
  if (p != c.nranks) {
    const Hop hop = exchangeHop(p, c, l);
    e.latencyUs += 2 * hop.latUs;
    e.wireUs += usFor(s + s / c.nranks, hop.gbs);
    if (scatter) e.reduceUs += usFor(s, l.reduceGBs);
  }
  return e;
}

}  // namespace

const char* modelAlgoName(ModelAlgo algo) {
  static const char* kNames[] = {"Ring", "Tree", "OneShot", "Butterfly", "HalvingDoubling", "HierRing", "Torus2D"};
  const int i = static_cast<int>(algo);
  return i >= 0 && i < static_cast<int>(ModelAlgo::kCount) ? kNames[i] : "?";
}

AlgoEstimate estimateAllReduce(ModelAlgo algo, int64_t bytes, const CommShape& shape, const LinkFigures& links) {
  if (shape.nranks < 2) return notApplicable("one rank: nothing to exchange");
  const double s = static_cast<double>(bytes);
  AlgoEstimate e;
  switch (algo) {
    case ModelAlgo::kRing: e = ring(s, shape, links); break;
    case ModelAlgo::kTree: e = tree(s, shape, links); break;
    case ModelAlgo::kOneShot: e = oneShot(s, shape, links); break;
    case ModelAlgo::kButterfly: e = butterfly(s, shape, links); break;
    case ModelAlgo::kHalvingDoubling: e = halvingDoubling(s, shape, links); break;
    case ModelAlgo::kHierarchicalRing:
      if (shape.nnodes < 2 || shape.ranksPerNode < 2) return notApplicable("needs several nodes of several ranks");
      e = torus(s, shape.nnodes, shape.ranksPerNode, shape, links);
      break;
    case ModelAlgo::kTorus2D: {
      const int rows = shape.torusRows > 0 ? shape.torusRows : shape.nnodes;
      const int cols = shape.torusCols > 0 ? shape.torusCols : shape.ranksPerNode;
      // A grid given with one row or one column runs as a ring (the planner's
      // WEFT_TORUS=1x5); the nodes' own grid needs two of each.
      const bool given = shape.torusRows > 0 && shape.torusCols > 0;
      if (given ? rows * cols < 2 : rows < 2 || cols < 2) return notApplicable("needs at least 2 rows and 2 columns");
      e = torus(s, rows, cols, shape, links);
      break;
    }
    default: return notApplicable("unknown algorithm");
  }
  if (e.reason[0] != '\0') return e;
  e.applies = true;
  e.us = e.latencyUs + e.wireUs + e.reduceUs;
  return e;
}

AlgoEstimate estimateCollective(CollKind coll, Algorithm algo, int64_t bytes, const CommShape& shape,
                                const LinkFigures& links) {
  if (coll == CollKind::kAllReduce) return estimateAllReduce(algo, bytes, shape, links);
  if (shape.nranks < 2) return notApplicable("one rank: nothing to exchange");
  const double s = static_cast<double>(bytes);
  const bool gather = coll == CollKind::kAllGather || coll == CollKind::kReduceScatter;
  AlgoEstimate e;
  if (algo == Algorithm::kRing)
    e = gather ? ringGather(coll, s, shape, links) : chain(coll, s, shape, links);
  else if (algo == Algorithm::kOneShot && coll != CollKind::kReduce)
    e = oneShotOther(coll, s, shape, links);
  else if (algo == Algorithm::kHalvingDoubling && gather)
    e = halvingDoublingOther(coll, s, shape, links);
  else
    return notApplicable("not an algorithm of this collective");
  if (e.reason[0] != '\0') return e;
  e.applies = true;
  e.us = e.latencyUs + e.wireUs + e.reduceUs;
  return e;
}

EveryEstimate estimateEveryAlgorithm(int64_t bytes, const CommShape& shape, const LinkFigures& links) {
  EveryEstimate all;
  for (int a = 0; a < static_cast<int>(ModelAlgo::kCount); ++a)
    all[static_cast<size_t>(a)] = estimateAllReduce(static_cast<ModelAlgo>(a), bytes, shape, links);
  return all;
}

ModelAlgo cheapestAlgorithm(const EveryEstimate& estimates, uint32_t allowed) {
  int best = -1;
  for (int a = 0; a < static_cast<int>(ModelAlgo::kCount); ++a) {
    const AlgoEstimate& e = estimates[static_cast<size_t>(a)];
    if (!e.applies || !((allowed >> a) & 1u)) continue;
    if (best < 0 || e.us < estimates[static_cast<size_t>(best)].us) best = a;
  }
  return best < 0 ? ModelAlgo::kCount : static_cast<ModelAlgo>(best);
}

double torusClosedForm(double s, int rows, int cols, const SeedTerms& t) {
  const double a = t.alphaUs, b = t.bytesPerUs, g = t.usPerByteReduce;
  const double n = cols, m = rows;
  return 2 * (m - 1) * (a + s / (n * m * b)) + (m - 1) * s / (n * m) * g + 2 * (n - 1) * (a + s / (n * b)) +
         (n - 1) * s / n * g;
}

double seedTreeBound(double s, int nranks, double k, const SeedTerms& t) {
  const double h = std::max(1, ceilLog2(nranks));
  return (2 * h + 2 * k) * (2 * t.alphaUs + s / (k * t.bytesPerUs) + s / (2 * k) * t.usPerByteReduce);
}

double seedTreeChunks(double bytes, int nranks, const SeedTerms& t) {
  const double h = std::max(1, ceilLog2(nranks));
  return std::max(1.0, std::sqrt(bytes * h / (2 * t.alphaUs * t.bytesPerUs)));
}

double seedClosedForm(ModelAlgo algo, double s, int nranks, int groupSize, const SeedTerms& t) {
  const double a = t.alphaUs, b = t.bytesPerUs, g = t.usPerByteReduce;
  const double nn = nranks;
  switch (algo) {
    case ModelAlgo::kRing: return (nn - 1) * (2 * a + 2 * s / (nn * b) + s / nn * g);
    case ModelAlgo::kButterfly: return std::log2(nn) * (a + s / b + s * g);
    case ModelAlgo::kHalvingDoubling: return 2 * std::log2(nn) * a + 2 * (nn - 1) / nn * s / b + (nn - 1) / nn * s * g;
    case ModelAlgo::kTree: return seedTreeBound(s, nranks, seedTreeChunks(s, nranks, t), t);
    case ModelAlgo::kHierarchicalRing:
    case ModelAlgo::kTorus2D: {
      const double n = groupSize, m = nn / groupSize;
      return 2 * (m - 1) * (a + s / (m * b)) + (m - 1) * s / m * g + 2 * (n - 1) * (a + s / (n * b)) +
             (n - 1) * s / n * g;
    }
    default: return -1;
  }
}

}  // namespace weft::tuning
