"""Inputs and expected results for the collective tests.

Every rank builds every rank's input from (rank, seed), so each can compute
the expected result alone. Values are small integers: every sum, product,
max, min and (nranks a power of two) average is exact in every type, so
results are compared exactly whatever order the library reduces in.

NumPy has no bfloat16 or fp8 types: those run on uint16 / uint8 arrays of raw
bits, handed to the library as DLPack tensors of the right type (see
fake_arrays.RawDLPack), and are decoded here for the comparison.
"""

import numpy as np

# name -> (numpy storage dtype, DLPack (code, bits) or None for native NumPy types)
TYPES = {
    "int8": (np.int8, None), "uint8": (np.uint8, None), "int32": (np.int32, None),
    "uint32": (np.uint32, None), "int64": (np.int64, None), "uint64": (np.uint64, None),
    "float16": (np.float16, None), "float32": (np.float32, None), "float64": (np.float64, None),
    "bfloat16": (np.uint16, (4, 16)), "float8_e4m3": (np.uint8, (10, 8)), "float8_e5m2": (np.uint8, (12, 8)),
}
NATIVE = [name for name, (_, raw) in TYPES.items() if raw is None]
RAW = [name for name, (_, raw) in TYPES.items() if raw is not None]
OPS = ["sum", "prod", "max", "min", "avg"]


def _fp8_table(exponent_bits, mantissa_bits, bias):
    """value of each of the 256 codes (NaN where the format has one)."""
    values = np.empty(256, dtype=np.float64)
    for code in range(256):
        sign = -1.0 if code & 0x80 else 1.0
        exponent = (code >> mantissa_bits) & ((1 << exponent_bits) - 1)
        mantissa = code & ((1 << mantissa_bits) - 1)
        if exponent == 0:
            values[code] = sign * mantissa / (1 << mantissa_bits) * 2.0 ** (1 - bias)
        else:
            values[code] = sign * (1 + mantissa / (1 << mantissa_bits)) * 2.0 ** (exponent - bias)
    return values


_E4M3 = _fp8_table(4, 3, 7)
_E4M3[0x7F] = _E4M3[0xFF] = np.nan  # e4m3fn: only S.1111.111 is NaN, no infinities
_E5M2 = _fp8_table(5, 2, 15)
_E5M2[[0x7C, 0xFC]] = [np.inf, -np.inf]
_E5M2[[c for c in range(256) if (c & 0x7C) == 0x7C and (c & 0x03)]] = np.nan
_FP8 = {"float8_e4m3": _E4M3, "float8_e5m2": _E5M2}


def _encoding(table):
    """(sorted finite values, their codes), +0 for zero."""
    codes = [c for c in range(256) if np.isfinite(table[c]) and not (table[c] == 0 and c & 0x80)]
    codes.sort(key=lambda c: table[c])
    return table[codes], np.array(codes)


_FP8_CODES = {name: _encoding(table) for name, table in _FP8.items()}


def decode(name, storage):
    """The values held by `storage` (raw bits for the RAW types) as float64/int."""
    if name == "bfloat16":
        return (storage.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
    if name in _FP8:
        return _FP8[name][storage]
    return storage


def encode(name, values):
    """Storage for `values` (exactly representable small integers) in type `name`."""
    if name == "bfloat16":
        bits = np.asarray(values, dtype=np.float32).view(np.uint32)
        assert not np.any(bits & 0xFFFF), "value not exact in bfloat16"
        return (bits >> 16).astype(np.uint16)
    if name in _FP8:
        finite, codes = _FP8_CODES[name]
        flat = np.ravel(np.asarray(values, dtype=np.float64))
        index = np.clip(np.searchsorted(finite, flat), 0, finite.size - 1)
        assert np.array_equal(finite[index], flat), f"value not exact in {name}"
        return codes[index].astype(np.uint8).reshape(np.shape(values))
    return np.asarray(values).astype(TYPES[name][0])


def _value_range(name, op, nranks):
    """Inclusive bounds keeping every result exact and in range."""
    unsigned = name.startswith("uint")
    if op == "prod":
        return (1, 2) if unsigned or name == "float8_e5m2" else (-2, 2)
    limit = 8 // nranks if name in ("int8", "float8_e4m3", "float8_e5m2") else 8
    return (0, 2 * limit) if unsigned else (-limit, limit)


def rank_input(name, op, nranks, rank, count, seed=0):
    """Rank `rank`'s input values (as float64/int64, before encoding)."""
    low, high = _value_range(name, op, nranks)
    rng = np.random.default_rng([seed, rank, count, len(name), OPS.index(op) if op in OPS else 9])
    values = rng.integers(low, high + 1, size=count)
    if name.startswith("float") or name == "bfloat16":
        values = values.astype(np.float64)
    return values


def reduce_values(op, inputs):
    """The reduction of a list of value arrays, with NCCL's semantics."""
    stacked = np.stack(inputs)
    if op == "sum":
        return stacked.sum(axis=0)
    if op == "prod":
        return stacked.prod(axis=0)
    if op == "max":
        return stacked.max(axis=0)
    if op == "min":
        return stacked.min(axis=0)
    total = stacked.sum(axis=0)
    if np.issubdtype(total.dtype, np.integer):
        return np.trunc(total / len(inputs)).astype(total.dtype)  # integers: truncated quotient
    return total / len(inputs)


def all_inputs(name, op, nranks, count, seed=0):
    return [rank_input(name, op, nranks, r, count, seed) for r in range(nranks)]
