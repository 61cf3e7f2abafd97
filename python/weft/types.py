"""Element types and reduction operators, with the NCCL values they map to."""

import enum


class DataType(enum.IntEnum):
    """ncclDataType_t."""

    INT8 = 0
    UINT8 = 1
    INT32 = 2
    UINT32 = 3
    INT64 = 4
    UINT64 = 5
    FLOAT16 = 6
    FLOAT32 = 7
    FLOAT64 = 8
    BFLOAT16 = 9
    FLOAT8_E4M3 = 10
    FLOAT8_E5M2 = 11

    @property
    def itemsize(self):
        return _ITEMSIZE[self]


_ITEMSIZE = {
    DataType.INT8: 1, DataType.UINT8: 1, DataType.INT32: 4, DataType.UINT32: 4,
    DataType.INT64: 8, DataType.UINT64: 8, DataType.FLOAT16: 2, DataType.FLOAT32: 4,
    DataType.FLOAT64: 8, DataType.BFLOAT16: 2, DataType.FLOAT8_E4M3: 1, DataType.FLOAT8_E5M2: 1,
}


class RedOp(enum.IntEnum):
    """The built-in ncclRedOp_t values (PreMulSum ops are made per communicator)."""

    SUM = 0
    PROD = 1
    MAX = 2
    MIN = 3
    AVG = 4


SUM, PROD, MAX, MIN, AVG = RedOp.SUM, RedOp.PROD, RedOp.MAX, RedOp.MIN, RedOp.AVG

# NumPy dtype names (ml_dtypes provides the last three) to NCCL types.
BY_DTYPE_NAME = {
    "int8": DataType.INT8, "uint8": DataType.UINT8, "int32": DataType.INT32,
    "uint32": DataType.UINT32, "int64": DataType.INT64, "uint64": DataType.UINT64,
    "float16": DataType.FLOAT16, "float32": DataType.FLOAT32, "float64": DataType.FLOAT64,
    "bfloat16": DataType.BFLOAT16, "float8_e4m3fn": DataType.FLOAT8_E4M3,
    "float8_e5m2": DataType.FLOAT8_E5M2,
}

# Array-interface type strings (kind letter, bytes) to NCCL types.
BY_TYPESTR = {
    ("i", 1): DataType.INT8, ("u", 1): DataType.UINT8, ("i", 4): DataType.INT32,
    ("u", 4): DataType.UINT32, ("i", 8): DataType.INT64, ("u", 8): DataType.UINT64,
    ("f", 2): DataType.FLOAT16, ("f", 4): DataType.FLOAT32, ("f", 8): DataType.FLOAT64,
}

# DLPack (type code, bits) to NCCL types. Codes from dlpack.h: kDLInt 0,
# kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12.
BY_DLPACK = {
    (0, 8): DataType.INT8, (1, 8): DataType.UINT8, (0, 32): DataType.INT32,
    (1, 32): DataType.UINT32, (0, 64): DataType.INT64, (1, 64): DataType.UINT64,
    (2, 16): DataType.FLOAT16, (2, 32): DataType.FLOAT32, (2, 64): DataType.FLOAT64,
    (4, 16): DataType.BFLOAT16, (10, 8): DataType.FLOAT8_E4M3, (12, 8): DataType.FLOAT8_E5M2,
}

_OP_NAMES = {"sum": RedOp.SUM, "prod": RedOp.PROD, "max": RedOp.MAX, "min": RedOp.MIN,
             "avg": RedOp.AVG}


def as_op(op):
    """An ncclRedOp_t value from a RedOp, a name ("sum") or an int (PreMulSum ops)."""
    if isinstance(op, str):
        try:
            return int(_OP_NAMES[op.lower()])
        except KeyError:
            raise ValueError(f"op is {op!r}, expected one of {sorted(_OP_NAMES)}") from None
    if isinstance(op, bool) or not isinstance(op, int):
        raise TypeError(f"op is {op!r}, expected a weft.RedOp, its name or an int")
    return int(op)
