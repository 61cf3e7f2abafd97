// Liveness of other processes on this host.
#pragma once

#include <sys/types.h>

namespace weft {

// False when `pid` has exited (or is a zombie waiting to be reaped). Only
// meaningful for a pid in our own pid namespace.
bool processAlive(pid_t pid);

// True when `pid` is stopped (SIGSTOP, a debugger): alive, but it will not
// progress. False when running, sleeping, gone or unknown.
bool processStopped(pid_t pid);

// This process's id, cached: getpid() is a system call (glibc keeps no
// copy), and direct calls ask several times per call, which on a
// paravirtualised VM cost microseconds each. A child made by fork() gets its
// own (an atfork handler clears the cache); one made by a raw clone() that
// skips the handlers would keep its parent's, so Weft never does that.
pid_t thisProcessId();

// Inode of this process's pid namespace (0 if unknown).
unsigned long long pidNamespaceId();

}  // namespace weft
