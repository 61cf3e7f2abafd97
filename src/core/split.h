// ncclCommSplit: a collective over the parent that builds one child
// communicator per color, ranks ordered by (key, parent rank).
#pragma once

#include "common/status.h"
#include "core/config.h"

namespace weft::core {

struct Comm;

// *child is null for NCCL_SPLIT_NOCOLOR. The child gets its own bootstrap,
// built from addresses exchanged over the parent's (no new root).
Status splitComm(Comm* parent, int color, int key, const CommConfig& config, Comm** child);

}  // namespace weft::core
