// weft-perf: an nccl-tests-style benchmark (same options, same columns, same
// bus-bandwidth factors) that also launches its own local ranks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "nccl.h"

namespace weft::perf {

enum class Coll {
  kAllReduce,
  kAllGather,
  kReduceScatter,
  kBroadcast,
  kReduce,
  kAlltoAll,
  kGather,
  kScatter,
  kSendRecv
};
enum class Output { kTable, kJson, kCsv };

// -o mulsum (nccl-tests' name; premulsum is accepted too): a PreMulSum op
// (scalar 2, host immediate) created per call.
constexpr ncclRedOp_t kPreMulSum = static_cast<ncclRedOp_t>(ncclNumOps);

struct Options {
  Coll coll = Coll::kAllReduce;
  size_t minBytes = 32u << 20;
  size_t maxBytes = 32u << 20;
  size_t stepBytes = 1u << 20;
  double stepFactor = 0;  // 0: use stepBytes
  int iters = 20;
  int warmup = 1;
  int check = 1;
  int average = 1;       // 0 rank 0, 1 mean, 2 min, 3 max across ranks
  int blocking = 0;      // 0: one wait per batch (cuda), 1/2: wait after every operation
  int aggIters = 1;      // -m: operations per iteration, aggregated in one group
  bool median = false;   // --median: per-iteration times and their median instead of the batch mean
  int sampleIters = 1;   // --sample: iterations per timed sample under --median
  bool touch = false;    // --touch: every rank reads its whole output after each call, inside the time
  int timeoutSec = 0;    // -T: a size that takes longer fails the run (0: no limit)
  int parallelInit = 0;  // -p: ranks of this process initialise concurrently (threads) or in one group
  std::vector<ncclRedOp_t> ops{ncclSum};
  std::vector<ncclDataType_t> types{ncclFloat};
  std::vector<int> roots{0};
  int np = 0;  // >0: spawn this many local ranks (processes, or threads with --threads)
  bool threads = false;
  int threadsPerProcess = 1;  // -t: ranks (threads) per process; with -np N processes, N x t ranks
  int ranksPerThread = 1;     // -g: communicators each thread drives, every call in one group
  int cudaGraphs = 0;         // -G: replays of the timed iterations captured as one CUDA graph
  Output output = Output::kTable;
  std::string idFile;           // external launchers: where rank 0 leaves the unique id
  int registerMode = 0;         // -R: 0 none, 1 ncclCommRegister, 2 ncclCommWindowRegister
  bool privateBuffers = false;  // --private-buffers: host buffers not from ncclMemAlloc
};

// Parses argv (argv[1] may name the collective). On error prints why and
// returns false; `exitCode` is 0 for --help.
bool parseOptions(int argc, char** argv, Options* opt, int* exitCode);

struct CollInfo {
  const char* name;
  bool reduces;
  bool rooted;
  bool inPlace;  // whether an in-place variant exists
  double busFactor(int nranks) const;
};
const CollInfo& collInfo(Coll coll);
const char* typeName(ncclDataType_t type);
const char* opName(ncclRedOp_t op);
size_t typeSize(ncclDataType_t type);

// Element counts for one size, as nccl-tests defines "size": the per-rank
// buffer for allreduce/broadcast/reduce, the gathered total for allgather,
// gather and alltoall, the scattered total for reducescatter and scatter.
struct Counts {
  size_t count;      // the count argument of the call
  size_t sendElems;  // elements in the send buffer
  size_t recvElems;  // elements in the receive buffer
};
Counts countsFor(Coll coll, size_t bytes, ncclDataType_t type, int nranks);

// Buffers of the communicator's kind (host or device memory).
class Buffers {
 public:
  // registerMode and privateBuffers as in Options.
  Buffers(ncclComm_t comm, size_t sendBytes, size_t recvBytes, int registerMode = 0, bool privateBuffers = false);
  ~Buffers();
  Buffers(const Buffers&) = delete;
  Buffers& operator=(const Buffers&) = delete;
  bool ok() const { return send_ != nullptr && recv_ != nullptr; }
  void* send() const { return send_; }
  void* recv() const { return recv_; }
  bool onDevice() const { return device_; }
  void upload(void* dst, const void* src, size_t bytes) const;
  void download(void* dst, const void* src, size_t bytes) const;
  void* stream() const { return stream_; }
  void sync() const;  // waits for the stream (no-op on the host)

 private:
  void* send_ = nullptr;
  void* recv_ = nullptr;
  void* stream_ = nullptr;
  bool device_ = false;
  bool private_ = false;
  ncclComm_t comm_ = nullptr;
  int registerMode_ = 0;
  void* handles_[2] = {nullptr, nullptr};  // registrations of send_ and recv_ (or windows)
};

// One call of the collective. inPlace uses NCCL's in-place definitions.
ncclResult_t runColl(Coll coll, const Counts& c, ncclDataType_t type, ncclRedOp_t op, int root, bool inPlace,
                     const Buffers& b, ncclComm_t comm, int rank, int nranks);

// A checked call in two halves around the call itself: fillCheck writes this
// rank's inputs (through the in-place location when inPlace); once the call
// is complete, verifyCheck counts the wrong elements of its output.
void fillCheck(Coll coll, const Counts& c, ncclDataType_t type, ncclRedOp_t op, bool inPlace, const Buffers& b,
               int rank);
int64_t verifyCheck(Coll coll, const Counts& c, ncclDataType_t type, ncclRedOp_t op, int root, bool inPlace,
                    const Buffers& b, int rank, int nranks);

// Runs the whole sweep on the ranks one thread drives (-g: several, every
// call made for all of them in one group); rank 0 prints. False on error.
bool runRanks(const Options& opt, const std::vector<ncclComm_t>& comms, int firstRank, int nranks);

// -G: captures `body` (one timed batch on the buffers' stream) as a CUDA
// graph and replays it `replays` times; returns microseconds per replay, or
// -1 with *why set when the graph cannot be made (host buffers, no CUDA).
double replayAsGraph(const Buffers& b, int replays, ncclResult_t (*body)(void*), void* context, ncclResult_t* rc,
                     std::string* why);

}  // namespace weft::perf
