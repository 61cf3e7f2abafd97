// ncclConfig_t, read defensively: callers built against older or newer
// headers pass a different struct size; we read only the fields their struct
// has (NCCL only ever appends fields) and default the rest.
#pragma once

#include <string>

#include "common/status.h"
#include "nccl.h"

namespace weft::core {

struct CommConfig {
  bool blocking = true;
  int minChannels = -1;  // minCTAs; -1: NCCL_MIN_NCHANNELS or 1
  int maxChannels = -1;  // maxCTAs; -1: NCCL_MAX_NCHANNELS or the backend default
  int cgaClusterSize = -1;
  int splitShare = 0;
  int trafficClass = -1;
  int collnetEnable = 0;
  int ctaPolicy = 0;
  int shrinkShare = 0;
  int nvlsCTAs = -1;
  std::string netName;
  std::string commName;
};

// Null config: defaults (NCCL_COMM_BLOCKING applies).
Result<CommConfig> parseConfig(const ncclConfig_t* config);

}  // namespace weft::core
