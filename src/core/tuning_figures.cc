#include "core/tuning_figures.h"

#include <cstring>

#include "common/log.h"
#include "common/params.h"
#include "core/comm.h"

namespace weft::core {
namespace {

// One rank's figures as the bootstrap exchanges them (fixed size).
struct FiguresRecord {
  double value[tuning::kFigureCount];
  uint8_t fromFile[tuning::kFigureCount];
  char source[512];
};

FiguresRecord recordOf(const tuning::TuningFigures& f) {
  FiguresRecord r{};
  for (int i = 0; i < tuning::kFigureCount; ++i) {
    r.value[i] = f.value[i];
    r.fromFile[i] = f.fromFile[i] ? 1 : 0;
  }
  std::strncpy(r.source, f.source.c_str(), sizeof r.source - 1);
  return r;
}

tuning::TuningFigures figuresOf(const FiguresRecord& r) {
  tuning::TuningFigures f;
  for (int i = 0; i < tuning::kFigureCount; ++i) {
    f.value[i] = r.value[i];
    f.fromFile[i] = r.fromFile[i] != 0;
  }
  f.source = r.source;
  return f;
}

bool allRanksInProcess(const Comm& comm) {
  const uint64_t mine = comm.peers[static_cast<size_t>(comm.rank)].processHash;
  for (const PeerInfo& peer : comm.peers)
    if (peer.processHash != mine) return false;
  return true;
}

}  // namespace

Status loadTuningFigures(Comm* comm) {
  const bool host = comm->backend == weftBackendHost;
  const std::string path = param::tuningFile();
  tuning::TuningFigures mine = tuning::defaultFigures(host);
  if (!path.empty()) {
    WEFT_ASSIGN_OR_RETURN(mine, tuning::readTuningFile(path, mine));
  }
  std::vector<FiguresRecord> records(static_cast<size_t>(comm->nranks));
  records[static_cast<size_t>(comm->rank)] = recordOf(mine);
  WEFT_RETURN_IF_ERROR(comm->bootstrap->allGather(records.data(), sizeof(FiguresRecord)));
  comm->figures = figuresOf(records[0]);
  if (std::memcmp(records[0].value, records[static_cast<size_t>(comm->rank)].value, sizeof records[0].value) != 0)
    WEFT_WARN("rank %d: its figures (%s) differ from rank 0's (%s); every rank plans with rank 0's", comm->rank,
              mine.source.c_str(), comm->figures.source.c_str());
  comm->intraLink = allRanksInProcess(*comm) ? tuning::LinkType::kThreads : tuning::LinkType::kShm;
  if (log::enabled(log::Level::kInfo, log::kTuning))
    WEFT_INFO(log::kTuning, "cost model figures from %s (links within a node: %s): %s", comm->figures.source.c_str(),
              comm->intraLink == tuning::LinkType::kThreads ? "threads" : "shared memory",
              tuning::describeFigures(comm->figures).c_str());
  return okStatus();
}

}  // namespace weft::core
