"""Python bindings of Weft, a collective communication library with NCCL's API.

    import weft
    uid = weft.UniqueId.create()                 # on one rank; send it to the others
    with weft.Communicator(nranks, uid, rank) as comm:
        total = comm.all_reduce(numpy_array)     # host backend: NumPy arrays
        comm.all_reduce(cupy_array, cupy_array)  # cuda backend: DLPack / CUDA array interface

The library is found through WEFT_LIBRARY, the build trees of the source tree
this package is in, WEFT_HOME, or the loader path; `weft.library_path()` says
which file was loaded (never NVIDIA's libnccl: it is checked for).
`weft.torch_backend` registers the torch.distributed backend "weft".
"""

import ctypes as _ctypes

from . import _library
from ._capi import api as _api
from .buffers import Buffer, as_buffer
from .communicator import Communicator, Config, UniqueId, get_unique_id
from .errors import Result, WeftError, check as _check
from .group import group, group_end, group_start
from .types import AVG, MAX, MIN, PROD, SUM, DataType, RedOp

LibraryNotFound = _library.LibraryNotFound
__version__ = "0.1.0"


def library_path():
    """The path of the Weft library file this process loaded."""
    return _library.library_path()


def nccl_version():
    """The NCCL API level the library implements, e.g. 22707 for 2.27.7."""
    version = _ctypes.c_int()
    _check("ncclGetVersion", _api.ncclGetVersion(_ctypes.byref(version)))
    return version.value


def weft_version():
    """Weft's version and build options, e.g. 'weft 0.1.0 (cuda: off)'."""
    return _api.weftGetVersionString().decode()


__all__ = [
    "AVG", "MAX", "MIN", "PROD", "SUM", "Buffer", "Communicator", "Config", "DataType",
    "LibraryNotFound", "RedOp", "Result", "UniqueId", "WeftError", "as_buffer", "get_unique_id",
    "group", "group_end", "group_start", "library_path", "nccl_version", "weft_version",
]
