#include "core/launch_profile.h"

#include "core/comm.h"
#include "core/profiler.h"

namespace weft::core {
namespace {

// NCCL's names (ncclFuncToString, ncclDatatypeToString, ncclAlgoToString,
// ncclProtoToString); Weft's own algorithms in the same style.
const char* funcName(device::Func func) {
  static const char* const kNames[] = {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "Reduce", "SendRecv"};
  const auto i = static_cast<size_t>(func);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "Invalid";
}

const char* datatypeName(ncclDataType_t type) {
  static const char* const kNames[] = {"ncclInt8",    "ncclUint8",    "ncclInt32",      "ncclUint32",
                                       "ncclInt64",   "ncclUint64",   "ncclFloat16",    "ncclFloat32",
                                       "ncclFloat64", "ncclBfloat16", "ncclFloat8e4m3", "ncclFloat8e5m2"};
  return type >= 0 && static_cast<size_t>(type) < sizeof(kNames) / sizeof(kNames[0]) ? kNames[type] : "Unknown";
}

const char* algoName(device::Algo algo) {
  static const char* const kNames[] = {"RING",      "TREE",    "ONESHOT", "BUTTERFLY", "HALVING_DOUBLING",
                                       "HIER_RING", "TORUS_2D"};
  const auto i = static_cast<size_t>(algo);
  return i < sizeof(kNames) / sizeof(kNames[0]) ? kNames[i] : "Unknown";
}

const char* protoName(device::Proto proto) {
  return proto == device::Proto::kLL ? "LL" : proto == device::Proto::kLL128 ? "LL128" : "SIMPLE";
}

}  // namespace

void LaunchProfile::start(Comm* comm) {
  const ProfilerSession* profiler = comm->profiler.get();
  if (profiler == nullptr) return;
  comm_ = comm;
  group_ = profiler->active() ? profiler->startGroup(comm->rank) : nullptr;
  const std::vector<Plan::CollSummary>& planned = comm->plan.collSummaries;
  for (size_t i = 0; i < comm->collTasks.size(); ++i) {
    const CollTask& t = comm->collTasks[i];
    // Sequence numbers count every collective, profiled or not.
    const uint64_t seq = comm->profiledSeq[static_cast<size_t>(t.func)]++;
    if (group_ == nullptr) continue;
    const Plan::CollSummary s =
        i < planned.size() ? planned[i] : Plan::CollSummary{device::Algo::kRing, device::Proto::kSimple, 0};
    const ProfiledColl coll{seq,    funcName(t.func),      t.sendbuff,  t.recvbuff,       t.count,
                            t.root, datatypeName(t.dtype), s.nChannels, algoName(s.algo), protoName(s.proto)};
    tasks_.push_back(profiler->startColl(group_, comm->rank, coll));
  }
  if (group_ == nullptr) return;
  for (const P2pTask& t : comm->p2pTasks) {
    const ProfiledP2p p2p{t.isSend ? "Send" : "Recv",
                          t.isSend ? const_cast<void*>(t.sendbuff) : t.recvbuff,
                          datatypeName(t.dtype),
                          t.count,
                          t.peer,
                          1};
    tasks_.push_back(profiler->startP2p(group_, comm->rank, p2p));
  }
}

void LaunchProfile::stop() {
  if (comm_ == nullptr) return;
  const ProfilerSession* profiler = comm_->profiler.get();
  for (void* handle : tasks_) profiler->stop(handle);
  profiler->stop(group_);
  tasks_.clear();
  group_ = nullptr;
  comm_ = nullptr;
}

}  // namespace weft::core
