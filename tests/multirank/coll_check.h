// Runs one collective on one rank and checks it against a scalar reference:
// exact for integers (with the type's wraparound) and for floats, whose
// inputs are chosen so that every partial sum is representable in the type
// (so any reduction order gives the same bits). Avg on float types is the
// one exception: it scales each input by 1/nranks, which is inexact unless
// nranks is a power of two, so it is compared within a few ulps.
// Also checks that guard regions around the output are untouched and that
// the send buffer of an out-of-place call is unchanged.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "multirank/harness.h"
#include "nccl.h"

namespace weft::test {

enum class CollOp { kAllReduce, kBroadcast, kReduce, kAllGather, kReduceScatter, kAlltoAll, kGather, kScatter };

// Reductions the tests run: the built-in ops plus PreMulSum with the scalar
// passed as a host immediate or through a pointer.
enum class TestOp { kSum, kProd, kMax, kMin, kAvg, kPreMulHost, kPreMulPtr };

struct CollCase {
  CollOp coll;
  ncclDataType_t type;
  TestOp op;
  size_t count;  // the call's count argument
  int root;
  bool inPlace;
};

const char* collName(CollOp coll);
const char* opName(TestOp op);
const char* typeName(ncclDataType_t type);
bool isReducing(CollOp coll);
bool hasInPlace(CollOp coll);
std::string describe(const CollCase& c);

// Runs the case on ctx's communicator and records gtest failures (at most a
// few mismatches are printed). Returns false on the first failure.
bool runAndCheck(const RankContext& ctx, const CollCase& c);

// Sets an environment variable for a scope (restores the previous value).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value);
  ~ScopedEnv();
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::string old_;
  bool had_;
};

// Runs every case on every rank of one communicator, in order. Every rank
// makes every call even after a failed check, so a wrong result fails the
// test instead of leaving the other ranks waiting in the next call.
void runCases(RankMode mode, int nranks, const std::vector<CollCase>& cases);

// After a call failed because the network failed under ctx.comm: the last
// error mentions the network and names another rank with its pid and host,
// and ncclCommGetAsyncError reports a failure.
void expectNetworkFailureNamingAPeer(const RankContext& ctx);

// A fresh file /tmp/weft-<tag>-XXXXXX (created empty) and a file's contents.
std::string tempPath(const char* tag);
std::string slurp(const std::string& path);

// Runs `body` on `nranks` threads with NCCL_DEBUG=INFO for `subsys` into a
// file (the log set up afresh around it) and returns what was logged.
std::string runLogged(int nranks, const char* subsys, const std::function<void(RankContext&)>& body);

}  // namespace weft::test
