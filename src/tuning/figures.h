// The cost model's figures per link type and protocol, and the tuning file
// that supplies them (WEFT_TUNING_FILE, written by weft-tune; the format is
// in docs/tuning.md). Tuning held as data: the formulas are cost_model.h's,
// these are the numbers they run on.
#pragma once

#include <string>

#include "common/status.h"
#include "tuning/cost_model.h"

namespace weft::tuning {

// How two ranks of a node reach each other: threads of one process, or
// processes through shared memory; ranks of different nodes: the network.
enum class LinkType : int { kThreads = 0, kShm = 1, kNet = 2, kCount = 3 };

// Protocols with figures: numbered as tuning::Protocol (proto.h).
constexpr int kFigureProtocols = 3;  // Simple, LL, LL128

// Every figure, in the file's order; its key and meaning are in kFigureKeys.
enum class Figure : int {
  kThreadsSimpleLatUs,
  kThreadsSimpleGBs,
  kThreadsLLLatUs,
  kThreadsLLGBs,
  kShmSimpleLatUs,
  kShmSimpleGBs,
  kShmLLLatUs,
  kShmLLGBs,
  kNetSimpleLatUs,
  kNetSimpleGBs,
  kCopyGBs,
  kReduceGBs,
  kChannelUs,
  kOversubscribedFactor,
  // Last, so that files written before LL128 had figures keep their order.
  kThreadsLL128LatUs,
  kThreadsLL128GBs,
  kShmLL128LatUs,
  kShmLL128GBs,
  // Smallest ring call (all ranks' bytes, Simple) run in direct mode, per
  // collective and link (docs/tuning.md, "Direct mode"); after LL128's.
  kThreadsDirectAllReduceMin,
  kThreadsDirectReduceScatterMin,
  kThreadsDirectAllGatherMin,
  kThreadsDirectBroadcastMin,
  kShmDirectAllReduceMin,
  kShmDirectReduceScatterMin,
  kShmDirectAllGatherMin,
  kShmDirectBroadcastMin,
  kCount
};
constexpr int kFigureCount = static_cast<int>(Figure::kCount);

// "threads.simple.latency_us", ... (index: Figure).
extern const char* const kFigureKeys[kFigureCount];

// A direct-mode figure of at least this many bytes: never direct (weft-tune
// writes it when the FIFO was ahead at every size it measured).
constexpr double kDirectNeverBytes = 1e15;

// The file's format version this build reads and writes.
constexpr int kTuningFileVersion = 1;

struct TuningFigures {
  double value[kFigureCount] = {};
  bool fromFile[kFigureCount] = {};  // false: the built-in default
  std::string source;                // the file's path, or "built-in defaults (<backend>)"

  double get(Figure f) const { return value[static_cast<int>(f)]; }
  // Latency of one hand-off and bandwidth of one flow on `link` under
  // protocol `proto` (0 Simple, 1 LL, 2 LL128; the network has Simple only).
  double latencyUs(LinkType link, int proto) const;
  double gbs(LinkType link, int proto) const;
  // Bytes of a channel's share whose copy takes as long as the channel's
  // start-up: fewer bytes per channel do not pay for another channel.
  int64_t bytesPerChannel() const;
  // Smallest ring call of `coll` (all ranks' bytes) that runs in direct
  // mode on links of type `link` (threads or shm; the network's calls are
  // never direct, kNet reads shm's); INT64_MAX (never) for a collective
  // without direct mode and for a figure of kDirectNeverBytes or more.
  int64_t directMinBytes(LinkType link, CollKind coll) const;
};

// Built-in figures: `hostBackend` false gives the cuda backend's, which are
// the host's until measured on a GPU (docs/tuning.md).
TuningFigures defaultFigures(bool hostBackend);

// Parses a tuning file's text over `defaults` (figures the file omits keep
// them). `name` names the file in errors: "<name>: line N: <what>, expected
// <what>" (ncclInvalidArgument).
Result<TuningFigures> parseTuningFile(const std::string& text, const std::string& name, const TuningFigures& defaults);

// Reads and parses `path`; a file that cannot be read is an error naming it.
Result<TuningFigures> readTuningFile(const std::string& path, const TuningFigures& defaults);

// The file's text for `figures`: the version line, then every figure, each
// after a comment saying what it is; `header` (lines without "# ") leads.
std::string formatTuningFile(const TuningFigures& figures, const std::string& header);

// The cost model's link figures for a communicator whose ranks of a node
// reach each other over `intra`, under protocol `proto` within the node
// (the network always Simple), every hand-off within the node scaled by the
// oversubscription factor when ranks outnumber cores.
LinkFigures modelLinks(const TuningFigures& figures, LinkType intra, int proto, bool oversubscribed);

// "threads.simple.latency_us 0.5 (file), ..." for the log.
std::string describeFigures(const TuningFigures& figures);

}  // namespace weft::tuning
