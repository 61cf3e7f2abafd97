// Facts about ncclDataType_t values, on the host side.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl.h"

namespace weft::core {

inline bool validDataType(int type) { return type >= 0 && type < ncclNumTypes; }
size_t typeSize(ncclDataType_t type);
bool isFloatType(ncclDataType_t type);
const char* typeName(ncclDataType_t type);
const char* opName(ncclRedOp_t op);

// The bytes of `value` converted to `type`, zero-extended into 64 bits (for
// scalars carried in work descriptors, such as 1/nranks).
uint64_t scalarBitsFromDouble(ncclDataType_t type, double value);

}  // namespace weft::core
