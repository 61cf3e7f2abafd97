// Runs a test body on N ranks, as threads of this process or as forked
// processes, each with its own communicator from one unique id.
//
// Processes: child 0 creates the unique id and passes it to the others
// through a pipe, so the test process never starts a library thread before
// forking. A child's gtest failures are reported through its exit status
// and its stderr; the parent fails the test if any child did.
#pragma once

#include <functional>
#include <ostream>
#include <string>

#include "nccl.h"

namespace weft::test {

enum class RankMode { kThreads, kProcesses };

struct RankContext {
  int rank;
  int nranks;
  ncclComm_t comm;
};

// Creates the communicators (ncclCommInitRank), runs body on every rank,
// destroys the communicators. Failures inside body use gtest assertions.
void runRanks(RankMode mode, int nranks, const std::function<void(RankContext&)>& body);

// As runRanks, but the body gets only the rank and the unique id and manages
// communicators itself (init/destroy tests).
void runRanksRaw(RankMode mode, int nranks,
                 const std::function<void(int rank, int nranks, const ncclUniqueId& id)>& body);

const char* modeName(RankMode mode);

// gtest prints parameters with this (test names and failures read "threads").
inline void PrintTo(RankMode mode, std::ostream* os) { *os << modeName(mode); }

}  // namespace weft::test
