// Turns a failed wait on the data path into the message users read: what
// the rank was doing, whom it waited on, where that peer lives, and what to
// do about it.
#pragma once

#include "common/status.h"
#include "device/wait_report.h"

namespace weft::core {

struct Comm;

Status describeWaitFailure(const Comm& comm, const device::WaitFailureInfo& failure);

}  // namespace weft::core
