#include "tuning/figures.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

namespace weft::tuning {

const char* const kFigureKeys[kFigureCount] = {
    "threads.simple.latency_us",
    "threads.simple.gbs",
    "threads.ll.latency_us",
    "threads.ll.gbs",
    "shm.simple.latency_us",
    "shm.simple.gbs",
    "shm.ll.latency_us",
    "shm.ll.gbs",
    "net.simple.latency_us",
    "net.simple.gbs",
    "copy.gbs",
    "reduce.gbs",
    "channel.startup_us",
    "oversubscribed.latency_factor",
    "threads.ll128.latency_us",
    "threads.ll128.gbs",
    "shm.ll128.latency_us",
    "shm.ll128.gbs",
    "threads.direct.allreduce_min_bytes",
    "threads.direct.reducescatter_min_bytes",
    "threads.direct.allgather_min_bytes",
    "threads.direct.broadcast_min_bytes",
    "shm.direct.allreduce_min_bytes",
    "shm.direct.reducescatter_min_bytes",
    "shm.direct.allgather_min_bytes",
    "shm.direct.broadcast_min_bytes",
};

namespace {

// What each figure is, for the file's comments.
const char* const kFigureDocs[kFigureCount] = {
    "one hand-off between threads of a process, Simple (us)",
    "one flow between threads of a process, Simple (GB/s)",
    "one hand-off between threads of a process, LL (us)",
    "one flow between threads of a process, LL (GB/s of payload)",
    "one hand-off between processes over shared memory, Simple (us)",
    "one flow between processes over shared memory, Simple (GB/s)",
    "one hand-off between processes over shared memory, LL (us)",
    "one flow between processes over shared memory, LL (GB/s of payload)",
    "one hand-off between nodes over the network (us)",
    "one node's network bandwidth per direction (GB/s)",
    "a local copy (memcpy, GB/s)",
    "combining one input into another (float sum, GB/s of input)",
    "start-up of one more channel (us)",
    "hand-offs within a node cost this many times more when ranks outnumber cores",
    "one hand-off between threads of a process, LL128 (us)",
    "one flow between threads of a process, LL128 (GB/s of payload)",
    "one hand-off between processes over shared memory, LL128 (us)",
    "one flow between processes over shared memory, LL128 (GB/s of payload)",
    "smallest ring AllReduce run in direct mode between threads (bytes; 1e15: never)",
    "smallest ring ReduceScatter run in direct mode between threads (bytes, all ranks'; 1e15: never)",
    "smallest ring AllGather run in direct mode between threads (bytes, all ranks'; 1e15: never)",
    "smallest ring Broadcast run in direct mode between threads (bytes; 1e15: never)",
    "smallest ring AllReduce run in direct mode between processes (bytes; 1e15: never)",
    "smallest ring ReduceScatter run in direct mode between processes (bytes, all ranks'; 1e15: never)",
    "smallest ring AllGather run in direct mode between processes (bytes, all ranks'; 1e15: never)",
    "smallest ring Broadcast run in direct mode between processes (bytes; 1e15: never)",
};

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  const size_t e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

int figureIndex(LinkType link, int proto, bool bandwidth) {
  const int bw = bandwidth ? 1 : 0;
  if (link == LinkType::kNet) return static_cast<int>(Figure::kNetSimpleLatUs) + bw;
  if (proto == 2) return static_cast<int>(Figure::kThreadsLL128LatUs) + static_cast<int>(link) * 2 + bw;
  return static_cast<int>(link) * 4 + (proto == 1 ? 2 : 0) + bw;
}

std::string expectedKeys() {
  std::string keys;
  for (int i = 0; i < kFigureCount; ++i) keys += std::string(i ? ", " : "") + kFigureKeys[i];
  return keys;
}

// A positive finite number (the factor: at least 1), the whole token.
bool parseValue(const std::string& token, Figure figure, double* value) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(token.c_str(), &end);
  if (errno != 0 || end == token.c_str() || *end != '\0' || !std::isfinite(v) || v <= 0) return false;
  if (figure == Figure::kOversubscribedFactor && v < 1) return false;
  *value = v;
  return true;
}

}  // namespace

double TuningFigures::latencyUs(LinkType link, int proto) const { return value[figureIndex(link, proto, false)]; }
double TuningFigures::gbs(LinkType link, int proto) const { return value[figureIndex(link, proto, true)]; }

int64_t TuningFigures::directMinBytes(LinkType link, CollKind coll) const {
  int offset = 0;
  switch (coll) {
    case CollKind::kAllReduce: offset = 0; break;
    case CollKind::kReduceScatter: offset = 1; break;
    case CollKind::kAllGather: offset = 2; break;
    case CollKind::kBroadcast: offset = 3; break;
    default: return std::numeric_limits<int64_t>::max();
  }
  const Figure first = link == LinkType::kThreads ? Figure::kThreadsDirectAllReduceMin : Figure::kShmDirectAllReduceMin;
  const double bytes = value[static_cast<int>(first) + offset];
  return bytes >= kDirectNeverBytes ? std::numeric_limits<int64_t>::max() : std::llround(bytes);
}

int64_t TuningFigures::bytesPerChannel() const {
  return std::max<int64_t>(1, std::llround(get(Figure::kChannelUs) * get(Figure::kCopyGBs) * 1e3));
}

TuningFigures defaultFigures(bool hostBackend) {
  // The host backend's orders of magnitude (measured on the 2-core
  // development machine, docs/performance.md): a hand-off 0.5 us, 8 GB/s a
  // copy; a channel's start-up 32.768 us, so that 256 KiB pay for one at
  // 8 GB/s. LL on the host saves little per hand-off and moves bytes slowly
  // (every 4 bytes pass through registers with their flag, every line is
  // polled): measured 2026-11-27 on 2 ranks, LL is 0.02-0.04 us ahead of
  // Simple at 8 B and behind from 64 B (AllReduce 64 B 0.23 against
  // 0.19 us, 512 B 1.2 against 0.22; Broadcast 64 B 0.12 against 0.09),
  // about 0.5 GB/s: 0.03 us less per hand-off and 0.5 GB/s put the
  // crossover at 16 B.
  // The cuda backend keeps LL's older figures (a fifth less per hand-off, a
  // sixth of Simple's bandwidth) until a GPU measures its own: there LL
  // saves the fence and flag round trip Simple pays, far more than on the
  // host.
  // LL128, measured on the host (2026-11-27, 2 ranks, docs/performance.md
  // "LL128 on the host"): 1.1-1.4x Simple's time at 8-128 B, 1.7x faster
  // than LL from 2 KiB: 0.6 us and 0.85 GB/s, behind Simple at every size,
  // so the planner never picks it by itself. Both backends start there; a
  // tuning file with a GPU's own figures is what can make it win.
  // Direct mode (ring, Simple) from: below it the per-call handshake (one
  // more hand-off per link) outweighs the copy saved. Measured on the host
  // backend, 2 ranks, also with the consumer reading its output after each
  // call (weft-perf --touch, which charges direct writes for the lines they
  // leave in the writer's cache) and with private buffers, which a process
  // cannot map, so that there the handshake is pure cost (docs/performance.md,
  // "Direct mode's threshold"): AllReduce from 16 KiB between threads (every
  // input reachable) and 32 KiB between processes (there 1.2-1.7x faster
  // with ncclMemAlloc buffers, 4-10 % slower with private ones);
  // ReduceScatter from 16 KiB between threads, 64 KiB between processes (at
  // 32 KiB +12 % shared, -15 % private); AllGather (writes only) from 64 KiB
  // (slower at 32 KiB with --touch); Broadcast from 256 KiB (slower below it
  // with --touch). weft-tune measures them for a tuning file; the cuda
  // backend, where direct mode is asked for (WEFT_DIRECT=1), starts from the
  // host's.
  static const double kHost[kFigureCount] = {0.5,   8.0,   0.47,  0.5,    0.5,   8.0,   0.47,  0.5,   20.0,
                                             1.0,   8.0,   8.0,   32.768, 4.0,   0.6,   0.85,  0.6,   0.85,
                                             16384, 16384, 65536, 262144, 32768, 65536, 65536, 262144};
  static const double kCuda[kFigureCount] = {0.5,   8.0,   0.4,   1.25,   0.5,   8.0,   0.4,   1.25,  20.0,
                                             1.0,   8.0,   8.0,   32.768, 4.0,   0.6,   0.85,  0.6,   0.85,
                                             16384, 16384, 65536, 262144, 32768, 65536, 65536, 262144};
  TuningFigures f;
  for (int i = 0; i < kFigureCount; ++i) f.value[i] = hostBackend ? kHost[i] : kCuda[i];
  f.source = hostBackend ? "built-in defaults (host backend)" : "built-in defaults (cuda backend: the host's, LL's older)";
  return f;
}

Result<TuningFigures> parseTuningFile(const std::string& text, const std::string& name, const TuningFigures& defaults) {
  TuningFigures f = defaults;
  for (bool& b : f.fromFile) b = false;
  f.source = name;
  bool versionSeen = false;
  std::istringstream in(text);
  int lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    const size_t hash = line.find('#');
    line = trim(hash == std::string::npos ? line : line.substr(0, hash));
    if (line.empty()) continue;
    std::istringstream words(line);
    std::string key, value, extra;
    words >> key >> value >> extra;
    if (value.empty() || !extra.empty())
      return errorStatus(ncclInvalidArgument, "%s: line %d: \"%s\": expected one key and one value (key value)",
                         name.c_str(), lineNo, line.c_str());
    if (!versionSeen) {
      if (key != "version")
        return errorStatus(ncclInvalidArgument, "%s: line %d: \"%s\": expected the version line \"version %d\" first",
                           name.c_str(), lineNo, line.c_str(), kTuningFileVersion);
      if (value != std::to_string(kTuningFileVersion))
        return errorStatus(ncclInvalidArgument,
                           "%s: line %d: version \"%s\" is not one this build reads: expected version %d", name.c_str(),
                           lineNo, value.c_str(), kTuningFileVersion);
      versionSeen = true;
      continue;
    }
    int index = -1;
    for (int i = 0; i < kFigureCount; ++i)
      if (key == kFigureKeys[i]) index = i;
    if (index < 0)
      return errorStatus(ncclInvalidArgument, "%s: line %d: unknown key \"%s\": expected one of %s", name.c_str(),
                         lineNo, key.c_str(), expectedKeys().c_str());
    if (f.fromFile[index])
      return errorStatus(ncclInvalidArgument, "%s: line %d: \"%s\" is given a second time: expected each key once",
                         name.c_str(), lineNo, key.c_str());
    const Figure figure = static_cast<Figure>(index);
    if (!parseValue(value, figure, &f.value[index]))
      return errorStatus(ncclInvalidArgument, "%s: line %d: %s \"%s\": expected %s", name.c_str(), lineNo, key.c_str(),
                         value.c_str(),
                         figure == Figure::kOversubscribedFactor ? "a number of at least 1" : "a positive number");
    f.fromFile[index] = true;
  }
  if (!versionSeen)
    return errorStatus(ncclInvalidArgument, "%s: no version line: expected \"version %d\" as its first line",
                       name.c_str(), kTuningFileVersion);
  return f;
}

Result<TuningFigures> readTuningFile(const std::string& path, const TuningFigures& defaults) {
  std::ifstream file(path);
  if (!file)
    return errorStatus(ncclInvalidArgument,
                       "WEFT_TUNING_FILE=%s: cannot be read (%s): expected a tuning file written by weft-tune "
                       "(docs/tuning.md)",
                       path.c_str(), std::strerror(errno));
  std::stringstream text;
  text << file.rdbuf();
  if (file.bad())
    return errorStatus(ncclInvalidArgument, "WEFT_TUNING_FILE=%s: read failed (%s)", path.c_str(),
                       std::strerror(errno));
  return parseTuningFile(text.str(), "WEFT_TUNING_FILE=" + path, defaults);
}

std::string formatTuningFile(const TuningFigures& figures, const std::string& header) {
  std::string text;
  std::istringstream lines(header);
  for (std::string line; std::getline(lines, line);) text += "# " + line + "\n";
  text += "version " + std::to_string(kTuningFileVersion) + "\n";
  for (int i = 0; i < kFigureCount; ++i) {
    char value[64];
    snprintf(value, sizeof value, "%.6g", figures.value[i]);
    text += std::string("# ") + kFigureDocs[i] + (figures.fromFile[i] ? "" : " [built-in default]") + "\n";
    text += std::string(kFigureKeys[i]) + " " + value + "\n";
  }
  return text;
}

LinkFigures modelLinks(const TuningFigures& f, LinkType intra, int proto, bool oversubscribed) {
  LinkFigures l;
  const double factor = oversubscribed ? f.get(Figure::kOversubscribedFactor) : 1.0;
  l.intraLatUs = f.latencyUs(intra, proto) * factor;
  l.intraGBs = f.gbs(intra, proto);
  l.interLatUs = f.latencyUs(LinkType::kNet, 0);
  l.interGBs = f.gbs(LinkType::kNet, 0);
  l.nicsPerNode = 1;
  l.reduceGBs = f.get(Figure::kReduceGBs);
  return l;
}

std::string describeFigures(const TuningFigures& f) {
  std::string text;
  for (int i = 0; i < kFigureCount; ++i) {
    char item[96];
    snprintf(item, sizeof item, "%s%s %g (%s)", i ? ", " : "", kFigureKeys[i], f.value[i],
             f.fromFile[i] ? "file" : "default");
    text += item;
  }
  return text;
}

}  // namespace weft::tuning
