// The harness of test_team_coop (team_coop_test.cc): k ranks in one process,
// each a team of N emulated threads (team_coop.h), over a full mesh of
// in-process FIFOs; a Case says what to run, runCase runs it twice back to
// back and checks every output against the scalar reference, and sweep
// runs a collective over rank counts, team sizes and element counts.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "core/broken_links.h"
#include "device/p2p.h"
#include "device/run_work.h"
#include "fifo_link.h"
#include "team_coop.h"

namespace weft::device::team_cases {

constexpr int64_t kTimeoutNs = 10 * 1000000000ll;  // a protocol error ends as a failed wait
constexpr int kCalls = 2;

struct Case {
  Func func;
  Algo algo;
  Proto proto;
  DataType dtype;  // kFloat32 (sum) or kInt32 (max); data-only calls move bytes
  int k;           // ranks
  int team;        // threads per rank
  uint64_t count;  // elements (bytes for AllGather and Broadcast)
  bool inPlace = false;
  int root = 0;
  bool direct = false;  // ring calls in direct mode (TeamCoopDirect, links of reach kReachAddress)
  // direct between "processes" (links of reach kReachShared): the way the
  // team writes, and how often a cross-memory write is refused (0: never)
  bool shared = false;
  DirectWay sharedWay = DirectWay::kPointer;
  int refuseEvery = 0;
  // Direct reads between "processes": this rank cannot reach its
  // producer's input (it answers no), this rank does not offer its own
  // (WEFT_DIRECT_READ=0); -1: none.
  int cannotReach = -1;
  int readsOff = -1;
  bool brokenLinks = false;  // exchanges: links 0-1 and 0-2 broken, so the plan relays
  int mismatchRank = -1;     // this rank's calls carry another sequence number: every wait must fail, none hang
  std::string str() const {
    return "func=" + std::to_string(static_cast<int>(func)) + " algo=" + std::to_string(static_cast<int>(algo)) +
           " proto=" + std::to_string(static_cast<int>(proto)) + " dtype=" + std::to_string(static_cast<int>(dtype)) +
           " k=" + std::to_string(k) + " team=" + std::to_string(team) + " count=" + std::to_string(count) +
           (inPlace ? " in-place" : "") + " root=" + std::to_string(root) + (direct ? " direct" : "") +
           (brokenLinks ? " relays" : "") +
           (shared ? " shared way=" + std::to_string(static_cast<int>(sharedWay)) +
                         " refuse=" + std::to_string(refuseEvery) + " cannotReach=" + std::to_string(cannotReach) +
                         " readsOff=" + std::to_string(readsOff)
                   : "");
  }
};

constexpr int64_t kStepBytes = 256;   // 64 floats a slot; LL: 128 payload bytes a step
constexpr int64_t kChunkBytes = 640;  // 2.5 slots: chunk and slot borders fall apart
constexpr int64_t kAlignBytes = 16;

inline bool isDataOnly(Func f) { return f == Func::kAllGather || f == Func::kBroadcast; }
// Data-only collectives and send/recv move bytes.
inline bool movesBytes(Func f) { return isDataOnly(f) || f == Func::kSendRecv; }
inline int elemBytes(const Case& c) { return movesBytes(c.func) ? 1 : 4; }

// Element i of rank r's input to call `call`, as 32 bits: small integers
// (exact float sums), and for int32 max values of either sign.
inline int32_t inputValue(const Case& c, int call, int r, uint64_t i) {
  const int64_t x =
      static_cast<int64_t>((i * 7 + static_cast<uint64_t>(r) * 13 + static_cast<uint64_t>(call) * 5) % 23);
  return static_cast<int32_t>(c.dtype == DataType::kInt32 ? (x * 977 - 11000) * (r % 2 ? -1 : 1) : x - 11);
}

// A rank's buffers for one call, as raw bytes.
struct Buffers {
  std::vector<uint8_t> send, recv;
};

// Sizes of send and receive buffers in elements.
inline uint64_t sendElems(const Case& c) { return c.func == Func::kReduceScatter ? c.count * c.k : c.count; }
inline uint64_t recvElems(const Case& c) { return c.func == Func::kAllGather ? c.count * c.k : c.count; }

inline void store(const Case& c, std::vector<uint8_t>& buf, uint64_t i, int32_t v) {
  if (elemBytes(c) == 1) {
    buf[i] = static_cast<uint8_t>(v);
  } else if (c.dtype == DataType::kFloat32) {
    const float f = static_cast<float>(v);
    std::memcpy(&buf[i * 4], &f, 4);
  } else {
    std::memcpy(&buf[i * 4], &v, 4);
  }
}

inline int32_t load(const Case& c, const std::vector<uint8_t>& buf, uint64_t i) {
  if (elemBytes(c) == 1) return buf[i];
  if (c.dtype == DataType::kFloat32) {
    float f;
    std::memcpy(&f, &buf[i * 4], 4);
    return static_cast<int32_t>(f);
  }
  int32_t v;
  std::memcpy(&v, &buf[i * 4], 4);
  return v;
}

inline int32_t combine(const Case& c, int32_t a, int32_t b) {
  return c.dtype == DataType::kInt32 ? std::max(a, b) : a + b;
}

// The reference: element i of rank r's output, or false where r's output is
// not defined (Reduce off the root).
inline bool expected(const Case& c, int call, int r, uint64_t i, int32_t* want) {
  auto in = [&](int rank, uint64_t at) {
    const int32_t v = inputValue(c, call, rank, at);
    return movesBytes(c.func) ? static_cast<int32_t>(static_cast<uint8_t>(v)) : v;
  };
  auto reduceAll = [&](uint64_t at) {
    int32_t acc = in(0, at);
    for (int q = 1; q < c.k; ++q) acc = combine(c, acc, in(q, at));
    return acc;
  };
  switch (c.func) {
    case Func::kAllReduce: *want = reduceAll(i); return true;
    case Func::kReduce:
      if (r != c.root) return false;
      *want = reduceAll(i);
      return true;
    case Func::kReduceScatter: *want = reduceAll(static_cast<uint64_t>(r) * c.count + i); return true;
    case Func::kAllGather: *want = in(static_cast<int>(i / c.count), i % c.count); return true;
    case Func::kBroadcast: *want = in(c.root, i); return true;
    case Func::kSendRecv: *want = in((r + c.k - 1) % c.k, i); return true;
    default: return false;
  }
}

// Every ordered pair of k ranks, and each rank's view of the channel as the
// core builds it (core/comm.cc): one FIFO per peer and direction, shared by
// every algorithm.
class Mesh {
 public:
  explicit Mesh(const Case& c) : k_(c.k), links_(static_cast<size_t>(c.k) * c.k), algos_(static_cast<size_t>(c.k)) {
    for (int from = 0; from < k_; ++from)
      for (int to = 0; to < k_; ++to) {
        if (from == to) continue;
        auto link = std::make_unique<Link>(kStepBytes, from, to);
        if (c.direct) link->producer.reach = link->consumer.reach = c.shared ? kReachShared : kReachAddress;
        links_[static_cast<size_t>(from * k_ + to)] = std::move(link);
      }
    // A ring order other than rank order, so positions and ranks differ.
    for (int i = 0; i < k_; ++i) ringOrder_.push_back(i % 2 == 0 ? i / 2 : k_ - 1 - i / 2);
    core::LinkSet broken;
    if (c.brokenLinks) {
      broken.add(0, 1);
      broken.add(0, 2);
    }
    auto plan = core::planExchange(k_, broken, kMaxRelayDuties);
    if (plan.ok()) exchange_ = plan.value();
    // Room for 128 floats per rank: the halving ReduceScatter's pieces are
    // shorter than a chunk (160).
    scratch_.assign(static_cast<size_t>(k_), std::vector<uint64_t>(static_cast<size_t>(k_) * 64, 0));
  }

  bool exchangePlanned() const { return !exchange_.physical.empty(); }
  int relays() const { return static_cast<int>(exchange_.relays.size()); }
  Link& link(int from, int to) { return *links_[static_cast<size_t>(from * k_ + to)]; }
  FifoEnd* sendEnd(int from, int to) { return from == to ? nullptr : &link(from, to).producer; }
  FifoEnd* recvEnd(int to, int from) { return from == to ? nullptr : &link(from, to).consumer; }

  ChannelView view(int r) {
    ChannelView v{};
    v.id = 0;
    v.rank = r;
    const int at = static_cast<int>(std::find(ringOrder_.begin(), ringOrder_.end(), r) - ringOrder_.begin());
    const int prev = ringOrder_[static_cast<size_t>((at + k_ - 1) % k_)];
    const int next = ringOrder_[static_cast<size_t>((at + 1) % k_)];
    v.ring = RingView{k_, at, prev, next, ringOrder_.data()};
    v.ringRecv = recvEnd(r, prev);
    v.ringSend = sendEnd(r, next);
    // A binary tree in rank order (root 0).
    v.tree.up = r == 0 ? -1 : (r - 1) / 2;
    for (int& child : v.tree.down) child = -1;
    for (int child = 2 * r + 1; child <= 2 * r + 2 && child < k_; ++child) v.tree.down[v.tree.nDown++] = child;
    v.tree.depth = 1;
    while ((1 << v.tree.depth) <= k_) v.tree.depth += 1;
    if (v.tree.up >= 0) {
      v.treeUpSend = sendEnd(r, v.tree.up);
      v.treeDownRecv = recvEnd(r, v.tree.up);
    }
    for (int i = 0; i < v.tree.nDown; ++i) {
      v.treeUpRecv[i] = recvEnd(r, v.tree.down[i]);
      v.treeDownSend[i] = sendEnd(r, v.tree.down[i]);
    }
    if (k_ - 1 <= kMaxFlatPeers) {
      for (int peer = 0; peer < k_; ++peer) {
        if (peer == r) continue;
        v.flatRecv[v.nFlat] = recvEnd(r, peer);
        v.flatSend[v.nFlat] = sendEnd(r, peer);
        v.nFlat += 1;
      }
      v.flatOwnAt = r;
    }
    AlgoViews& h = algos_[static_cast<size_t>(r)];
    if (exchangePlanned()) {
      ExchangeView& ex = h.exchange;
      ex.nranks = k_;
      ex.logical = exchange_.logical[static_cast<size_t>(r)];
      ex.physical = exchange_.physical.data();
      for (int slot = 0; slot < kExchangeSlots; ++slot) {
        const int hop = exchange_.hopRank(ex.logical, slot);
        if (hop < 0) continue;
        ex.send[slot] = sendEnd(r, hop);
        ex.recv[slot] = recvEnd(r, hop);
      }
      for (const core::RelayHop& hop : exchange_.relays) {
        if (hop.via != r) continue;
        const int from = exchange_.physical[static_cast<size_t>(hop.from)];
        const int to = exchange_.physical[static_cast<size_t>(hop.to)];
        ex.relays[ex.nRelays++] = RelayDuty{hop.slot, hop.from, hop.to, recvEnd(r, from), sendEnd(r, to)};
      }
      // Room for a few aligned pieces per rank only: the ReduceScatter cuts
      // its pieces smaller than a chunk.
      ex.scratch = scratch_[static_cast<size_t>(r)].data();
      ex.scratchBytes = scratch_[static_cast<size_t>(r)].size() * sizeof(uint64_t);
    }
    // 4 ranks: the hierarchical ring on 2 nodes of 2, the torus on a 2x2
    // grid of another shape; 3 ranks: a one-row torus (a ring).
    if (k_ == 4) {
      h.hier = hierView(r, {{0, 1}, {2, 3}});
      h.torus = hierView(r, {{0, 2}, {3, 1}});
    } else if (k_ == 3) {
      h.torus = hierView(r, {{2, 0, 1}});
    }
    v.algos = &h;
    return v;
  }

  // After the calls: every FIFO drained, both ends' saved positions equal to
  // the shared counters.
  // Steps the consumers read in place from the producers' inputs (direct reads).
  uint64_t directReads() {
    uint64_t n = 0;
    for (int from = 0; from < k_; ++from)
      for (int to = 0; to < k_; ++to)
        if (from != to) n += link(from, to).producer.directReads;
    return n;
  }

  void expectDrained() {
    for (int from = 0; from < k_; ++from)
      for (int to = 0; to < k_; ++to) {
        if (from == to) continue;
        Link& l = link(from, to);
        EXPECT_EQ(*l.producer.tail, *l.producer.head) << from << " -> " << to << ": steps left in the FIFO";
        EXPECT_EQ(l.producer.step, *l.producer.tail) << from << " -> " << to;
        EXPECT_EQ(l.consumer.step, *l.consumer.head) << from << " -> " << to;
        EXPECT_EQ(l.producer.ll.step, l.consumer.ll.step) << from << " -> " << to;
        EXPECT_EQ(l.consumer.ll.step, *l.consumer.ll.head) << from << " -> " << to;
        EXPECT_EQ(l.producer.ll128.step, l.consumer.ll128.step) << from << " -> " << to;
        EXPECT_EQ(l.consumer.ll128.step, *l.consumer.ll128.head) << from << " -> " << to;
      }
  }

 private:
  HierView hierView(int r, const std::vector<std::vector<int>>& nodes) {
    core::HierPlan plan;
    plan.nodes = nodes;
    const core::HierPlan::Place p = plan.placeOf(r);
    return HierView{static_cast<int32_t>(nodes.size()),
                    static_cast<int32_t>(nodes[0].size()),
                    p.node,
                    p.local,
                    recvEnd(r, p.intraPrev),
                    sendEnd(r, p.intraNext),
                    recvEnd(r, p.interPrev),
                    sendEnd(r, p.interNext)};
  }

  int k_;
  std::vector<std::unique_ptr<Link>> links_;
  std::vector<int32_t> ringOrder_;
  core::ExchangePlan exchange_;
  std::vector<std::vector<uint64_t>> scratch_;
  std::vector<AlgoViews> algos_;
};

// What a kernel does with one item (backend/cuda/kernels.cu, kernels.cuh).
template <typename Coop>
void runItem(Coop& coop, const ChannelView& view, const WorkItem& item) {
  if (item.kind == WorkItem::Kind::kP2p) return runSendRecv(coop, item.p2p, view.id);
  const CollWork& w = item.coll;
  if (isDataOnly(w.func)) return runDataOnly(coop, view, w);
  if (w.dtype == DataType::kFloat32 && w.op == RedOpKind::kSum)
    return runReducingOp<float, RedOpKind::kSum>(coop, view, w);
  if constexpr (!Coop::kHasDirect) {
    if (w.dtype == DataType::kInt32 && w.op == RedOpKind::kMax)
      return runReducingOp<int32_t, RedOpKind::kMax>(coop, view, w);
  }
  ADD_FAILURE() << "no kernel for dtype " << static_cast<int>(w.dtype) << " op " << static_cast<int>(w.op);
}

// One thread of rank r's team: the kernel's item loop.
template <typename Coop>
WaitFailureInfo runThread(Team& team, int t, const ChannelView& view, const std::vector<WorkItem>& items) {
  Coop coop(team, t);
  for (size_t i = 0; i < items.size() && !coop.failed(); ++i) {
    if (i > 0) coop.sync();  // the leader's write-back of FIFO positions, before every thread reloads them
    coop.setCallSignature(itemSignature(items[i]));
    runItem(coop, view, items[i]);
  }
  WaitFailureInfo info = coop.failure();
  if (info.kind == WaitFailure::kNone && coop.failed()) info.kind = WaitFailure::kAborted;
  return info;
}

inline WorkItem makeItem(const Case& c, int call, Buffers& b) {
  WorkItem item{};
  item.checkCalls = 1;
  if (c.func == Func::kSendRecv) {
    item.kind = WorkItem::Kind::kP2p;
    item.p2p.sendbuff = reinterpret_cast<const char*>(b.send.data());
    item.p2p.recvbuff = reinterpret_cast<char*>(b.recv.data());
    item.p2p.sendBytes = item.p2p.recvBytes = c.count * static_cast<uint64_t>(elemBytes(c));
    return item;
  }
  item.kind = WorkItem::Kind::kColl;
  CollWork& w = item.coll;
  w.func = c.func;
  w.algo = c.algo;
  w.proto = c.proto;
  w.dtype = isDataOnly(c.func) ? DataType::kUint8 : c.dtype;
  w.op = c.dtype == DataType::kInt32 ? RedOpKind::kMax : RedOpKind::kSum;
  w.direct = c.direct ? 1 : 0;
  w.directRead = c.direct && (c.func == Func::kAllReduce || c.func == Func::kReduceScatter) ? 1 : 0;
  w.root = c.root;
  w.seq = static_cast<uint32_t>(call + 1);
  w.recvbuff = b.recv.data();
  w.sendbuff = b.send.data();
  w.count = c.count;
  w.channelStart = 0;
  w.channelCount = c.count;
  const uint64_t eb = static_cast<uint64_t>(elemBytes(c));
  w.chunkElems = kChunkBytes / eb;
  w.alignElems = kAlignBytes / eb;
  return item;
}

template <typename Coop>
void runCaseWith(const Case& c) {
  SCOPED_TRACE(c.str());
  Mesh mesh(c);
  if (c.algo == Algo::kButterfly || c.algo == Algo::kHalvingDoubling) {
    ASSERT_TRUE(mesh.exchangePlanned());
    if (c.brokenLinks) {
      ASSERT_GT(mesh.relays(), 0) << "the plan relays nothing";
    }
  }
  const size_t eb = static_cast<size_t>(elemBytes(c));
  // buffers[r][call]
  std::vector<std::vector<Buffers>> buffers(static_cast<size_t>(c.k), std::vector<Buffers>(kCalls));
  std::vector<std::vector<WorkItem>> items(static_cast<size_t>(c.k));
  std::vector<ChannelView> views;
  for (int r = 0; r < c.k; ++r) {
    views.push_back(mesh.view(r));
    for (int call = 0; call < kCalls; ++call) {
      Buffers& b = buffers[static_cast<size_t>(r)][static_cast<size_t>(call)];
      b.recv.assign(recvElems(c) * eb, 0xA5);
      b.send.assign(sendElems(c) * eb, 0);
      for (uint64_t i = 0; i < sendElems(c); ++i) store(c, b.send, i, inputValue(c, call, r, i));
      WorkItem item = makeItem(c, call, b);
      if (r == c.mismatchRank) item.coll.seq += 100;
      if (r == c.readsOff) item.coll.directRead = 0;
      if (c.func == Func::kSendRecv) {  // a shift: to the next rank, from the previous one
        item.p2p.sendEnd = mesh.sendEnd(r, (r + 1) % c.k);
        item.p2p.recvEnd = mesh.recvEnd(r, (r + c.k - 1) % c.k);
      }
      if (c.inPlace) {
        // The input where the output goes: all of it, or this rank's
        // segment of an AllGather.
        const uint64_t at = c.func == Func::kAllGather ? static_cast<uint64_t>(r) * c.count * eb : 0;
        std::memcpy(b.recv.data() + at, b.send.data(), b.send.size());
        item.coll.sendbuff = b.recv.data() + at;
      }
      items[static_cast<size_t>(r)].push_back(item);
    }
  }
  std::atomic<uint32_t> abortFlag{0};
  std::vector<std::unique_ptr<Team>> teams;
  for (int r = 0; r < c.k; ++r) {
    teams.push_back(std::make_unique<Team>(c.team, &abortFlag, kTimeoutNs, true));
    teams.back()->sharedWay = c.sharedWay;
    teams.back()->refuseEvery = c.refuseEvery;
    teams.back()->sharedReads = r != c.cannotReach;
  }
  std::vector<WaitFailureInfo> failures(static_cast<size_t>(c.k * c.team));
  std::vector<std::thread> threads;
  for (int r = 0; r < c.k; ++r)
    for (int t = 0; t < c.team; ++t)
      threads.emplace_back([&, r, t] {
        failures[static_cast<size_t>(r * c.team + t)] = runThread<Coop>(
            *teams[static_cast<size_t>(r)], t, views[static_cast<size_t>(r)], items[static_cast<size_t>(r)]);
      });
  for (std::thread& th : threads) th.join();
  if (c.mismatchRank >= 0) {
    // Someone saw the other call; every thread of every team stopped through
    // its waits (aborted or mismatched), none at a barrier that timed out.
    int mismatches = 0;
    for (const WaitFailureInfo& f : failures) {
      mismatches += f.kind == WaitFailure::kMismatch ? 1 : 0;
      EXPECT_TRUE(f.kind == WaitFailure::kMismatch || f.kind == WaitFailure::kAborted || f.kind == WaitFailure::kNone)
          << "failure kind " << static_cast<int>(f.kind);
    }
    EXPECT_GT(mismatches, 0);
    for (const auto& team : teams) EXPECT_FALSE(team->broken()) << "a barrier timed out";
    return;
  }
  for (int r = 0; r < c.k; ++r)
    for (int t = 0; t < c.team; ++t) {
      const WaitFailureInfo& f = failures[static_cast<size_t>(r * c.team + t)];
      ASSERT_EQ(f.kind, WaitFailure::kNone)
          << "rank " << r << " thread " << t << " failed (" << static_cast<int>(f.kind) << ") waiting on rank "
          << f.site.peer << (f.site.isSend ? " (send)" : " (recv)");
    }
  for (int r = 0; r < c.k; ++r)
    for (int call = 0; call < kCalls; ++call) {
      const Buffers& b = buffers[static_cast<size_t>(r)][static_cast<size_t>(call)];
      int bad = 0;
      for (uint64_t i = 0; i < recvElems(c); ++i) {
        int32_t want = 0;
        if (!expected(c, call, r, i, &want)) break;
        const int32_t got = load(c, b.recv, i);
        if (got != want && bad++ < 3)
          ADD_FAILURE() << "rank " << r << " call " << call << " element " << i << ": got " << got << ", want " << want;
      }
      ASSERT_EQ(bad, 0) << "rank " << r << " call " << call << ": " << bad << " wrong elements of " << recvElems(c);
    }
  mesh.expectDrained();
  // Ring AllReduce and ReduceScatter in direct mode read every rank's first
  // steps in place, between "processes" too, except on the links whose
  // consumer cannot reach the input or whose producer does not offer it.
  const bool reads = c.func == Func::kAllReduce || c.func == Func::kReduceScatter;
  if (c.direct && reads && c.algo == Algo::kRing && c.count >= static_cast<uint64_t>(c.k)) {
    EXPECT_GT(mesh.directReads(), 0u) << "no step was read in place";
    for (int from = 0; from < c.k; ++from)
      for (int to = 0; to < c.k; ++to)
        if (from != to && (to == c.cannotReach || from == c.readsOff)) {
          EXPECT_EQ(mesh.link(from, to).producer.directReads, 0u)
              << from << " -> " << to << ": read in place where it was not to be";
        }
  }
  // Enough slices that some writes were refused (ReduceScatter writes into
  // no peer's buffer: it only reads).
  if (c.refuseEvery > 0 && c.count >= 1000 && c.func != Func::kReduceScatter) {
    int most = 0;
    for (const auto& team : teams) most = std::max(most, team->crossWrites);
    EXPECT_GE(most, c.refuseEvery) << "no cross-memory write was refused";
  }
}

inline void runCase(const Case& c) {
  if (c.direct)
    runCaseWith<TeamCoopDirect>(c);
  else
    runCaseWith<TeamCoop>(c);
}

// Element counts: a few elements (fewer than the team), not a multiple of
// any team size, across LL steps, slots and chunks.
const uint64_t kCounts[] = {1, 7, 161, 1203};
const int kTeams[] = {1, 3, 4};

inline void sweep(Func func, Algo algo, Proto proto, DataType dtype, std::initializer_list<int> ranks,
                  bool inPlace = false) {
  for (int k : ranks)
    for (int team : kTeams)
      for (uint64_t count : kCounts) {
        Case c{func, algo, proto, dtype, k, team, count, inPlace};
        c.root = k - 1;
        runCase(c);
        if (::testing::Test::HasFatalFailure()) return;
      }
}

}  // namespace weft::device::team_cases
