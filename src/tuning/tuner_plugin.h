// NCCL tuner plugins (NCCL_TUNER_PLUGIN): a site's library that picks the
// algorithm, protocol and channel count of each collective, as NCCL 2.27
// loads them (table versions 2 to 4, tuning/tuner_tables.h). Weft offers the
// plugin its own estimates in NCCL's cost table, for the combinations both
// know (Ring and Tree, Simple and LL); Weft's other algorithms have no
// column there, so a plugin that decides confines the call to those. See
// docs/tuning.md.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "tuning/algo.h"
#include "tuning/proto.h"

namespace weft::tuning {

// NCCL's numbering of the cost table's rows and columns.
constexpr int kNcclAlgoTree = 0;
constexpr int kNcclAlgoRing = 1;
constexpr int kNcclNumAlgorithms = 7;  // Tree, Ring, CollNetDirect, CollNetChain, NVLS, NVLSTree, PAT
constexpr int kNcclProtoLL = 0;
constexpr int kNcclProtoLL128 = 1;
constexpr int kNcclProtoSimple = 2;
constexpr int kNcclNumProtocols = 3;
constexpr float kNcclCostIgnore = -1.0f;  // a combination that cannot run

// What Weft offers for one call: microseconds per [algorithm][protocol],
// kNcclCostIgnore where Weft cannot run it.
struct TunerCosts {
  float us[kNcclNumAlgorithms][kNcclNumProtocols];
  TunerCosts();
  void offer(Algorithm algo, Protocol proto, double estimateUs);
  bool runnable(int ncclAlgo, int ncclProto) const { return us[ncclAlgo][ncclProto] >= 0.0f; }
};

// The plugin's answer: `decided` when it chose (else Weft's choice stands);
// nChannels > 0 when it set the channel count.
struct TunerAnswer {
  bool decided = false;
  Algorithm algo = Algorithm::kRing;
  Protocol proto = Protocol::kSimple;
  int nChannels = 0;
};

// The process's tuner plugin, opened for one communicator (the plugin's
// init, and its destroy with the session).
class TunerSession {
 public:
  // Null when there is no plugin: NCCL_TUNER_PLUGIN=none, or nothing found
  // without being asked for. A plugin that was asked for and cannot be used
  // is a WARN naming it and why, once per process, and null.
  static std::unique_ptr<TunerSession> open(size_t nranks, size_t nnodes);
  // Why the current setting gives no plugin although one was asked for
  // (empty otherwise).
  static std::string problem();
  ~TunerSession();
  TunerSession(const TunerSession&) = delete;
  TunerSession& operator=(const TunerSession&) = delete;

  // Asks the plugin about one call (numPipeOps: collectives in the group).
  // A plugin error leaves Weft's choice (logged under TUNING).
  TunerAnswer ask(CollKind coll, size_t bytes, int numPipeOps, const TunerCosts& offered) const;
  const std::string& name() const;

  struct Library;  // the loaded plugin (tuner_plugin.cc)

 private:
  TunerSession(const Library* library, void* context) : library_(library), context_(context) {}
  const Library* library_;
  void* context_;
};

// NCCL's ncclFunc_t number of a collective.
int ncclFuncOf(CollKind coll);

}  // namespace weft::tuning
