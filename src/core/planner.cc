#include "core/planner.h"

#include <algorithm>
#include <initializer_list>

#include "common/log.h"
#include "core/datatypes.h"
#include "device/ll128_line.h"
#include "tuning/tuner_plugin.h"
#include "tuning/tuning.h"

namespace weft::core {
namespace {

using device::Func;

bool isDataOnly(Func func) { return func == Func::kAllGather || func == Func::kBroadcast; }

device::CollWork baseWork(const PlanInputs& in, const CollTask& task, uint64_t elemSize) {
  device::CollWork work{};
  work.func = task.func;
  work.algo = device::Algo::kRing;
  work.proto = device::Proto::kSimple;
  work.dtype = isDataOnly(task.func) ? device::DataType::kUint8 : static_cast<device::DataType>(task.dtype);
  work.op = task.op.kind;
  work.scalarIsPointer = task.op.scalarIsPointer ? 1 : 0;
  work.scalarBits = task.op.scalarBits;
  work.scalarPtr = task.op.scalarPtr;
  work.root = task.root;
  work.sendbuff = task.sendbuff;
  work.recvbuff = task.recvbuff;
  work.count = isDataOnly(task.func) ? task.count * typeSize(task.dtype) : task.count;
  work.alignElems = std::max<uint64_t>(1, kAlignBytes / elemSize);
  work.chunkElems = static_cast<uint64_t>(in.stepBytes) * static_cast<uint64_t>(in.chunkSteps) / elemSize;
  return work;
}

device::KernelKey keyOf(const CollTask& task) {
  if (isDataOnly(task.func)) return device::KernelKey{true, device::DataType::kUint8, device::RedOpKind::kSum};
  return device::KernelKey{false, static_cast<device::DataType>(task.dtype), task.op.kind};
}

bool sameKernel(const device::KernelKey& a, const device::KernelKey& b) {
  return a.dataOnly == b.dataOnly && (a.dataOnly || (a.dtype == b.dtype && a.op == b.op));
}

// Starts a batch for `key`, or continues the last one if its kernel matches.
void beginBatch(Plan* plan, const device::KernelKey& key) {
  if (!plan->batches.empty() && sameKernel(plan->batches.back().key, key)) return;
  Batch& batch = plan->batches.emplace_back();
  batch.key = key;
  for (size_t c = 0; c < plan->channels.size(); ++c)
    batch.begin[c] = batch.end[c] = static_cast<uint32_t>(plan->channels[c].size());
}

void endBatch(Plan* plan) {
  Batch& batch = plan->batches.back();
  for (size_t c = 0; c < plan->channels.size(); ++c) batch.end[c] = static_cast<uint32_t>(plan->channels[c].size());
}

tuning::CollKind collKind(Func func) {
  switch (func) {
    case Func::kAllGather: return tuning::CollKind::kAllGather;
    case Func::kReduceScatter: return tuning::CollKind::kReduceScatter;
    case Func::kBroadcast: return tuning::CollKind::kBroadcast;
    case Func::kReduce: return tuning::CollKind::kReduce;
    default: return tuning::CollKind::kAllReduce;
  }
}

// The cost model's name of a planned algorithm.
tuning::Algorithm modelAlgo(device::Algo algo) {
  switch (algo) {
    case device::Algo::kTree: return tuning::Algorithm::kTree;
    case device::Algo::kOneShot: return tuning::Algorithm::kOneShot;
    case device::Algo::kButterfly: return tuning::Algorithm::kButterfly;
    case device::Algo::kHalvingDoubling: return tuning::Algorithm::kHalvingDoubling;
    case device::Algo::kHierRing: return tuning::Algorithm::kHierarchicalRing;
    case device::Algo::kTorus2D: return tuning::Algorithm::kTorus2D;
    default: return tuning::Algorithm::kRing;
  }
}

const tuning::TuningFigures& figuresOf(const PlanInputs& in) {
  static const tuning::TuningFigures kHost = tuning::defaultFigures(true);
  return in.figures ? *in.figures : kHost;
}

tuning::LinkFigures linksOf(const PlanInputs& in, tuning::Protocol proto) {
  return tuning::modelLinks(figuresOf(in), in.intraLink, static_cast<int>(proto), in.oversubscribed);
}

bool llPossibleFor(const PlanInputs& in, const device::CollWork& work);
// LL128's conditions but the algorithm's (below).
bool ll128KernelFor(const PlanInputs& in, const device::CollWork& work);

// Whether the planner may pick a line protocol (LL or LL128) for this call
// by itself: possible (LL128: links that keep its lines whole and a kernel
// for the op), on a backend that picks line protocols, and NCCL_PROTO
// allowing it and Simple. LL128's built-in figures never win (measured on
// the host, tuning/figures.cc); a tuning file with other figures can.
bool lineChoosable(const PlanInputs& in, const device::CollWork& work, tuning::Protocol proto) {
  static const tuning::ProtoFilter kAny;
  const tuning::ProtoFilter& f = in.protoFilter ? *in.protoFilter : kAny;
  const tuning::CollKind coll = collKind(work.func);
  const bool possible = proto == tuning::Protocol::kLL128 ? ll128KernelFor(in, work) : llPossibleFor(in, work);
  return possible && in.llByDefault && f.allows(coll, proto) && f.allows(coll, tuning::Protocol::kSimple);
}

// Whether the backend may run one of `algos` (one-shot, exchanges,
// hierarchical ring, torus) for this call: a kernel for its op, and NCCL_ALGO naming one of
// them where the backend asks for that (PlanInputs::extraNamedOnly).
bool extraOffered(const PlanInputs& in, const tuning::AlgoFilter& filter, const device::CollWork& work,
                  std::initializer_list<tuning::Algorithm> algos) {
  if (in.extraSumOnly && !isDataOnly(work.func) && work.op != device::RedOpKind::kSum) return false;
  if (!in.extraNamedOnly) return true;
  for (tuning::Algorithm a : algos)
    if (filter.names(collKind(work.func), a)) return true;
  return false;
}

// The algorithm by the cost model (the same choice on every rank: its
// inputs are agreed), priced under LL too where LL may be chosen.
tuning::Choice chooseAlgo(const PlanInputs& in, int64_t totalBytes, device::CollWork* work) {
  static const tuning::AlgoFilter kAll;
  const tuning::AlgoFilter& filter = in.algoFilter ? *in.algoFilter : kAll;
  const tuning::LinkFigures simple = linksOf(in, tuning::Protocol::kSimple);
  const tuning::LinkFigures ll = linksOf(in, tuning::Protocol::kLL);
  const tuning::LinkFigures ll128 = linksOf(in, tuning::Protocol::kLL128);
  using tuning::Algorithm;
  // NCCL_PROTO without Simple: an algorithm with no form under the
  // protocols left (the exchanges, hierarchical ring and torus run Simple
  // alone; one-shot Simple and LL; trees not LL128 on the cuda backend)
  // would run a protocol the user excluded, so it is not offered unless
  // NCCL_ALGO names it.
  static const tuning::ProtoFilter kAnyProto;
  const tuning::ProtoFilter& protos = in.protoFilter ? *in.protoFilter : kAnyProto;
  const tuning::CollKind coll = collKind(work->func);
  const bool simpleOk = protos.allows(coll, tuning::Protocol::kSimple);
  const bool llOk = llPossibleFor(in, *work) && protos.allows(coll, tuning::Protocol::kLL);
  const bool ll128Ok = ll128KernelFor(in, *work) && protos.allows(coll, tuning::Protocol::kLL128);
  auto runs = [&](bool hasLL, bool hasLL128, std::initializer_list<Algorithm> algos) {
    if (simpleOk || (hasLL && llOk) || (hasLL128 && ll128Ok)) return true;
    for (Algorithm a : algos)
      if (filter.names(coll, a)) return true;
    return false;
  };
  const bool exchange = in.exchangeAvailable &&
                        extraOffered(in, filter, *work, {Algorithm::kButterfly, Algorithm::kHalvingDoubling}) &&
                        runs(false, false, {Algorithm::kButterfly, Algorithm::kHalvingDoubling});
  const bool hier = in.hierAvailable && extraOffered(in, filter, *work, {Algorithm::kHierarchicalRing}) &&
                    runs(false, false, {Algorithm::kHierarchicalRing});
  const bool torus = in.torusAvailable && extraOffered(in, filter, *work, {Algorithm::kTorus2D}) &&
                     runs(false, false, {Algorithm::kTorus2D});
  const bool oneShot = in.oneShotAvailable && extraOffered(in, filter, *work, {Algorithm::kOneShot}) &&
                       runs(true, false, {Algorithm::kOneShot});
  const bool trees = in.treesAvailable && runs(true, in.ll128Trees, {Algorithm::kTree});
  const tuning::Choice choice = tuning::chooseAlgorithm(
      collKind(work->func), totalBytes, in.shape, simple, filter, trees, oneShot, exchange, hier,
      torus ? in.torus : tuning::TorusShape{0, 0},
      tuning::LineLinks{lineChoosable(in, *work, tuning::Protocol::kLL) ? &ll : nullptr,
                        lineChoosable(in, *work, tuning::Protocol::kLL128) ? &ll128 : nullptr, in.ll128Trees});
  if (log::enabled(log::Level::kInfo, log::kTuning))
    WEFT_INFO(log::kTuning, "%s %lld bytes: %s (%s; %s)", tuning::collKindName(collKind(work->func)),
              static_cast<long long>(totalBytes), tuning::algorithmName(choice.algo),
              tuning::describeEstimates(choice).c_str(), choice.reason);
  switch (choice.algo) {
    case tuning::Algorithm::kTree: work->algo = device::Algo::kTree; break;
    case tuning::Algorithm::kOneShot: work->algo = device::Algo::kOneShot; break;
    case tuning::Algorithm::kButterfly: work->algo = device::Algo::kButterfly; break;
    case tuning::Algorithm::kHalvingDoubling: work->algo = device::Algo::kHalvingDoubling; break;
    case tuning::Algorithm::kHierarchicalRing: work->algo = device::Algo::kHierRing; break;
    case tuning::Algorithm::kTorus2D: work->algo = device::Algo::kTorus2D; break;
    default: break;
  }
  return choice;
}

void addOnce(std::vector<int>* list, int c) {
  if (std::find(list->begin(), list->end(), c) == list->end()) list->push_back(c);
}

void useLines(const PlanInputs& in, uint64_t elemSize, device::Proto proto, device::CollWork* work);

// Whether this call may run LL: links within a node, and a kernel for it.
bool llPossibleFor(const PlanInputs& in, const device::CollWork& work) {
  return in.llPossible && (!in.llSumOnly || isDataOnly(work.func) || work.op == device::RedOpKind::kSum);
}

// LL128: LL's conditions, links that keep a 128-byte store whole, a kernel
// for it (the sum and the data-only calls, on both backends: run_work.h) and
// an algorithm the backend runs under it (rings; trees too on the host, as
// in NCCL).
bool ll128KernelFor(const PlanInputs& in, const device::CollWork& work) {
  return in.ll128Possible && llPossibleFor(in, work) && (isDataOnly(work.func) || work.op == device::RedOpKind::kSum);
}

bool ll128PossibleFor(const PlanInputs& in, const device::CollWork& work) {
  return ll128KernelFor(in, work) &&
         (work.algo == device::Algo::kRing || (in.ll128Trees && work.algo == device::Algo::kTree));
}

// Simple, LL or LL128 (the same choice on every rank). Under LL and LL128 a
// chunk spans as many steps as a Simple chunk spans slots, so a ring rank's
// sends of one chunk still fit in the peer's FIFO without waiting for it.
void chooseProto(const PlanInputs& in, const tuning::Choice& algoChoice, int64_t totalBytes, uint64_t elemSize,
                 device::CollWork* work) {
  static const tuning::ProtoFilter kAny;
  // The pairwise exchanges and the hierarchical ring are written for Simple only.
  if (work->algo != device::Algo::kRing && work->algo != device::Algo::kTree && work->algo != device::Algo::kOneShot)
    return;
  tuning::ProtoInputs pin;
  pin.coll = collKind(work->func);
  pin.algo = modelAlgo(work->algo);
  pin.bytes = totalBytes;
  pin.llPossible = llPossibleFor(in, *work);
  pin.ll128Possible = ll128PossibleFor(in, *work);
  pin.llByDefault = in.llByDefault;
  pin.simpleUs = algoChoice.estimateUs[static_cast<int>(pin.algo)];
  pin.llUs = algoChoice.llUs[static_cast<int>(pin.algo)];
  pin.ll128Us = algoChoice.ll128Us[static_cast<int>(pin.algo)];
  const tuning::ProtoChoice choice = tuning::chooseProtocol(pin, in.protoFilter ? *in.protoFilter : kAny);
  WEFT_INFO(log::kTuning, "%s %lld bytes, %s: protocol %s (%s)", tuning::collKindName(pin.coll),
            static_cast<long long>(totalBytes), tuning::algorithmName(pin.algo), tuning::protocolName(choice.proto),
            choice.reason);
  if (choice.proto == tuning::Protocol::kLL) useLines(in, elemSize, device::Proto::kLL, work);
  if (choice.proto == tuning::Protocol::kLL128) useLines(in, elemSize, device::Proto::kLL128, work);
}

// Under LL (LL128) a chunk spans as many LL (LL128) steps as a Simple chunk
// spans slots: the payload of a step is half (15/16) of its line bytes.
void useLines(const PlanInputs& in, uint64_t elemSize, device::Proto proto, device::CollWork* work) {
  work->proto = proto;
  const uint64_t payload = proto == device::Proto::kLL
                               ? static_cast<uint64_t>(device::llStepBytesFor(in.stepBytes)) / 2
                               : static_cast<uint64_t>(device::ll128StepBytesFor(in.stepBytes)) /
                                     device::kLL128LineBytes * device::kLL128PayloadBytes;
  const uint64_t chunk = payload * static_cast<uint64_t>(in.chunkSteps) / elemSize;
  work->chunkElems = std::max<uint64_t>(work->alignElems, chunk / work->alignElems * work->alignElems);
}

// The model's estimate of `a` under a line protocol for the tuner's table
// (the Simple one when the model cannot price it).
double lineUs(const PlanInputs& in, tuning::Protocol proto, tuning::CollKind coll, tuning::Algorithm a,
              int64_t totalBytes, double simpleUs) {
  const tuning::TorusShape torus = in.torusAvailable ? in.torus : tuning::TorusShape{0, 0};
  const tuning::CommShape shape{in.shape.nranks, in.shape.nnodes, in.shape.ranksPerNode, torus.rows, torus.cols};
  const tuning::AlgoEstimate e = tuning::estimateCollective(coll, a, totalBytes, shape, linksOf(in, proto));
  return e.applies ? e.us : simpleUs;
}

// The model's time of a call as planned: the algorithm and protocol chosen
// (by the model, NCCL_ALGO and NCCL_PROTO, or a tuner plugin).
double plannedUs(const PlanInputs& in, const tuning::Choice& choice, const device::CollWork& work, int64_t totalBytes) {
  const tuning::Algorithm a = modelAlgo(work.algo);
  const tuning::CollKind coll = collKind(work.func);
  const int i = static_cast<int>(a);
  const double simple =
      choice.estimateUs[i] >= 0 ? choice.estimateUs[i] : lineUs(in, tuning::Protocol::kSimple, coll, a, totalBytes, 0);
  if (work.proto == device::Proto::kLL)
    return choice.llUs[i] >= 0 ? choice.llUs[i] : lineUs(in, tuning::Protocol::kLL, coll, a, totalBytes, simple);
  if (work.proto == device::Proto::kLL128)
    return choice.ll128Us[i] >= 0 ? choice.ll128Us[i]
                                  : lineUs(in, tuning::Protocol::kLL128, coll, a, totalBytes, simple);
  return simple;
}

// Bytes over a local copy's bandwidth, us.
double copyUs(const PlanInputs& in, double bytes) {
  return bytes / (figuresOf(in).get(tuning::Figure::kCopyGBs) * 1e3);
}

// A group's sends and receives run side by side: the slowest, each one hop
// of its link (within the node or across), a copy for self.
double peersUs(const PlanInputs& in, const std::vector<P2pTask>& p2ps) {
  const tuning::LinkFigures links = linksOf(in, tuning::Protocol::kSimple);
  auto nodeOf = [&](int r) {
    return in.nodeOf && static_cast<size_t>(r) < in.nodeOf->size() ? (*in.nodeOf)[static_cast<size_t>(r)] : 0;
  };
  double slowest = 0;
  for (const P2pTask& t : p2ps) {
    const double bytes = static_cast<double>(t.bytes);
    double us = copyUs(in, bytes);
    if (t.peer != in.rank)
      us = nodeOf(t.peer) != nodeOf(in.rank) ? links.interLatUs + bytes / (links.interGBs * 1e3)
                                             : links.intraLatUs + bytes / (links.intraGBs * 1e3);
    slowest = std::max(slowest, us);
  }
  return slowest;
}

// A tuner plugin (NCCL_TUNER_PLUGIN) is offered Weft's estimates for the
// combinations NCCL's cost table has (Ring and Tree under Simple, LL and
// LL128, where possible and allowed) and may pick one of them and the
// channel count.
// Every rank asks its own copy: a plugin must answer alike on every rank,
// as under NCCL (docs/tuning.md says what happens when it does not).
void askTuner(const PlanInputs& in, const tuning::Choice& choice, int64_t totalBytes, uint64_t elemSize,
              uint64_t simpleChunk, device::CollWork* work, int* nch) {
  static const tuning::AlgoFilter kAllAlgos;
  static const tuning::ProtoFilter kAnyProto;
  const tuning::AlgoFilter& algos = in.algoFilter ? *in.algoFilter : kAllAlgos;
  const tuning::ProtoFilter& protos = in.protoFilter ? *in.protoFilter : kAnyProto;
  const tuning::CollKind coll = collKind(work->func);
  tuning::TunerCosts offered;
  for (tuning::Algorithm a : {tuning::Algorithm::kRing, tuning::Algorithm::kTree}) {
    const double us = choice.estimateUs[static_cast<int>(a)];
    if (us < 0.0 || !algos.allows(coll, a)) continue;
    if (protos.allows(coll, tuning::Protocol::kSimple)) offered.offer(a, tuning::Protocol::kSimple, us);
    if (llPossibleFor(in, *work) && protos.allows(coll, tuning::Protocol::kLL))
      offered.offer(a, tuning::Protocol::kLL, lineUs(in, tuning::Protocol::kLL, coll, a, totalBytes, us));
    const bool ll128Runs = a == tuning::Algorithm::kRing || in.ll128Trees;
    if (ll128Runs && ll128KernelFor(in, *work) && protos.allows(coll, tuning::Protocol::kLL128))
      offered.offer(a, tuning::Protocol::kLL128, lineUs(in, tuning::Protocol::kLL128, coll, a, totalBytes, us));
  }
  const tuning::TunerAnswer answer = in.tuner->ask(coll, static_cast<size_t>(totalBytes), in.pipeOps, offered);
  if (answer.nChannels > 0) *nch = std::min(answer.nChannels, in.channels);
  if (!answer.decided) return;
  work->algo = answer.algo == tuning::Algorithm::kTree ? device::Algo::kTree : device::Algo::kRing;
  work->proto = device::Proto::kSimple;
  work->chunkElems = simpleChunk;
  if (answer.proto == tuning::Protocol::kLL) useLines(in, elemSize, device::Proto::kLL, work);
  if (answer.proto == tuning::Protocol::kLL128) useLines(in, elemSize, device::Proto::kLL128, work);
  WEFT_INFO(log::kTuning, "%s %lld bytes: tuner %s chose %s, %s, %d channels", tuning::collKindName(coll),
            static_cast<long long>(totalBytes), in.tuner->name().c_str(), tuning::algorithmName(answer.algo),
            tuning::protocolName(answer.proto), *nch);
}

// Direct mode (ring AllReduce, AllGather, Broadcast under Simple, large; and
// ReduceScatter where the backend reads in place, its only direct verb):
// decided from inputs every rank shares, so both ends of every link agree.
// Whether this rank's inputs may be read (directRead) is its own choice.
void chooseDirect(const PlanInputs& in, int64_t totalBytes, device::CollWork* work) {
  const bool reads = work->func == Func::kAllReduce || work->func == Func::kReduceScatter;
  const bool ringColl = work->func == Func::kAllReduce || work->func == Func::kAllGather ||
                        work->func == Func::kBroadcast || (work->func == Func::kReduceScatter && in.readsInPlace);
  const int64_t minBytes = figuresOf(in).directMinBytes(in.intraLink, collKind(work->func));
  if (!in.directPossible || !ringColl || work->algo != device::Algo::kRing || work->proto != device::Proto::kSimple ||
      totalBytes < minBytes)
    return;
  work->direct = 1;
  work->directRead = in.directRead && reads ? 1 : 0;
  const char* how =
      work->func == Func::kReduceScatter
          ? (work->directRead
                 ? "the next rank reads this rank's input in place where reachable"
                 : "this rank's input copied, WEFT_DIRECT_READ=0; the previous rank's may be read in place")
          : (work->directRead ? "ranks write into each other's buffers, and read each other's inputs "
                                "in place where reachable"
                              : "ranks write into each other's buffers");
  WEFT_INFO(log::kTuning, "%s %lld bytes: direct from %lld bytes (%s)", tuning::collKindName(collKind(work->func)),
            static_cast<long long>(totalBytes), static_cast<long long>(minBytes), how);
}

// Tree chunks: small enough that the pipeline fills the tree's 2 x depth
// hops, never above the ring chunk, always a multiple of the alignment.
uint64_t treeChunk(const PlanInputs& in, const device::CollWork& work) {
  const uint64_t hops = 2 * static_cast<uint64_t>(std::max(1, in.shape.treeDepth));
  const uint64_t wanted = device::roundUp(device::divUp<uint64_t>(work.channelCount, hops), work.alignElems);
  return std::max<uint64_t>(work.alignElems, std::min<uint64_t>(work.chunkElems, wanted));
}

void planColl(const PlanInputs& in, const CollTask& task, uint64_t seq, Plan* plan) {
  const uint64_t elemSize = isDataOnly(task.func) ? 1 : typeSize(task.dtype);
  device::CollWork work = baseWork(in, task, elemSize);
  if (work.count == 0) {
    plan->collSummaries.push_back({work.algo, work.proto, 0});
    return;
  }
  int64_t totalBytes = static_cast<int64_t>(work.count * elemSize);
  if (task.func == Func::kAllGather || task.func == Func::kReduceScatter) totalBytes *= in.nranks;
  // Reduce has the ring alone: priced for its protocol.
  const tuning::Choice choice = chooseAlgo(in, totalBytes, &work);
  const uint64_t simpleChunk = work.chunkElems;
  chooseProto(in, choice, totalBytes, elemSize, &work);
  int nch = tuning::collChannels(totalBytes, {in.minChannels, in.channels}, figuresOf(in).bytesPerChannel());
  if (in.tuner != nullptr && task.func != Func::kReduce)
    askTuner(in, choice, totalBytes, elemSize, simpleChunk, &work, &nch);
  chooseDirect(in, totalBytes, &work);
  if (in.estimate) plan->estimatedUs += plannedUs(in, choice, work, totalBytes);
  work.seq = static_cast<uint32_t>(seq);
  const uint64_t perChannel = device::roundUp(device::divUp<uint64_t>(work.count, nch), work.alignElems);
  plan->collSummaries.push_back({work.algo, work.proto, 0});
  for (int c = 0; c < nch; ++c) {
    uint64_t start = perChannel * static_cast<uint64_t>(c);
    if (start >= work.count) break;
    ++plan->collSummaries.back().nChannels;
    work.channelStart = start;
    work.channelCount = std::min(perChannel, work.count - start);
    if (work.algo == device::Algo::kTree) work.chunkElems = treeChunk(in, work);
    device::WorkItem item{};
    item.kind = device::WorkItem::Kind::kColl;
    item.checkCalls = in.checkCalls ? 1 : 0;
    item.coll = work;
    plan->channels[static_cast<size_t>(c)].push_back(item);
    if (work.algo == device::Algo::kOneShot) addOnce(&plan->flatChannels, c);
    if (work.algo == device::Algo::kButterfly || work.algo == device::Algo::kHalvingDoubling)
      addOnce(&plan->exchangeChannels, c);
    if (work.algo == device::Algo::kHierRing) addOnce(&plan->hierChannels, c);
    if (work.algo == device::Algo::kTorus2D) addOnce(&plan->torusChannels, c);
  }
}

Status pairSelf(const std::vector<P2pTask>& p2ps, int rank, Plan* plan) {
  std::vector<const P2pTask*> sends;
  std::vector<const P2pTask*> recvs;
  for (const P2pTask& t : p2ps)
    if (t.peer == rank) (t.isSend ? sends : recvs).push_back(&t);
  if (sends.size() != recvs.size())
    return errorStatus(ncclInvalidUsage,
                       "rank %d: %zu ncclSend to self but %zu ncclRecv from self in one group; "
                       "each send to self needs a matching receive",
                       rank, sends.size(), recvs.size());
  for (size_t i = 0; i < sends.size(); ++i) {
    if (sends[i]->bytes != recvs[i]->bytes)
      return errorStatus(ncclInvalidUsage,
                         "rank %d: ncclSend to self of %zu bytes is matched with ncclRecv from self "
                         "of %zu bytes",
                         rank, sends[i]->bytes, recvs[i]->bytes);
    if (sends[i]->bytes > 0) plan->selfCopies.push_back({sends[i]->sendbuff, recvs[i]->recvbuff, sends[i]->bytes});
  }
  return okStatus();
}

// Round d pairs the sends to rank+d with the receives from rank-d: the peer
// rank+d, in its own round d, receives from us, so every wait is answered.
void planPeers(const PlanInputs& in, const std::vector<P2pTask>& p2ps, Plan* plan) {
  // Step d pairs the sends to rank + d with the receives from rank - d, in
  // call order, on channel d % channels, for d = 1 .. nranks - 1 (the self
  // step is pairSelf's). The tasks are sorted by distance once (ties by
  // their place in the call order), so a group costs O(tasks log tasks)
  // whatever the rank count, and nothing is allocated once the scratch
  // vectors have grown.
  auto& sends = plan->peerSends;
  auto& recvs = plan->peerRecvs;
  sends.clear();
  recvs.clear();
  for (const P2pTask& t : p2ps) {
    if (t.bytes == 0 || t.peer == in.rank) continue;
    if (t.isSend)
      sends.push_back({(t.peer - in.rank + in.nranks) % in.nranks, &t});
    else
      recvs.push_back({(in.rank - t.peer + in.nranks) % in.nranks, &t});
  }
  auto before = [](const Plan::PeerTask& a, const Plan::PeerTask& b) {
    return a.distance != b.distance ? a.distance < b.distance : a.task < b.task;
  };
  std::sort(sends.begin(), sends.end(), before);
  std::sort(recvs.begin(), recvs.end(), before);
  size_t s = 0;
  size_t r = 0;
  while (s < sends.size() || r < recvs.size()) {
    const int d =
        std::min(s < sends.size() ? sends[s].distance : in.nranks, r < recvs.size() ? recvs[r].distance : in.nranks);
    const int channel = d % in.channels;
    for (;;) {
      const bool send = s < sends.size() && sends[s].distance == d;
      const bool recv = r < recvs.size() && recvs[r].distance == d;
      if (!send && !recv) break;
      device::WorkItem item{};
      item.kind = device::WorkItem::Kind::kP2p;
      item.checkCalls = in.checkCalls ? 1 : 0;
      P2pBinding binding{channel, plan->channels[static_cast<size_t>(channel)].size(), -1, -1};
      if (send) {
        item.p2p.sendbuff = static_cast<const char*>(sends[s].task->sendbuff);
        item.p2p.sendBytes = sends[s].task->bytes;
        binding.sendPeer = (in.rank + d) % in.nranks;
        ++s;
      }
      if (recv) {
        item.p2p.recvbuff = static_cast<char*>(recvs[r].task->recvbuff);
        item.p2p.recvBytes = recvs[r].task->bytes;
        binding.recvPeer = (in.rank - d + in.nranks) % in.nranks;
        ++r;
      }
      plan->channels[static_cast<size_t>(channel)].push_back(item);
      plan->p2p.push_back(binding);
    }
  }
}

}  // namespace

void Plan::reset(int nChannels) {
  channels.resize(static_cast<size_t>(nChannels));
  for (auto& list : channels) list.clear();
  batches.clear();
  p2p.clear();
  selfCopies.clear();
  flatChannels.clear();
  exchangeChannels.clear();
  hierChannels.clear();
  torusChannels.clear();
  estimatedUs = 0;
  collSummaries.clear();
}

namespace {

// A collective of a one-rank communicator whose result is its input: every
// op but a pre-multiplication (the average of one value, the sum, product,
// maximum or minimum of one value, and an integer sum divided by 1, are it).
bool copiesAlone(const PlanInputs& in, const CollTask& task) {
  return in.nranks == 1 && task.op.kind != device::RedOpKind::kPreMulSum;
}

// One rank: each collective is a copy of its input to its output (none in
// place), queued as the plan's self copies, which run in call order before
// any kernel: so only when every collective of the plan is one. A device
// copy engine (cudaMemcpyAsync) moves them at the device's copy bandwidth,
// a kernel of one block per channel at a quarter of it (H200, 2026-11-28:
// 2090 against 546 GB/s at 512 MiB, nccl-tests, one rank).
bool planAsCopies(const PlanInputs& in, const std::vector<CollTask>& colls, Plan* plan) {
  if (colls.empty() || !std::all_of(colls.begin(), colls.end(), [&](const CollTask& t) { return copiesAlone(in, t); }))
    return false;
  for (const CollTask& task : colls) {
    const size_t bytes = task.count * typeSize(task.dtype);
    if (bytes > 0 && task.sendbuff != task.recvbuff) plan->selfCopies.push_back({task.sendbuff, task.recvbuff, bytes});
  }
  return true;
}

}  // namespace

Status planTasks(const PlanInputs& in, const std::vector<CollTask>& colls, const std::vector<P2pTask>& p2ps,
                 Plan* plan) {
  plan->reset(in.channels);
  if (planAsCopies(in, colls, plan)) {
    plan->collSummaries.assign(colls.size(), {device::Algo::kRing, device::Proto::kSimple, 0});
    if (in.estimate) {
      for (const SelfCopy& c : plan->selfCopies) plan->estimatedUs += copyUs(in, static_cast<double>(c.bytes));
      plan->estimatedUs += peersUs(in, p2ps);
    }
    return p2ps.empty() ? okStatus() : pairSelf(p2ps, in.rank, plan);
  }
  uint64_t seq = in.firstSeq;
  PlanInputs inputs = in;
  inputs.pipeOps = static_cast<int>(std::max<size_t>(1, colls.size()));
  for (const CollTask& task : colls) {
    beginBatch(plan, keyOf(task));
    planColl(inputs, task, seq++, plan);
    endBatch(plan);
  }
  if (!p2ps.empty()) {
    WEFT_RETURN_IF_ERROR(pairSelf(p2ps, in.rank, plan));
    beginBatch(plan, device::KernelKey{true, device::DataType::kUint8, device::RedOpKind::kSum});
    planPeers(in, p2ps, plan);
    if (in.estimate) plan->estimatedUs += peersUs(in, p2ps);
    endBatch(plan);
    plan->batches.back().hasP2p = true;
  }
  return okStatus();
}

}  // namespace weft::core
