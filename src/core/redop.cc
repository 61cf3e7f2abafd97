#include "core/redop.h"

#include <cstring>

#include "core/datatypes.h"

namespace weft::core {

Result<ncclRedOp_t> RedOpTable::createPreMulSum(const void* scalar, ncclDataType_t type,
                                                ncclScalarResidence_t residence) {
  if (!validDataType(type))
    return errorStatus(ncclInvalidArgument, "datatype %d is not a valid ncclDataType_t (expected 0..%d)",
                       static_cast<int>(type), ncclNumTypes - 1);
  if (scalar == nullptr)
    return errorStatus(ncclInvalidArgument, "scalar is NULL, expected a pointer to a %s", typeName(type));
  if (residence != ncclScalarHostImmediate && residence != ncclScalarDevice)
    return errorStatus(ncclInvalidArgument,
                       "residence is %d, expected ncclScalarDevice (0) or ncclScalarHostImmediate (1)",
                       static_cast<int>(residence));
  UserOp op;
  op.live = true;
  op.type = type;
  op.resolved.kind = device::RedOpKind::kPreMulSum;
  if (residence == ncclScalarHostImmediate) {
    std::memcpy(&op.resolved.scalarBits, scalar, typeSize(type));
  } else {
    op.resolved.scalarIsPointer = true;
    op.resolved.scalarPtr = scalar;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  for (size_t i = 0; i < ops_.size(); ++i) {
    if (!ops_[i].live) {
      ops_[i] = op;
      return static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(i));
    }
  }
  if (ncclNumOps + ops_.size() >= static_cast<size_t>(ncclMaxRedOp))
    return errorStatus(ncclInvalidUsage, "too many live reduction operations on this communicator");
  ops_.push_back(op);
  return static_cast<ncclRedOp_t>(ncclNumOps + static_cast<int>(ops_.size() - 1));
}

Status RedOpTable::destroy(ncclRedOp_t op) {
  if (op >= 0 && op < ncclNumOps)
    return errorStatus(ncclInvalidArgument, "op %d is a built-in reduction and cannot be destroyed",
                       static_cast<int>(op));
  std::lock_guard<std::mutex> lock(mutex_);
  size_t index = static_cast<size_t>(op) - ncclNumOps;
  if (op < 0 || index >= ops_.size() || !ops_[index].live)
    return errorStatus(ncclInvalidArgument,
                       "op %d was not created by ncclRedOpCreatePreMulSum on this communicator "
                       "(or was already destroyed)",
                       static_cast<int>(op));
  ops_[index].live = false;
  return okStatus();
}

Result<ResolvedOp> RedOpTable::resolve(ncclRedOp_t op, ncclDataType_t type, int nranks) const {
  ResolvedOp out;
  switch (op) {
    case ncclSum: out.kind = device::RedOpKind::kSum; return out;
    case ncclProd: out.kind = device::RedOpKind::kProd; return out;
    case ncclMax: out.kind = device::RedOpKind::kMax; return out;
    case ncclMin: out.kind = device::RedOpKind::kMin; return out;
    case ncclAvg:
      if (isFloatType(type)) {
        out.kind = device::RedOpKind::kPreMulSum;
        out.scalarBits = scalarBitsFromDouble(type, 1.0 / nranks);
      } else {
        out.kind = device::RedOpKind::kSumPostDiv;
        out.scalarBits = static_cast<uint64_t>(nranks);
      }
      return out;
    default: break;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  size_t index = static_cast<size_t>(op) - ncclNumOps;
  if (op < 0 || index >= ops_.size() || !ops_[index].live)
    return errorStatus(ncclInvalidArgument,
                       "op %d is not a reduction of this communicator (built-in 0..%d, or one made here by "
                       "ncclRedOpCreatePreMulSum and not destroyed)",
                       static_cast<int>(op), ncclNumOps - 1);
  if (ops_[index].type != type)
    return errorStatus(ncclInvalidArgument, "op %d was created for datatype %s but the collective uses %s",
                       static_cast<int>(op), typeName(ops_[index].type), typeName(type));
  return ops_[index].resolved;
}

}  // namespace weft::core
