"""ctypes declarations of the C API (nccl.h and weft.h) the package uses.

Every function gets its argtypes and restype, so a wrong argument is a
Python TypeError rather than a corrupted call. ctypes releases the GIL
around each call, so a collective blocking in one thread does not stop the
others (an abort from another thread, for instance).
"""

import ctypes

from . import _library

UNIQUE_ID_BYTES = 128
SPLIT_NOCOLOR = -1
CONFIG_UNDEF_INT = -(2**31)
_CONFIG_MAGIC = 0xCAFEBEEF

c_comm = ctypes.c_void_p
c_result = ctypes.c_int
c_size = ctypes.c_size_t
c_int = ctypes.c_int
c_ptr = ctypes.c_void_p


class UniqueIdStruct(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class ConfigStruct(ctypes.Structure):
    """ncclConfig_t as of NCCL 2.27 (the size/magic/version handshake lets
    the library read it field by field)."""

    _fields_ = [
        ("size", ctypes.c_size_t),
        ("magic", ctypes.c_uint),
        ("version", ctypes.c_uint),
        ("blocking", ctypes.c_int),
        ("cgaClusterSize", ctypes.c_int),
        ("minCTAs", ctypes.c_int),
        ("maxCTAs", ctypes.c_int),
        ("netName", ctypes.c_char_p),
        ("splitShare", ctypes.c_int),
        ("trafficClass", ctypes.c_int),
        ("commName", ctypes.c_char_p),
        ("collnetEnable", ctypes.c_int),
        ("CTAPolicy", ctypes.c_int),
        ("shrinkShare", ctypes.c_int),
        ("nvlsCTAs", ctypes.c_int),
    ]


def new_config(api_version):
    """A ConfigStruct initialised as NCCL_CONFIG_INITIALIZER does."""
    config = ConfigStruct()
    config.size = ctypes.sizeof(ConfigStruct)
    config.magic = _CONFIG_MAGIC
    config.version = api_version
    for name, ctype in ConfigStruct._fields_[3:]:
        if ctype is ctypes.c_int:
            setattr(config, name, CONFIG_UNDEF_INT)
    return config


_P = ctypes.POINTER
_COLL = [c_ptr, c_ptr, c_size, c_int]  # sendbuff, recvbuff, count, datatype

_SIGNATURES = {
    "ncclGetVersion": (c_result, [_P(c_int)]),
    "weftGetVersionString": (ctypes.c_char_p, []),
    "ncclGetUniqueId": (c_result, [_P(UniqueIdStruct)]),
    "ncclCommInitRank": (c_result, [_P(c_comm), c_int, UniqueIdStruct, c_int]),
    "ncclCommInitRankConfig": (c_result, [_P(c_comm), c_int, UniqueIdStruct, c_int, _P(ConfigStruct)]),
    "ncclCommInitAll": (c_result, [_P(c_comm), c_int, _P(c_int)]),
    "ncclCommSplit": (c_result, [c_comm, c_int, c_int, _P(c_comm), _P(ConfigStruct)]),
    "ncclCommFinalize": (c_result, [c_comm]),
    "ncclCommDestroy": (c_result, [c_comm]),
    "ncclCommAbort": (c_result, [c_comm]),
    "ncclCommGetAsyncError": (c_result, [c_comm, _P(c_result)]),
    "ncclCommCount": (c_result, [c_comm, _P(c_int)]),
    "ncclCommUserRank": (c_result, [c_comm, _P(c_int)]),
    "ncclCommCuDevice": (c_result, [c_comm, _P(c_int)]),
    "weftCommGetBackend": (c_result, [c_comm, _P(c_int)]),
    "weftCommDescribe": (c_result, [c_comm, ctypes.c_char_p, c_size]),
    "ncclGetErrorString": (ctypes.c_char_p, [c_result]),
    "ncclGetLastError": (ctypes.c_char_p, [c_comm]),
    "ncclRedOpCreatePreMulSum": (c_result, [_P(c_int), c_ptr, c_int, c_int, c_comm]),
    "ncclRedOpDestroy": (c_result, [c_int, c_comm]),
    "ncclAllReduce": (c_result, _COLL + [c_int, c_comm, c_ptr]),
    "ncclBroadcast": (c_result, _COLL + [c_int, c_comm, c_ptr]),
    "ncclReduce": (c_result, _COLL + [c_int, c_int, c_comm, c_ptr]),
    "ncclAllGather": (c_result, _COLL + [c_comm, c_ptr]),
    "ncclReduceScatter": (c_result, _COLL + [c_int, c_comm, c_ptr]),
    "ncclAlltoAll": (c_result, _COLL + [c_comm, c_ptr]),
    "ncclGather": (c_result, _COLL + [c_int, c_comm, c_ptr]),
    "ncclScatter": (c_result, _COLL + [c_int, c_comm, c_ptr]),
    "ncclSend": (c_result, [c_ptr, c_size, c_int, c_int, c_comm, c_ptr]),
    "ncclRecv": (c_result, [c_ptr, c_size, c_int, c_int, c_comm, c_ptr]),
    "ncclGroupStart": (c_result, []),
    "ncclGroupEnd": (c_result, []),
}


class _Api:
    """The library's functions as attributes, declared on first use."""

    def __init__(self):
        self._lib = None

    def __getattr__(self, name):
        if name not in _SIGNATURES:
            raise AttributeError(name)
        if self._lib is None:
            self._lib = _library.load()[0]
        fn = getattr(self._lib, name)
        fn.restype, fn.argtypes = _SIGNATURES[name]
        setattr(self, name, fn)  # later lookups skip __getattr__
        return fn


api = _Api()
