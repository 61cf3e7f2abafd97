// Reduction operations as the data path sees them: the API's ncclRedOp_t
// (built-in, or created per communicator by ncclRedOpCreatePreMulSum)
// resolved against a datatype into a functor kind and its scalar.
#pragma once

#include <mutex>
#include <vector>

#include "common/status.h"
#include "device/reduce_ops.h"
#include "nccl.h"

namespace weft::core {

struct ResolvedOp {
  device::RedOpKind kind = device::RedOpKind::kSum;
  bool scalarIsPointer = false;
  uint64_t scalarBits = 0;  // PreMulSum immediate (bytes of the datatype) or SumPostDiv divisor
  const void* scalarPtr = nullptr;
};

class RedOpTable {
 public:
  Result<ncclRedOp_t> createPreMulSum(const void* scalar, ncclDataType_t type, ncclScalarResidence_t residence);
  Status destroy(ncclRedOp_t op);
  // Checks `op` for this communicator and `type`, and resolves it. Avg is
  // PreMulSum by 1/nranks for floating types (as NCCL does, which keeps fp16
  // sums from overflowing) and a truncating division of the sum for integers.
  Result<ResolvedOp> resolve(ncclRedOp_t op, ncclDataType_t type, int nranks) const;

 private:
  struct UserOp {
    bool live = false;
    ncclDataType_t type = ncclFloat32;
    ResolvedOp resolved;
  };
  mutable std::mutex mutex_;
  std::vector<UserOp> ops_;
};

}  // namespace weft::core
