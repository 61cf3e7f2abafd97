// What the host reads of a cuda communicator's kernels' wait reports
// (device/wait_report.h): a wait a block recorded as failed, and announced
// long waits on a peer process of this machine that no longer exists.
// Plain functions over the report array, so tests drive them without a GPU.
#pragma once

#include <sys/types.h>

#include "device/wait_report.h"

namespace weft::core {

// The first failure recorded by a block, in block order. False if none.
bool recordedWaitFailure(const device::WaitReport* reports, int n, device::WaitFailureInfo* out);

// An announced wait on a rank whose local process (peerPids[rank], 0 when
// not a process of this machine) is gone: *out says kPeerExited and where.
// `alive` is processAlive outside tests.
bool waitOnExitedPeer(const device::WaitReport* reports, int n, const pid_t* peerPids, int nranks, bool (*alive)(pid_t),
                      device::WaitFailureInfo* out);

}  // namespace weft::core
