// Communicators made from a parent: ncclCommSplit, a collective over the
// parent that builds one child per color (ranks ordered by key, then parent
// rank), and ncclCommShrink, which builds one child of the ranks not
// excluded, without the excluded ones taking part (they may be dead).
#pragma once

#include "common/status.h"
#include "core/config.h"

namespace weft::core {

struct Comm;

// *child is null for NCCL_SPLIT_NOCOLOR. The child gets its own bootstrap,
// built from addresses exchanged over the parent's (no new root).
Status splitComm(Comm* parent, int color, int key, const CommConfig& config, Comm** child);

// ncclCommShrink: every rank of the parent not in exclude[0..count) calls
// it with the same list; the child's ranks are the survivors in parent-rank
// order. The survivors' addresses travel point to point through the parent's
// bootstrap listeners, by way of the lowest survivor, so neither a dead
// excluded rank nor an earlier failure notice stops it. NCCL_SHRINK_ABORT
// first ends the parent's operations in flight, as ncclCommAbort would, and
// leaves the parent failed (only ncclCommDestroy or ncclCommAbort may
// follow); NCCL_SHRINK_DEFAULT leaves it as it is. docs/api.md.
Status shrinkComm(Comm* parent, const int* exclude, int count, const CommConfig& config, int flags, Comm** child);

}  // namespace weft::core
