#include "multirank/coll_check.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <vector>

#include "device/types.h"

namespace weft::test {
namespace {

constexpr size_t kGuardElems = 16;
constexpr unsigned char kGuardByte = 0xA5;

template <typename F>
void withType(ncclDataType_t type, F&& f) {
  using namespace weft::device;
  switch (type) {
    case ncclInt8: return f(int8_t{});
    case ncclUint8: return f(uint8_t{});
    case ncclInt32: return f(int32_t{});
    case ncclUint32: return f(uint32_t{});
    case ncclInt64: return f(int64_t{});
    case ncclUint64: return f(uint64_t{});
    case ncclFloat16: return f(half_t{});
    case ncclFloat32: return f(float{});
    case ncclFloat64: return f(double{});
    case ncclBfloat16: return f(bfloat16_t{});
    case ncclFloat8e4m3: return f(fp8e4m3_t{});
    case ncclFloat8e5m2: return f(fp8e5m2_t{});
    default: ADD_FAILURE() << "unknown type " << type;
  }
}

size_t sizeOf(ncclDataType_t type) {
  size_t s = 0;
  withType(type, [&](auto z) { s = sizeof(z); });
  return s;
}

bool isInt(ncclDataType_t t) { return t <= ncclUint64; }

// Every integer in [0, limit] is exact in the type (floats only).
double exactLimit(ncclDataType_t t) {
  switch (t) {
    case ncclFloat16: return 2048;
    case ncclBfloat16: return 256;
    case ncclFloat8e4m3: return 16;
    case ncclFloat8e5m2: return 8;
    case ncclFloat32: return 16777216.0;
    default: return 9007199254740992.0;
  }
}

void store(ncclDataType_t t, void* base, size_t i, double v) {
  withType(t, [&](auto z) {
    using T = decltype(z);
    static_cast<T*>(base)[i] = weft::device::fromDouble<T>(v);
  });
}

double load(ncclDataType_t t, const void* base, size_t i) {
  double out = 0;
  withType(t, [&](auto z) {
    using T = decltype(z);
    using namespace weft::device;
    const T v = static_cast<const T*>(base)[i];
    if constexpr (std::is_same_v<T, half_t>)
      out = halfToFloat(v);
    else if constexpr (std::is_same_v<T, bfloat16_t>)
      out = bfloat16ToFloat(v);
    else if constexpr (std::is_same_v<T, fp8e4m3_t>)
      out = fp8e4m3ToFloat(v);
    else if constexpr (std::is_same_v<T, fp8e5m2_t>)
      out = fp8e5m2ToFloat(v);
    else
      out = static_cast<double>(v);
  });
  return out;
}

// Input element i of rank r (see the header for why these values).
double input(const CollCase& c, int r, size_t i, int n) {
  const size_t ru = static_cast<size_t>(r);
  const bool integer = isInt(c.type);
  switch (c.op) {
    case TestOp::kProd:
      if (integer) return static_cast<double>(1 + (ru + i) % 3);
      return r < 3 && (ru + i) % 2 == 0 ? 2 : 1;  // products stay <= 8
    case TestOp::kMax:
    case TestOp::kMin:
      return static_cast<double>((ru * 5 + i * 3) % static_cast<size_t>(std::min(11.0, exactLimit(c.type) + 1)));
    default: {
      const double scale = c.op == TestOp::kPreMulHost || c.op == TestOp::kPreMulPtr ? 2 : 1;
      const double vmax = integer ? 100 : std::floor(exactLimit(c.type) / scale / n);
      if (vmax < 1) return i % static_cast<size_t>(n) == ru ? 1 : 0;
      return static_cast<double>((ru * 7 + i * 3) % static_cast<size_t>(vmax + 1));
    }
  }
}

// The reduction of element i over all ranks, as the type computes it.
double reduced(const CollCase& c, size_t i, int n) {
  const bool premul = c.op == TestOp::kPreMulHost || c.op == TestOp::kPreMulPtr;
  uint64_t acc = c.op == TestOp::kProd ? 1 : 0;
  double facc = c.op == TestOp::kProd ? 1 : 0;
  double best = input(c, 0, i, n);
  for (int r = 0; r < n; ++r) {
    const double v = input(c, r, i, n) * (premul ? 2 : 1);
    if (c.op == TestOp::kProd)
      acc *= static_cast<uint64_t>(v), facc *= v;
    else
      acc += static_cast<uint64_t>(v), facc += v;
    best = c.op == TestOp::kMax ? std::max(best, v) : std::min(best, v);
  }
  if (c.op == TestOp::kMax || c.op == TestOp::kMin) return best;
  if (!isInt(c.type)) return c.op == TestOp::kAvg ? facc / n : facc;
  double out = 0;
  withType(c.type, [&](auto z) {
    using T = decltype(z);
    if constexpr (std::is_integral_v<T>) {
      const T wrapped = static_cast<T>(acc);
      out = static_cast<double>(c.op == TestOp::kAvg ? static_cast<T>(wrapped / static_cast<T>(n)) : wrapped);
    }
  });
  return out;
}

double expected(const CollCase& c, size_t i, int rank, int n) {
  const size_t me = static_cast<size_t>(rank);
  switch (c.coll) {
    case CollOp::kAllReduce:
    case CollOp::kReduce: return reduced(c, i, n);
    case CollOp::kReduceScatter: return reduced(c, me * c.count + i, n);
    case CollOp::kBroadcast: return input(c, c.root, i, n);
    case CollOp::kAllGather:
    case CollOp::kGather: return input(c, static_cast<int>(i / c.count), i % c.count, n);
    case CollOp::kAlltoAll: return input(c, static_cast<int>(i / c.count), me * c.count + i % c.count, n);
    case CollOp::kScatter: return input(c, c.root, me * c.count + i, n);
  }
  return 0;
}

bool matches(const CollCase& c, double got, double want) {
  if (isInt(c.type) || c.op != TestOp::kAvg) return got == want;
  const double ulp = std::ldexp(std::max(1.0, std::fabs(want)), c.type == ncclFloat64 ? -50 : -20);
  const double lowUlp = c.type == ncclFloat8e5m2   ? 0.25
                        : c.type == ncclFloat8e4m3 ? 0.125
                        : c.type == ncclBfloat16   ? 1.0 / 128
                        : c.type == ncclFloat16    ? 1.0 / 1024
                                                   : 0;
  return std::fabs(got - want) <= 4 * std::max(ulp, lowUlp * std::max(1.0, std::fabs(want)));
}

struct Sizes {
  size_t send, recv, out, outOffset;  // elements; out: checked output range
};

Sizes sizesOf(const CollCase& c, int rank, int n) {
  const size_t nn = static_cast<size_t>(n), k = c.count;
  switch (c.coll) {
    case CollOp::kAllGather: return {k, k * nn, k * nn, 0};
    case CollOp::kReduceScatter:
      return {k * nn, c.inPlace ? k * nn : k, k, c.inPlace ? static_cast<size_t>(rank) * k : 0};
    case CollOp::kAlltoAll: return {k * nn, k * nn, k * nn, 0};
    case CollOp::kGather: return {k, k * nn, rank == c.root ? k * nn : 0, 0};
    case CollOp::kScatter: return {k * nn, k, k, 0};
    case CollOp::kReduce: return {k, k, rank == c.root ? k : 0, 0};
    default: return {k, k, k, 0};
  }
}

ncclResult_t call(const CollCase& c, const void* send, void* recv, ncclRedOp_t op, ncclComm_t comm) {
  switch (c.coll) {
    case CollOp::kAllReduce: return ncclAllReduce(send, recv, c.count, c.type, op, comm, nullptr);
    case CollOp::kBroadcast: return ncclBroadcast(send, recv, c.count, c.type, c.root, comm, nullptr);
    case CollOp::kReduce: return ncclReduce(send, recv, c.count, c.type, op, c.root, comm, nullptr);
    case CollOp::kAllGather: return ncclAllGather(send, recv, c.count, c.type, comm, nullptr);
    case CollOp::kReduceScatter: return ncclReduceScatter(send, recv, c.count, c.type, op, comm, nullptr);
    case CollOp::kAlltoAll: return ncclAlltoAll(send, recv, c.count, c.type, comm, nullptr);
    case CollOp::kGather: return ncclGather(send, recv, c.count, c.type, c.root, comm, nullptr);
    case CollOp::kScatter: return ncclScatter(send, recv, c.count, c.type, c.root, comm, nullptr);
  }
  return ncclInternalError;
}

}  // namespace

const char* collName(CollOp c) {
  static const char* k[] = {"AllReduce",     "Broadcast", "Reduce", "AllGather",
                            "ReduceScatter", "AlltoAll",  "Gather", "Scatter"};
  return k[static_cast<int>(c)];
}
const char* opName(TestOp op) {
  static const char* k[] = {"sum", "prod", "max", "min", "avg", "premulHost", "premulPtr"};
  return k[static_cast<int>(op)];
}
const char* typeName(ncclDataType_t t) {
  static const char* k[] = {"int8", "uint8",   "int32",  "uint32",   "int64", "uint64",
                            "half", "float32", "double", "bfloat16", "e4m3",  "e5m2"};
  return t >= 0 && t < ncclNumTypes ? k[t] : "?";
}
bool isReducing(CollOp c) { return c == CollOp::kAllReduce || c == CollOp::kReduce || c == CollOp::kReduceScatter; }
bool hasInPlace(CollOp c) { return c <= CollOp::kReduceScatter; }

std::string describe(const CollCase& c) {
  return std::string(collName(c.coll)) + " " + typeName(c.type) + " " + (isReducing(c.coll) ? opName(c.op) : "-") +
         " count " + std::to_string(c.count) + " root " + std::to_string(c.root) +
         (c.inPlace ? " in-place" : " out-of-place");
}

bool runAndCheck(const RankContext& ctx, const CollCase& c) {
  const int n = ctx.nranks, rank = ctx.rank;
  const size_t esz = sizeOf(c.type);
  const Sizes s = sizesOf(c, rank, n);
  const size_t recvElems = c.inPlace ? std::max(s.recv, s.send) : s.recv;
  std::vector<unsigned char> sendBuf((s.send + 2 * kGuardElems) * esz, kGuardByte);
  std::vector<unsigned char> recvBuf((recvElems + 2 * kGuardElems) * esz, kGuardByte);
  unsigned char* send = sendBuf.data() + kGuardElems * esz;
  unsigned char* recv = recvBuf.data() + kGuardElems * esz;
  unsigned char* in = c.inPlace ? recv : send;
  if (c.inPlace && c.coll == CollOp::kAllGather) in = recv + static_cast<size_t>(rank) * c.count * esz;
  for (size_t i = 0; i < s.send; ++i) store(c.type, in, i, input(c, rank, i, n));
  const std::vector<unsigned char> sendCopy = sendBuf;

  ncclRedOp_t op = ncclSum;
  unsigned char scalar[8] = {};
  store(c.type, scalar, 0, 2.0);
  switch (c.op) {
    case TestOp::kProd: op = ncclProd; break;
    case TestOp::kMax: op = ncclMax; break;
    case TestOp::kMin: op = ncclMin; break;
    case TestOp::kAvg: op = ncclAvg; break;
    case TestOp::kPreMulHost:
    case TestOp::kPreMulPtr: {
      const ncclScalarResidence_t where = c.op == TestOp::kPreMulHost ? ncclScalarHostImmediate : ncclScalarDevice;
      EXPECT_EQ(ncclRedOpCreatePreMulSum(&op, scalar, c.type, where, ctx.comm), ncclSuccess)
          << ncclGetLastError(ctx.comm);
      break;
    }
    default: break;
  }
  // In-place ReduceScatter: recvbuff is this rank's segment of sendbuff.
  unsigned char* recvArg = recv;
  if (c.inPlace && c.coll == CollOp::kReduceScatter) recvArg = recv + static_cast<size_t>(rank) * c.count * esz;
  const ncclResult_t rc = call(c, c.inPlace ? static_cast<const void*>(in) : send, recvArg, op, ctx.comm);
  if (c.op == TestOp::kPreMulHost || c.op == TestOp::kPreMulPtr) {
    EXPECT_EQ(ncclRedOpDestroy(op, ctx.comm), ncclSuccess);
  }
  EXPECT_EQ(rc, ncclSuccess) << "rank " << rank << ": " << describe(c) << ": " << ncclGetLastError(ctx.comm);
  if (rc != ncclSuccess) return false;

  int bad = 0;
  for (size_t i = 0; i < s.out && bad < 5; ++i) {
    const double got = load(c.type, recv, s.outOffset + i);
    const double want = expected(c, i, rank, n);
    if (!matches(c, got, want)) {
      ADD_FAILURE() << "rank " << rank << " of " << n << ": " << describe(c) << ": element " << i << " is " << got
                    << ", expected " << want;
      ++bad;
    }
  }
  for (size_t b = 0; b < kGuardElems * esz && bad < 5; ++b) {
    const size_t tail = recvBuf.size() - 1 - b;
    if (recvBuf[b] != kGuardByte || recvBuf[tail] != kGuardByte) {
      ADD_FAILURE() << "rank " << rank << ": " << describe(c) << ": wrote outside the receive buffer";
      ++bad;
    }
  }
  if (!c.inPlace && sendBuf != sendCopy) {
    ADD_FAILURE() << "rank " << rank << ": " << describe(c) << ": the send buffer changed";
    ++bad;
  }
  return bad == 0;
}

std::string tempPath(const char* tag) {
  char path[64];
  std::snprintf(path, sizeof(path), "/tmp/weft-%s-XXXXXX", tag);
  const int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  close(fd);
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs `body` on `nranks` threads with NCCL_DEBUG=INFO into a file and
// returns the log.
std::string runLogged(int nranks, const char* subsys, const std::function<void(RankContext&)>& body) {
  const std::string path = tempPath("log");
  {
    ScopedEnv debug("NCCL_DEBUG", "INFO");
    ScopedEnv sub("NCCL_DEBUG_SUBSYS", subsys);
    ScopedEnv file("NCCL_DEBUG_FILE", path.c_str());
    ncclResetDebugInit();
    runRanks(RankMode::kThreads, nranks, body);
  }
  ncclResetDebugInit();
  std::string text = slurp(path);
  std::remove(path.c_str());
  return text;
}

ScopedEnv::ScopedEnv(const char* name, const char* value) : name_(name) {
  const char* old = std::getenv(name);
  had_ = old != nullptr;
  if (had_) old_ = old;
  if (value)
    setenv(name, value, 1);
  else
    unsetenv(name);
}

ScopedEnv::~ScopedEnv() {
  if (had_)
    setenv(name_.c_str(), old_.c_str(), 1);
  else
    unsetenv(name_.c_str());
}

void runCases(RankMode mode, int nranks, const std::vector<CollCase>& cases) {
  runRanks(mode, nranks, [&](RankContext& ctx) {
    for (const CollCase& c : cases) runAndCheck(ctx, c);
  });
}

void expectNetworkFailureNamingAPeer(const RankContext& ctx) {
  const std::string msg = ncclGetLastError(ctx.comm);
  EXPECT_NE(msg.find("network"), std::string::npos) << msg;
  EXPECT_NE(msg.find(" on host "), std::string::npos) << "the message names no host: " << msg;
  bool namesPeer = false;
  for (int r = 0; r < ctx.nranks; ++r)
    namesPeer = namesPeer || (r != ctx.rank && msg.find("rank " + std::to_string(r) + " (pid") != std::string::npos);
  EXPECT_TRUE(namesPeer) << "the message names no other rank: " << msg;
  ncclResult_t async = ncclSuccess;
  EXPECT_EQ(ncclCommGetAsyncError(ctx.comm, &async), ncclSuccess);
  EXPECT_NE(async, ncclSuccess);
}

}  // namespace weft::test
