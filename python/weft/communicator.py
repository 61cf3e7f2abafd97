"""Communicators: unique ids, init, split, finalize, destroy, abort."""

import ctypes
import dataclasses
import threading
from typing import Optional

from . import _capi
from ._capi import api
from .collectives import Collectives
from .errors import check

_BACKENDS = {0: "host", 1: "cuda"}


class UniqueId:
    """The 128-byte bootstrap id: made once (usually by rank 0), given to every rank.

    It pickles, so it travels through multiprocessing pipes and queues; as
    bytes (`bytes(uid)`, `UniqueId.from_bytes`) it goes through anything else
    (a key-value store, MPI, a file).
    """

    __slots__ = ("_raw",)

    def __init__(self, raw: bytes):
        if not isinstance(raw, (bytes, bytearray)) or len(raw) != _capi.UNIQUE_ID_BYTES:
            raise ValueError(f"a unique id is {_capi.UNIQUE_ID_BYTES} bytes, got "
                             f"{len(raw) if isinstance(raw, (bytes, bytearray)) else type(raw).__name__}")
        self._raw = bytes(raw)

    @classmethod
    def create(cls):
        """A new id (ncclGetUniqueId): starts the bootstrap root in this process."""
        raw = _capi.UniqueIdStruct()
        check("ncclGetUniqueId", api.ncclGetUniqueId(ctypes.byref(raw)))
        return cls(ctypes.string_at(ctypes.addressof(raw), _capi.UNIQUE_ID_BYTES))

    @classmethod
    def from_bytes(cls, raw):
        """The id whose bytes(uid) is `raw`."""
        return cls(raw)

    def __bytes__(self):
        return self._raw

    def __reduce__(self):
        return (UniqueId, (self._raw,))

    def __eq__(self, other):
        return isinstance(other, UniqueId) and other._raw == self._raw

    def __hash__(self):
        return hash(self._raw)

    def _struct(self):
        raw = _capi.UniqueIdStruct()
        ctypes.memmove(ctypes.addressof(raw), self._raw, _capi.UNIQUE_ID_BYTES)
        return raw


def get_unique_id():
    """Same as UniqueId.create()."""
    return UniqueId.create()


@dataclasses.dataclass
class Config:
    """ncclConfig_t fields; None leaves a field at the library's default.

    Non-blocking communicators (NCCL's `blocking = 0`) are not offered: every
    call of this package returns when the library does.
    """

    min_ctas: Optional[int] = None
    max_ctas: Optional[int] = None
    cga_cluster_size: Optional[int] = None
    net_name: Optional[str] = None
    comm_name: Optional[str] = None
    split_share: Optional[int] = None
    traffic_class: Optional[int] = None
    collnet_enable: Optional[int] = None
    cta_policy: Optional[int] = None
    shrink_share: Optional[int] = None
    nvls_ctas: Optional[int] = None

    _FIELDS = {"min_ctas": "minCTAs", "max_ctas": "maxCTAs", "cga_cluster_size": "cgaClusterSize",
               "net_name": "netName", "comm_name": "commName", "split_share": "splitShare",
               "traffic_class": "trafficClass", "collnet_enable": "collnetEnable",
               "cta_policy": "CTAPolicy", "shrink_share": "shrinkShare", "nvls_ctas": "nvlsCTAs"}

    def to_struct(self):
        version = ctypes.c_int()
        check("ncclGetVersion", api.ncclGetVersion(ctypes.byref(version)))
        config = _capi.new_config(version.value)
        config.blocking = 1
        for field, c_name in self._FIELDS.items():
            value = getattr(self, field)
            if value is not None:
                # ctypes keeps the bytes of a c_char_p field alive with the struct.
                setattr(config, c_name, value.encode() if isinstance(value, str) else int(value))
        return config


def _config_pointer(config):
    if config is None:
        return None
    if not isinstance(config, Config):
        raise TypeError(f"config is a {type(config).__name__}, expected weft.Config")
    return ctypes.byref(config.to_struct())


class Communicator(Collectives):
    """One rank of an NCCL communicator.

    Make one per process with `Communicator(nranks, unique_id, rank)`, or all
    ranks in one process with `Communicator.init_all(n)`. Use it as a context
    manager, or call destroy() (or abort()) when done; a communicator dropped
    while still open is destroyed by the garbage collector.
    """

    def __init__(self, nranks, unique_id, rank, config=None):
        if not isinstance(unique_id, UniqueId):
            raise TypeError(f"unique_id is a {type(unique_id).__name__}, expected weft.UniqueId")
        handle = ctypes.c_void_p()
        config_ptr = _config_pointer(config)
        if config_ptr is None:
            result = api.ncclCommInitRank(ctypes.byref(handle), int(nranks), unique_id._struct(), int(rank))
            check("ncclCommInitRank", result)
        else:
            result = api.ncclCommInitRankConfig(ctypes.byref(handle), int(nranks), unique_id._struct(),
                                                int(rank), config_ptr)
            check("ncclCommInitRankConfig", result)
        self._adopt(handle.value)

    def _adopt(self, handle):
        self._handle = handle
        self._lock = threading.Lock()
        self._rank = self._query("ncclCommUserRank")
        self._size = self._query("ncclCommCount")
        self._device = self._query("ncclCommCuDevice")
        self._backend = _BACKENDS.get(self._query("weftCommGetBackend"), "unknown")

    @classmethod
    def _from_handle(cls, handle):
        comm = cls.__new__(cls)
        comm._adopt(handle)
        return comm

    @classmethod
    def init_all(cls, ndev, devices=None):
        """`ndev` ranks in this process (ncclCommInitAll); returns them in rank order.

        On the cuda backend `devices` lists the GPU of each rank (default
        0..ndev-1; a GPU may appear several times); the host backend ignores it.
        """
        handles = (ctypes.c_void_p * int(ndev))()
        devlist = None
        if devices is not None:
            devices = [int(d) for d in devices]
            if len(devices) != ndev:
                raise ValueError(f"devices has {len(devices)} entries, expected ndev = {ndev}")
            devlist = (ctypes.c_int * ndev)(*devices)
        check("ncclCommInitAll", api.ncclCommInitAll(handles, int(ndev), devlist))
        return [cls._from_handle(h) for h in handles]

    def _query(self, function):
        value = ctypes.c_int()
        check(function, getattr(api, function)(self._handle, ctypes.byref(value)), self._handle)
        return value.value

    def _live_handle(self):
        handle = self._handle
        if handle is None:
            raise ValueError("the communicator was destroyed or aborted")
        return handle

    rank = property(lambda self: self._rank, doc="This rank (ncclCommUserRank).")
    size = property(lambda self: self._size, doc="Number of ranks (ncclCommCount).")
    device = property(lambda self: self._device, doc="CUDA device of this rank; -1 on the host backend.")
    backend = property(lambda self: self._backend, doc="'host' or 'cuda' (weftCommGetBackend).")
    closed = property(lambda self: self._handle is None, doc="Whether destroy() or abort() was called.")

    def describe(self):
        """A one-line description: rank, size, backend, channels (weftCommDescribe)."""
        buf = ctypes.create_string_buffer(4096)
        handle = self._live_handle()
        check("weftCommDescribe", api.weftCommDescribe(handle, buf, len(buf)), handle)
        return buf.value.decode(errors="replace")

    def async_error(self):
        """The communicator's asynchronous error state (ncclCommGetAsyncError) as a Result."""
        from .errors import Result
        handle = self._live_handle()
        state = ctypes.c_int()
        check("ncclCommGetAsyncError", api.ncclCommGetAsyncError(handle, ctypes.byref(state)), handle)
        return Result(state.value)

    def split(self, color, key=None, config=None):
        """ncclCommSplit: ranks with the same color form a communicator, ordered by key
        (default: this rank). `color=None` (NCCL_SPLIT_NOCOLOR) takes part without
        joining one and returns None. Every rank must call it."""
        handle = self._live_handle()
        new_handle = ctypes.c_void_p()
        color = _capi.SPLIT_NOCOLOR if color is None else int(color)
        key = self._rank if key is None else int(key)
        check("ncclCommSplit", api.ncclCommSplit(handle, color, key, ctypes.byref(new_handle),
                                                 _config_pointer(config)), handle)
        return Communicator._from_handle(new_handle.value) if new_handle.value else None

    def finalize(self):
        """ncclCommFinalize: waits for outstanding work; only destroy() may follow."""
        handle = self._live_handle()
        check("ncclCommFinalize", api.ncclCommFinalize(handle), handle)

    def _release(self, function):
        # The handle is cleared before the call, so that a call failing in
        # another thread because of an abort no longer asks the freed
        # communicator for its message.
        with self._lock:
            handle, self._handle = self._handle, None
        if handle is None:
            return
        check(function, getattr(api, function)(handle))

    def destroy(self):
        """ncclCommDestroy: frees the communicator (a no-op once closed)."""
        self._release("ncclCommDestroy")

    def abort(self):
        """ncclCommAbort: makes calls blocked in other threads fail at once, then frees."""
        self._release("ncclCommAbort")

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            self.destroy()
        else:
            self.abort()  # peers may be stuck waiting for this rank: do not wait for them
        return False

    def __del__(self):
        if getattr(self, "_handle", None) is not None:
            try:
                self.destroy()
            except Exception:  # nothing useful to do with it while collected
                pass

    def __repr__(self):
        state = "closed" if self._handle is None else f"rank {self._rank} of {self._size}, {self._backend}"
        return f"<weft.Communicator {state}>"
