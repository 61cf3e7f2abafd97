// Work descriptors: what the planner on the host hands to a channel's
// executor (a host worker now, a CUDA block later). Plain, trivially copyable
// data; pointers are valid where the channel runs.
#pragma once

#include "device/exchange.h"
#include "device/portable.h"
#include "device/reduce_ops.h"
#include "device/step_fifo.h"

namespace weft::device {

enum class Func : uint8_t { kAllReduce = 0, kAllGather, kReduceScatter, kBroadcast, kReduce, kSendRecv, kCount };
// kButterfly and kHalvingDoubling: pairwise exchanges (exchange.h);
// kHierRing: hierarchical ring (hier_ring.h); kTorus2D: 2D torus (torus.h).
enum class Algo : uint8_t { kRing = 0, kTree, kOneShot, kButterfly, kHalvingDoubling, kHierRing, kTorus2D, kCount };
enum class Proto : uint8_t { kSimple = 0, kLL, kLL128, kCount };

// Element types, numbered as ncclDataType_t.
enum class DataType : uint8_t {
  kInt8 = 0,
  kUint8,
  kInt32,
  kUint32,
  kInt64,
  kUint64,
  kFloat16,
  kFloat32,
  kFloat64,
  kBfloat16,
  kFp8E4M3,
  kFp8E5M2,
  kCount
};

// Bytes per element of each DataType.
WEFT_HD constexpr int dataTypeBytes(DataType type) {
  switch (type) {
    case DataType::kFloat16:
    case DataType::kBfloat16: return 2;
    case DataType::kInt32:
    case DataType::kUint32:
    case DataType::kFloat32: return 4;
    case DataType::kInt64:
    case DataType::kUint64:
    case DataType::kFloat64: return 8;
    default: return 1;
  }
}

// One channel's ring: this rank's position and neighbours, and the whole
// order (ring position -> rank) for algorithms that index by position.
struct RingView {
  int32_t nranks;
  int32_t index;             // this rank's position
  int32_t prev;              // rank we receive from
  int32_t next;              // rank we send to
  const int32_t* userRanks;  // nranks entries
};

constexpr int kMaxTreeChildren = 3;
// One-shot collectives talk to every other rank of a node at once; a verb
// combines at most kMaxSrcs (4) inputs, so nodes of up to 4 ranks.
constexpr int kMaxFlatPeers = 3;

// One channel's tree around this rank.
struct TreeView {
  int32_t up;                      // parent rank; -1 at the root
  int32_t down[kMaxTreeChildren];  // children; -1 past nDown
  int32_t nDown;
  int32_t depth;  // levels of the whole tree (for chunk sizing)
};

// Hierarchical ring (hier_ring.h): this rank's place among N nodes of m
// ranks and the FIFOs of its two rings. The 2D torus (torus.h) uses it for
// R rows of C ranks (nodes = R, perNode = C); a ring of one rank has no FIFOs.
struct HierView {
  int32_t nodes;       // N
  int32_t perNode;     // m
  int32_t node;        // this rank's node
  int32_t local;       // this rank's index in its node
  FifoEnd* intraRecv;  // from local - 1 of this node
  FifoEnd* intraSend;  // to local + 1
  FifoEnd* interRecv;  // from the same local index on node - 1
  FifoEnd* interSend;  // to node + 1
};

// Views of the algorithms whose FIFOs are connected on first use (the
// exchanges, the hierarchical ring, the 2D torus): exchange.nranks /
// hier.nodes / torus.nodes are 0 until then. On the cuda backend a copy in
// device memory with the FIFO ends' device mirrors (core/cuda_backend.cc).
struct AlgoViews {
  ExchangeView exchange;
  HierView hier;
  HierView torus;  // nodes 0 until connected
};

struct ChannelView {
  int32_t id;
  int32_t rank;
  RingView ring;
  FifoEnd* ringRecv;  // from ring.prev
  FifoEnd* ringSend;  // to ring.next
  TreeView tree;
  // Tree FIFOs (null where the tree has no such peer): data goes up from
  // children to the parent and comes down from the parent to the children.
  FifoEnd* treeUpRecv[kMaxTreeChildren];    // from each child
  FifoEnd* treeUpSend;                      // to the parent
  FifoEnd* treeDownRecv;                    // from the parent
  FifoEnd* treeDownSend[kMaxTreeChildren];  // to each child
  // Every other rank, in rank order (one-shot algorithms); nFlat 0 when this
  // channel has no such connections.
  int32_t nFlat;
  int32_t flatOwnAt;  // this rank's position among the flat peers' ranks
  FifoEnd* flatRecv[kMaxFlatPeers];
  FifoEnd* flatSend[kMaxFlatPeers];
  // Null on the cuda backend until one of them is connected on the channel.
  const AlgoViews* algos;
};

// One collective's share on one channel. For AllReduce, Broadcast and Reduce
// the channel owns elements [channelStart, channelStart + channelCount) of
// the buffers; for AllGather and ReduceScatter it owns that range of every
// rank's segment of `count` elements. Data-only collectives (AllGather,
// Broadcast) are planned in bytes: dtype kUint8, counts in bytes.
struct CollWork {
  Func func;
  Algo algo;
  Proto proto;
  DataType dtype;
  RedOpKind op;
  uint8_t scalarIsPointer;  // PreMulSum: scalar read through scalarPtr at run time
  uint8_t direct;           // 1: ring verbs write into the peers' user buffers where a link allows (direct mode)
  uint8_t directRead;       // 1 (with direct): ring AllReduce's first sends let the next rank read the input in place
  int32_t root;             // rank, for Broadcast and Reduce
  uint32_t seq;             // the communicator's collective count at this call (call signatures)
  const void* sendbuff;
  void* recvbuff;
  uint64_t count;
  uint64_t channelStart;
  uint64_t channelCount;
  uint64_t chunkElems;  // ring pipeline unit, a multiple of alignElems
  uint64_t alignElems;  // channel and chunk boundaries are multiples of this
  uint64_t scalarBits;  // PreMulSum immediate (the T's bytes), or SumPostDiv divisor
  const void* scalarPtr;
};

// A point-to-point exchange on one channel: send to one peer and receive
// from another (either side may be absent), progressed together so that
// matched pairs never wait on each other. Bytes, not elements.
struct P2pWork {
  FifoEnd* sendEnd;  // null: nothing to send
  FifoEnd* recvEnd;  // null: nothing to receive
  const char* sendbuff;
  char* recvbuff;
  uint64_t sendBytes;
  uint64_t recvBytes;
};

// One entry of a channel's work list.
struct WorkItem {
  enum class Kind : uint8_t { kColl, kP2p };
  Kind kind;
  uint8_t checkCalls;  // steps carry and check call signatures (WEFT_CHECK_CALLS)
  CollWork coll;       // kColl
  P2pWork p2p;         // kP2p
};

// What this rank's steps of `item` carry and expect (device/signature.h):
// the collective's own fields, so nothing is stored twice; for send/recv,
// the receive's size (a send signs its own size).
WEFT_HD CallSignature itemSignature(const WorkItem& item) {
  if (!item.checkCalls) return CallSignature{0, 0};
  if (item.kind == WorkItem::Kind::kP2p)
    return CallSignature{packCallWord({static_cast<int>(Func::kSendRecv), 0, 0, 0, -1, 0}), item.p2p.recvBytes};
  const CollWork& w = item.coll;
  const bool rooted = w.func == Func::kBroadcast || w.func == Func::kReduce;
  const bool reducing = w.func != Func::kAllGather && w.func != Func::kBroadcast;
  return CallSignature{
      packCallWord({static_cast<int>(w.func), static_cast<int>(w.dtype), reducing ? static_cast<int>(w.op) : 0,
                    static_cast<int>(w.algo), rooted ? w.root : -1, w.seq}),
      w.count};
}

}  // namespace weft::device
