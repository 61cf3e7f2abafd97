#include "core/datatypes.h"

#include <cstring>

#include "device/types.h"

namespace weft::core {

size_t typeSize(ncclDataType_t type) {
  switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
  }
}

bool isFloatType(ncclDataType_t type) {
  return type == ncclFloat16 || type == ncclFloat32 || type == ncclFloat64 || type == ncclBfloat16 ||
         type == ncclFloat8e4m3 || type == ncclFloat8e5m2;
}

const char* typeName(ncclDataType_t type) {
  static const char* const kNames[] = {"int8", "uint8", "int32",  "uint32",   "int64",  "uint64",
                                       "half", "float", "double", "bfloat16", "f8e4m3", "f8e5m2"};
  return validDataType(type) ? kNames[type] : "invalid";
}

const char* opName(ncclRedOp_t op) {
  static const char* const kNames[] = {"sum", "prod", "max", "min", "avg"};
  return op >= 0 && op < ncclNumOps ? kNames[op] : "premulsum";
}

uint64_t scalarBitsFromDouble(ncclDataType_t type, double value) {
  using namespace weft::device;
  uint64_t bits = 0;
  auto store = [&bits](const auto& v) { std::memcpy(&bits, &v, sizeof(v)); };
  switch (type) {
    case ncclInt8: store(static_cast<int8_t>(value)); break;
    case ncclUint8: store(static_cast<uint8_t>(value)); break;
    case ncclInt32: store(static_cast<int32_t>(value)); break;
    case ncclUint32: store(static_cast<uint32_t>(value)); break;
    case ncclInt64: store(static_cast<int64_t>(value)); break;
    case ncclUint64: store(static_cast<uint64_t>(value)); break;
    case ncclFloat16: store(fromDouble<half_t>(value)); break;
    case ncclFloat32: store(static_cast<float>(value)); break;
    case ncclFloat64: store(value); break;
    case ncclBfloat16: store(fromDouble<bfloat16_t>(value)); break;
    case ncclFloat8e4m3: store(fromDouble<fp8e4m3_t>(value)); break;
    case ncclFloat8e5m2: store(fromDouble<fp8e5m2_t>(value)); break;
    default: break;
  }
  return bits;
}

}  // namespace weft::core
