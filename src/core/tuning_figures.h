// The cost model's figures for a communicator: WEFT_TUNING_FILE when set
// (a file that cannot be read or parsed fails init, naming the file and
// the line), else the backend's built-in defaults; every rank then plans
// with rank 0's figures, so that every rank makes the same choices.
#pragma once

#include "common/status.h"

namespace weft::core {

struct Comm;

// Fills comm->figures and comm->intraLink; logs under TUNING which figures
// are in use and where they come from. Collective: every rank calls it.
Status loadTuningFigures(Comm* comm);

}  // namespace weft::core
