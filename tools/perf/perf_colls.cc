// The collectives weft-perf knows: their size conventions, bus-bandwidth
// factors (those of nccl-tests), calls, and result checks.
#include <cmath>
#include <cstring>
#include <vector>

#include "device/types.h"
#include "perf/perf.h"

namespace weft::perf {
namespace {

const CollInfo kInfos[] = {
    {"allreduce", true, false, true}, {"allgather", false, false, true}, {"reducescatter", true, false, true},
    {"broadcast", false, true, true}, {"reduce", true, true, true},      {"alltoall", false, false, false},
    {"gather", false, true, false},   {"scatter", false, true, false},   {"sendrecv", false, false, false}};

// Calls f with a value of the element type (for its type only).
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
    default: return;
  }
}

bool isInteger(ncclDataType_t t) { return t <= ncclUint64; }

// Relative tolerance per result for float types: the reduction order may
// round partial sums differently, by up to half an ulp per step.
double tolerance(ncclDataType_t t, int nranks) {
  double eps = 0;
  switch (t) {
    case ncclFloat16: eps = std::ldexp(1.0, -10); break;
    case ncclBfloat16: eps = std::ldexp(1.0, -7); break;
    case ncclFloat8e4m3: eps = std::ldexp(1.0, -3); break;
    case ncclFloat8e5m2: eps = std::ldexp(1.0, -2); break;
    case ncclFloat32: eps = std::ldexp(1.0, -22); break;
    case ncclFloat64: eps = std::ldexp(1.0, -50); break;
    default: return 0;
  }
  return eps * (nranks + 1);
}

void storeElem(ncclDataType_t type, void* base, size_t i, double v) {
  withType(type, [&](auto zero) {
    using T = decltype(zero);
    static_cast<T*>(base)[i] = weft::device::fromDouble<T>(v);
  });
}

double loadElem(ncclDataType_t type, const void* base, size_t i) {
  double out = 0;
  withType(type, [&](auto zero) {
    using T = decltype(zero);
    const T v = static_cast<const T*>(base)[i];
    if constexpr (std::is_same_v<T, weft::device::half_t>)
      out = weft::device::halfToFloat(v);
    else if constexpr (std::is_same_v<T, weft::device::bfloat16_t>)
      out = weft::device::bfloat16ToFloat(v);
    else if constexpr (std::is_same_v<T, weft::device::fp8e4m3_t>)
      out = weft::device::fp8e4m3ToFloat(v);
    else if constexpr (std::is_same_v<T, weft::device::fp8e5m2_t>)
      out = weft::device::fp8e5m2ToFloat(v);
    else
      out = static_cast<double>(v);
  });
  return out;
}

// Input element i of rank r: small integers, so float sums are exact where
// the type can hold them; 1s and 2s for products.
double inputValue(ncclRedOp_t op, int r, size_t i) {
  if (op == ncclProd) return static_cast<double>(1 + (static_cast<size_t>(r) + i) % 2);
  return static_cast<double>(1 + (static_cast<size_t>(r) * 3 + i) % 5);
}

// The expected reduction of element i over all ranks (integers wrap as the
// type does).
double reduceRef(ncclDataType_t type, ncclRedOp_t op, int nranks, size_t i) {
  const bool integer = isInteger(type);
  uint64_t acc = op == ncclProd ? 1 : 0;
  double facc = op == ncclProd ? 1 : 0;
  double best = inputValue(op, 0, i);
  for (int r = 0; r < nranks; ++r) {
    const double v = inputValue(op, r, i) * (op == kPreMulSum ? 2 : 1);
    if (op == ncclProd)
      acc *= static_cast<uint64_t>(v), facc *= v;
    else
      acc += static_cast<uint64_t>(v), facc += v;
    best = op == ncclMax ? std::max(best, v) : std::min(best, v);
  }
  if (op == ncclMax || op == ncclMin) return best;
  if (op == ncclAvg) return integer ? std::trunc(facc / nranks) : facc / nranks;
  if (!integer) return facc;
  double wrapped = 0;  // the accumulator truncated to the type's width, as the type wraps
  withType(type, [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_integral_v<T>) wrapped = static_cast<double>(static_cast<T>(acc));
  });
  return wrapped;
}

bool matches(ncclDataType_t type, double got, double want, int nranks) {
  if (isInteger(type)) return got == want;
  return std::fabs(got - want) <= tolerance(type, nranks) * std::max(1.0, std::fabs(want));
}

}  // namespace

double CollInfo::busFactor(int n) const {
  const std::string_view name(this->name);
  if (name == "allreduce") return n > 1 ? 2.0 * (n - 1) / n : 1;
  if (name == "broadcast" || name == "reduce" || name == "sendrecv") return 1;
  return n > 1 ? static_cast<double>(n - 1) / n : 1;
}

const CollInfo& collInfo(Coll coll) { return kInfos[static_cast<int>(coll)]; }

const char* typeName(ncclDataType_t t) {
  static const char* kNames[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                 "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return t >= 0 && t < ncclNumTypes ? kNames[t] : "?";
}

const char* opName(ncclRedOp_t op) {
  static const char* kNames[] = {"sum", "prod", "max", "min", "avg", "mulsum"};  // nccl-tests' names
  return op >= 0 && op <= kPreMulSum ? kNames[op] : "?";
}

size_t typeSize(ncclDataType_t t) {
  size_t bytes = 0;
  withType(t, [&](auto zero) { bytes = sizeof(zero); });
  return bytes;
}

Counts countsFor(Coll coll, size_t bytes, ncclDataType_t type, int n) {
  const size_t elems = bytes / typeSize(type);
  const size_t nr = static_cast<size_t>(n);
  switch (coll) {
    case Coll::kAllGather:
    case Coll::kGather: return {elems / nr, elems / nr, elems / nr * nr};
    case Coll::kReduceScatter:
    case Coll::kScatter: return {elems / nr, elems / nr * nr, elems / nr};
    case Coll::kAlltoAll: return {elems / nr, elems / nr * nr, elems / nr * nr};
    default: return {elems, elems, elems};
  }
}

ncclResult_t runColl(Coll coll, const Counts& c, ncclDataType_t type, ncclRedOp_t op, int root, bool inPlace,
                     const Buffers& b, ncclComm_t comm, int rank, int nranks) {
  char* recv = static_cast<char*>(b.recv());
  const char* send = inPlace ? recv : static_cast<const char*>(b.send());
  const size_t esz = typeSize(type);
  cudaStream_t stream = static_cast<cudaStream_t>(b.stream());
  ncclRedOp_t useOp = op;
  if (op == kPreMulSum) {
    char scalar[8];
    storeElem(type, scalar, 0, 2.0);
    ncclResult_t rc = ncclRedOpCreatePreMulSum(&useOp, scalar, type, ncclScalarHostImmediate, comm);
    if (rc != ncclSuccess) return rc;
  }
  ncclResult_t rc = ncclSuccess;
  switch (coll) {
    case Coll::kAllReduce: rc = ncclAllReduce(send, recv, c.count, type, useOp, comm, stream); break;
    case Coll::kBroadcast: rc = ncclBroadcast(send, recv, c.count, type, root, comm, stream); break;
    case Coll::kReduce: rc = ncclReduce(send, recv, c.count, type, useOp, root, comm, stream); break;
    case Coll::kAllGather:
      if (inPlace) send = recv + static_cast<size_t>(rank) * c.count * esz;
      rc = ncclAllGather(send, recv, c.count, type, comm, stream);
      break;
    case Coll::kReduceScatter:
      if (inPlace) recv += static_cast<size_t>(rank) * c.count * esz;
      rc = ncclReduceScatter(send, recv, c.count, type, useOp, comm, stream);
      break;
    case Coll::kAlltoAll: rc = ncclAlltoAll(send, recv, c.count, type, comm, stream); break;
    case Coll::kGather: rc = ncclGather(send, recv, c.count, type, root, comm, stream); break;
    case Coll::kScatter: rc = ncclScatter(send, recv, c.count, type, root, comm, stream); break;
    case Coll::kSendRecv:
      ncclGroupStart();
      ncclSend(send, c.count, type, (rank + 1) % nranks, comm, stream);
      ncclRecv(recv, c.count, type, (rank + nranks - 1) % nranks, comm, stream);
      rc = ncclGroupEnd();
      break;
  }
  if (op == kPreMulSum) ncclRedOpDestroy(useOp, comm);
  return rc;
}

void fillCheck(Coll coll, const Counts& c, ncclDataType_t type, ncclRedOp_t op, bool inPlace, const Buffers& b,
               int rank) {
  const size_t esz = typeSize(type);
  // Inputs: rank r's send element j is inputValue(op, r, j).
  std::vector<char> host(c.sendElems * esz);
  for (size_t j = 0; j < c.sendElems; ++j) storeElem(type, host.data(), j, inputValue(op, rank, j));
  char* dst = static_cast<char*>(inPlace ? b.recv() : b.send());
  if (inPlace && coll == Coll::kAllGather) dst += static_cast<size_t>(rank) * c.count * esz;
  b.upload(dst, host.data(), c.sendElems * esz);
}

int64_t verifyCheck(Coll coll, const Counts& c, ncclDataType_t type, ncclRedOp_t op, int root, bool inPlace,
                    const Buffers& b, int rank, int nranks) {
  const size_t esz = typeSize(type);
  const size_t n = static_cast<size_t>(nranks);
  const char* out = static_cast<const char*>(b.recv());
  size_t first = 0, elems = c.recvElems;
  if (coll == Coll::kReduceScatter && inPlace) first = static_cast<size_t>(rank) * c.count;
  if ((coll == Coll::kReduce || coll == Coll::kGather) && rank != root) elems = 0;
  std::vector<char> host(std::max<size_t>(1, elems) * esz, 0);
  b.download(host.data(), out + first * esz, elems * esz);
  const size_t me = static_cast<size_t>(rank);
  int64_t wrong = 0;
  for (size_t i = 0; i < elems; ++i) {
    double want = 0;
    switch (coll) {
      case Coll::kAllReduce:
      case Coll::kReduce: want = reduceRef(type, op, nranks, i); break;
      case Coll::kReduceScatter: want = reduceRef(type, op, nranks, me * c.count + i); break;
      case Coll::kBroadcast: want = inputValue(op, root, i); break;
      case Coll::kAllGather:
      case Coll::kGather: want = inputValue(op, static_cast<int>(i / c.count), i % c.count); break;
      case Coll::kAlltoAll: want = inputValue(op, static_cast<int>(i / c.count), me * c.count + i % c.count); break;
      case Coll::kScatter: want = inputValue(op, root, me * c.count + i); break;
      case Coll::kSendRecv: want = inputValue(op, static_cast<int>((me + n - 1) % n), i); break;
    }
    if (!matches(type, loadElem(type, host.data(), i), want, nranks)) ++wrong;
  }
  return wrong;
}

}  // namespace weft::perf
