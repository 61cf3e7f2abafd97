"""Collectives and point-to-point calls of a Communicator.

Every method takes array objects (see buffers.py), checks what the C API
cannot (element counts and types of the two buffers, read-only outputs,
memory the backend cannot reach), and calls the library. Outputs may be
omitted when the input is a NumPy array: a new array is returned. Counts are
in elements, as in NCCL; shapes are the caller's business except where an
output is allocated.

On the host backend a call returns when it is complete (inside a group: at
the outermost group end). On the cuda backend it is queued on `stream` (an
int handle, an object with `.cuda_stream`/`.ptr`, or None: the array's own
stream from its CUDA array interface, else the legacy default stream) and the
arrays must stay alive until the stream has run it.
"""

import ctypes

from ._capi import api
from .buffers import CUDA, HOST, as_buffer
from .errors import check
from .group import keep_until_group_end
from .types import as_op

try:
    import numpy as _np
except ImportError:  # the package works without NumPy, on other arrays
    _np = None


def stream_handle(stream):
    """A cudaStream_t value from the ways Python libraries name streams."""
    if stream is None:
        return None
    if isinstance(stream, int):
        return stream
    if hasattr(stream, "__cuda_stream__"):  # CUDA stream protocol: (version, handle)
        return int(stream.__cuda_stream__()[1])
    for attribute in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attribute):
            return int(getattr(stream, attribute))
    raise TypeError(f"stream is a {type(stream).__name__}; expected an int handle, a CUDA stream object or None")


def _allocate_like(template, shape, name):
    if _np is not None and isinstance(template, _np.ndarray):
        return _np.empty(shape, dtype=template.dtype)
    raise TypeError(f"{name} is required when the input is not a NumPy array "
                    f"(got {type(template).__name__}); pass an output array of shape {shape}")


class Collectives:
    """Mixin of Communicator; needs _live_handle(), _handle, _rank, _size, _backend."""

    # --- helpers ------------------------------------------------------------------

    def _buffer(self, obj, name, stream, writable=False):
        buf = as_buffer(obj, name, stream)
        if self._backend == "host" and buf.device == CUDA:
            raise ValueError(f"{name} is GPU memory, but this communicator runs on the host backend")
        if self._backend == "cuda" and buf.device == HOST:
            raise ValueError(f"{name} is host memory, but this communicator runs on the cuda backend "
                             "(pass GPU arrays, or use WEFT_BACKEND=host)")
        if writable and buf.readonly:
            raise ValueError(f"{name} is read-only")
        return buf

    def _stream_for(self, stream, *buffers):
        if self._backend != "cuda":
            return None
        handle = stream_handle(stream)
        if handle is None:
            # The producer's stream (CUDA array interface v3) orders the call
            # after the work that made the data.
            handle = next((b.stream for b in buffers if b is not None and b.stream), None)
        return handle

    def _call(self, function, *args):
        """Calls `function(*args, comm, stream)` style entry points; raises on failure."""
        handle = args[-2]
        result = getattr(api, function)(*args)
        if result != 0:
            # An abort from another thread clears _handle before freeing the
            # communicator: then only the thread's own message is asked for.
            check(function, result, handle if self._handle is not None else None)

    @staticmethod
    def _same_type(first, second, first_name, second_name):
        if first.dtype != second.dtype:
            raise TypeError(f"{first_name} is {first.dtype.name.lower()} but {second_name} is "
                            f"{second.dtype.name.lower()}; they must have the same type")

    @staticmethod
    def _expect_count(buf, name, expected, why):
        if buf.count != expected:
            raise ValueError(f"{name} has {buf.count} elements, expected {expected} ({why})")

    def _split_count(self, buf, name):
        if buf.count % self._size:
            raise ValueError(f"{name} has {buf.count} elements, not a multiple of the {self._size} ranks")
        return buf.count // self._size

    def _part_shape(self, buf):
        """The shape of one rank's part of `buf`: drop a leading axis of nranks."""
        if len(buf.shape) > 1 and buf.shape[0] == self._size:
            return buf.shape[1:]
        return (buf.count // self._size,)

    def _keep(self, *objects):
        keep_until_group_end(*objects)

    # --- collectives ------------------------------------------------------------------

    def all_reduce(self, sendbuf, recvbuf=None, op="sum", stream=None):
        """ncclAllReduce; recvbuf may be sendbuf (in place). Returns recvbuf."""
        handle = self._live_handle()
        send = self._buffer(sendbuf, "sendbuf", stream)
        if recvbuf is None:
            recvbuf = _allocate_like(sendbuf, send.shape, "recvbuf")
        recv = self._buffer(recvbuf, "recvbuf", stream, writable=True)
        self._same_type(send, recv, "sendbuf", "recvbuf")
        self._expect_count(recv, "recvbuf", send.count, "the elements of sendbuf")
        self._call("ncclAllReduce", send.ptr, recv.ptr, send.count, send.dtype, as_op(op), handle,
                   self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    def broadcast(self, sendbuf, recvbuf=None, root=0, stream=None):
        """ncclBroadcast from `root`; sendbuf is read on the root only (others may pass None
        with a recvbuf). recvbuf may be sendbuf. Returns recvbuf."""
        handle = self._live_handle()
        send = None if sendbuf is None else self._buffer(sendbuf, "sendbuf", stream)
        if recvbuf is None:
            if send is None:
                raise ValueError("broadcast needs sendbuf or recvbuf")
            recvbuf = _allocate_like(sendbuf, send.shape, "recvbuf")
        recv = self._buffer(recvbuf, "recvbuf", stream, writable=True)
        if send is not None:
            self._same_type(send, recv, "sendbuf", "recvbuf")
            self._expect_count(send, "sendbuf", recv.count, "the elements of recvbuf")
        self._call("ncclBroadcast", send.ptr if send else None, recv.ptr, recv.count, recv.dtype, int(root),
                   handle, self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    def reduce(self, sendbuf, recvbuf=None, op="sum", root=0, stream=None):
        """ncclReduce to `root`; recvbuf is needed (or allocated) on the root only.
        Returns recvbuf (None on other ranks that passed none)."""
        handle = self._live_handle()
        send = self._buffer(sendbuf, "sendbuf", stream)
        if recvbuf is None and self._rank == root:
            recvbuf = _allocate_like(sendbuf, send.shape, "recvbuf")
        recv = None if recvbuf is None else self._buffer(recvbuf, "recvbuf", stream, writable=True)
        if recv is not None:
            self._same_type(send, recv, "sendbuf", "recvbuf")
            self._expect_count(recv, "recvbuf", send.count, "the elements of sendbuf")
        self._call("ncclReduce", send.ptr, recv.ptr if recv else None, send.count, send.dtype, as_op(op),
                   int(root), handle, self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    def all_gather(self, sendbuf, recvbuf=None, stream=None):
        """ncclAllGather: recvbuf holds every rank's sendbuf in rank order
        (allocated with shape (nranks, *sendbuf.shape)). Returns recvbuf."""
        handle = self._live_handle()
        send = self._buffer(sendbuf, "sendbuf", stream)
        if recvbuf is None:
            recvbuf = _allocate_like(sendbuf, (self._size,) + send.shape, "recvbuf")
        recv = self._buffer(recvbuf, "recvbuf", stream, writable=True)
        self._same_type(send, recv, "sendbuf", "recvbuf")
        self._expect_count(recv, "recvbuf", send.count * self._size, "nranks x the elements of sendbuf")
        self._call("ncclAllGather", send.ptr, recv.ptr, send.count, send.dtype, handle,
                   self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    def reduce_scatter(self, sendbuf, recvbuf=None, op="sum", stream=None):
        """ncclReduceScatter: rank i gets part i of the reduced sendbuf (nranks equal
        parts; allocated without sendbuf's leading axis when that axis is nranks)."""
        handle = self._live_handle()
        send = self._buffer(sendbuf, "sendbuf", stream)
        count = self._split_count(send, "sendbuf")
        if recvbuf is None:
            recvbuf = _allocate_like(sendbuf, self._part_shape(send), "recvbuf")
        recv = self._buffer(recvbuf, "recvbuf", stream, writable=True)
        self._same_type(send, recv, "sendbuf", "recvbuf")
        self._expect_count(recv, "recvbuf", count, "the elements of sendbuf / nranks")
        self._call("ncclReduceScatter", send.ptr, recv.ptr, count, send.dtype, as_op(op), handle,
                   self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    def alltoall(self, sendbuf, recvbuf=None, stream=None):
        """ncclAlltoAll: part j of sendbuf goes to rank j, which stores it as its part i
        (i: this rank). recvbuf has sendbuf's shape. Returns recvbuf."""
        handle = self._live_handle()
        send = self._buffer(sendbuf, "sendbuf", stream)
        count = self._split_count(send, "sendbuf")
        if recvbuf is None:
            recvbuf = _allocate_like(sendbuf, send.shape, "recvbuf")
        recv = self._buffer(recvbuf, "recvbuf", stream, writable=True)
        self._same_type(send, recv, "sendbuf", "recvbuf")
        self._expect_count(recv, "recvbuf", send.count, "the elements of sendbuf")
        self._call("ncclAlltoAll", send.ptr, recv.ptr, count, send.dtype, handle,
                   self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    def gather(self, sendbuf, recvbuf=None, root=0, stream=None):
        """ncclGather to `root` (recvbuf as in all_gather, on the root only).
        Returns recvbuf (None on other ranks that passed none)."""
        handle = self._live_handle()
        send = self._buffer(sendbuf, "sendbuf", stream)
        if recvbuf is None and self._rank == root:
            recvbuf = _allocate_like(sendbuf, (self._size,) + send.shape, "recvbuf")
        recv = None if recvbuf is None else self._buffer(recvbuf, "recvbuf", stream, writable=True)
        if recv is not None:
            self._same_type(send, recv, "sendbuf", "recvbuf")
            self._expect_count(recv, "recvbuf", send.count * self._size, "nranks x the elements of sendbuf")
        self._call("ncclGather", send.ptr, recv.ptr if recv else None, send.count, send.dtype, int(root),
                   handle, self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    def scatter(self, sendbuf, recvbuf=None, root=0, stream=None):
        """ncclScatter from `root`: rank i gets part i of the root's sendbuf. Other ranks
        pass sendbuf=None and a recvbuf (or sendbuf, from which recvbuf is sized)."""
        handle = self._live_handle()
        send = None if sendbuf is None else self._buffer(sendbuf, "sendbuf", stream)
        if recvbuf is None:
            if send is None:
                raise ValueError("scatter needs recvbuf on ranks that pass no sendbuf")
            self._split_count(send, "sendbuf")
            recvbuf = _allocate_like(sendbuf, self._part_shape(send), "recvbuf")
        recv = self._buffer(recvbuf, "recvbuf", stream, writable=True)
        if send is not None:
            self._same_type(send, recv, "sendbuf", "recvbuf")
            self._expect_count(send, "sendbuf", recv.count * self._size, "nranks x the elements of recvbuf")
        self._call("ncclScatter", send.ptr if send else None, recv.ptr, recv.count, recv.dtype, int(root),
                   handle, self._stream_for(stream, send, recv))
        self._keep(send, recv)
        return recvbuf

    # --- point to point -----------------------------------------------------------------

    def send(self, buf, peer, stream=None):
        """ncclSend of all of `buf` to `peer` (matched by a recv there; pair them in a group)."""
        handle = self._live_handle()
        send = self._buffer(buf, "buf", stream)
        self._call("ncclSend", send.ptr, send.count, send.dtype, int(peer), handle, self._stream_for(stream, send))
        self._keep(send)

    def recv(self, buf, peer, stream=None):
        """ncclRecv into all of `buf` from `peer`. Returns buf."""
        handle = self._live_handle()
        recv = self._buffer(buf, "buf", stream, writable=True)
        self._call("ncclRecv", recv.ptr, recv.count, recv.dtype, int(peer), handle, self._stream_for(stream, recv))
        self._keep(recv)
        return buf

    # --- reduction operators -----------------------------------------------------------

    def create_pre_mul_sum(self, scalar, dtype):
        """ncclRedOpCreatePreMulSum with a host scalar captured now: an op (int) that
        multiplies every input by `scalar` before summing, valid on this communicator."""
        from .types import DataType
        dtype = DataType(dtype)
        ctype = {DataType.FLOAT32: ctypes.c_float, DataType.FLOAT64: ctypes.c_double}.get(dtype)
        if ctype is None:
            raise TypeError(f"create_pre_mul_sum takes float32 or float64 scalars here, not {dtype.name.lower()}")
        value = ctype(scalar)
        op = ctypes.c_int()
        handle = self._live_handle()
        host_immediate = 1  # ncclScalarHostImmediate
        result = api.ncclRedOpCreatePreMulSum(ctypes.byref(op), ctypes.byref(value), dtype, host_immediate, handle)
        check("ncclRedOpCreatePreMulSum", result, handle)
        return op.value

    def destroy_op(self, op):
        """ncclRedOpDestroy of an op from create_pre_mul_sum."""
        handle = self._live_handle()
        check("ncclRedOpDestroy", api.ncclRedOpDestroy(int(op), handle), handle)
