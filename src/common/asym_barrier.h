// Asymmetric memory barriers: the common side of a synchronisation uses
// only compiler barriers, and the rare side pays for a barrier on every
// running thread of the process at once (Linux membarrier, private
// expedited). See core/exec_lock.h for the one user and the argument.
#pragma once

namespace weft {

// Whether asymmetricBarrier() can be used in this process: the kernel
// offers private expedited membarrier and the process registered for it
// (done on first call; a seccomp filter or a kernel before 4.14 says no).
bool asymmetricBarrierReady() noexcept;

// Every thread of this process that is running now passes a full memory
// barrier before this returns (a thread not running passed one when it was
// switched out). Only after asymmetricBarrierReady() returned true.
void asymmetricBarrier() noexcept;

}  // namespace weft
