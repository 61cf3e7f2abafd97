"""torch.distributed backend "weft": CPU tensors through Weft's host backend.

    import weft.torch_backend            # registers the backend
    torch.distributed.init_process_group("weft", rank=rank, world_size=n, ...)

Each process group owns one Weft communicator: rank 0 makes the unique id
and publishes it in the group's store. Communicators run on the host backend
(WEFT_BACKEND is set to "host" when unset; another value is an error).

Operations run on the calling thread and are complete when they return; the
work they return (async_op=True too) is already finished. They are not
queued on a thread of their own because in PyTorch 1.13 the only work a
Python group can return that DDP accepts (_create_work_from_future) ignores
a failed future in wait(): a failure on another thread would reach
dist.all_reduce(t) as success. Run inline, a failure raises from the call
itself. The price: DDP does not overlap gradient reduction with backward.

Implemented: allreduce (sum, product, min, max, avg), allreduce_coalesced,
broadcast, reduce, allgather, all_gather_into_tensor (_allgather_base),
reduce_scatter, reduce_scatter_tensor (_reduce_scatter_base), gather,
scatter, alltoall, alltoall_base (even and uneven splits), send, recv,
barrier. NCCL has no tags: send/recv pairs match in issue order and `tag` is
ignored; recv from any source is not offered.
"""

import os

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import ProcessGroup, _create_work_from_future
from torch.futures import Future

from .communicator import Communicator, UniqueId
from .group import group as _weft_group
from .types import DataType, RedOp

BACKEND_NAME = "weft"
_STORE_KEY = "weft/unique_id"

_DTYPES = {
    torch.int8: DataType.INT8, torch.uint8: DataType.UINT8, torch.int32: DataType.INT32,
    torch.int64: DataType.INT64, torch.float16: DataType.FLOAT16, torch.float32: DataType.FLOAT32,
    torch.float64: DataType.FLOAT64, torch.bfloat16: DataType.BFLOAT16,
    torch.bool: DataType.UINT8,  # one byte, 0 or 1: data movement, min and max keep it so
}
_OPS = [(dist.ReduceOp.SUM, RedOp.SUM), (dist.ReduceOp.PRODUCT, RedOp.PROD), (dist.ReduceOp.MIN, RedOp.MIN),
        (dist.ReduceOp.MAX, RedOp.MAX), (dist.ReduceOp.AVG, RedOp.AVG)]


def _nccl_op(torch_op, tensor):
    for candidate, op in _OPS:
        if torch_op == candidate:
            if tensor.dtype == torch.bool and op not in (RedOp.MIN, RedOp.MAX):
                raise ValueError(f"weft reduces bool tensors with MIN and MAX only, not {op.name}")
            return op
    raise ValueError(f"the weft backend has no reduction {torch_op} (supported: SUM, PRODUCT, MIN, MAX, AVG)")


def _raw(tensor, name):
    """(pointer, count, NCCL type) of a contiguous CPU tensor."""
    if tensor.device.type != "cpu":
        raise ValueError(f"{name} is on {tensor.device}; the weft backend takes CPU tensors")
    if not tensor.is_contiguous():
        raise ValueError(f"{name} is not contiguous; call .contiguous() first")
    try:
        dtype = _DTYPES[tensor.dtype]
    except KeyError:
        raise TypeError(f"{name} has dtype {tensor.dtype}, which NCCL has no type for") from None
    return tensor.data_ptr(), tensor.numel(), dtype


def _single(tensors, what):
    if len(tensors) != 1:
        raise ValueError(f"{what} takes one tensor per process on the weft backend, got {len(tensors)}")
    return tensors[0]


def _completed(value):
    """A finished work whose future holds `value` (DDP reads the reduced bucket from it)."""
    future = Future()
    future.set_result(value)
    return _create_work_from_future(future)


class ProcessGroupWeft(ProcessGroup):
    """A torch.distributed ProcessGroup whose collectives run on Weft."""

    def __init__(self, store, rank, size, timeout=None):
        super().__init__(rank, size)
        backend = os.environ.setdefault("WEFT_BACKEND", "host")
        if backend != "host":
            raise RuntimeError(f"WEFT_BACKEND is {backend!r}: the torch backend 'weft' takes CPU tensors "
                               "and needs the host backend (unset WEFT_BACKEND or set it to host)")
        if rank == 0:
            uid = UniqueId.create()
            store.set(_STORE_KEY, bytes(uid))
        else:
            uid = UniqueId.from_bytes(store.get(_STORE_KEY))
        self._comm = Communicator(size, uid, rank)

    @property
    def communicator(self):
        """The weft.Communicator under this group."""
        return self._comm

    def getBackendName(self):
        return BACKEND_NAME

    @staticmethod
    def _run(body, value):
        """Runs body() now; returns a completed work with `value` (the output tensors)."""
        body()
        return _completed(value)

    def _coll(self, function, *args):
        self._comm._call(function, *args, self._comm._live_handle(), None)

    # --- reductions ---------------------------------------------------------------------

    def allreduce(self, tensors, opts=None):
        tensor = _single(tensors, "allreduce")
        op = _nccl_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, tensor)
        ptr, count, dtype = _raw(tensor, "tensor")
        return self._run(lambda: self._coll("ncclAllReduce", ptr, ptr, count, dtype, op), tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        op_of = opts.reduceOp if opts is not None else dist.ReduceOp.SUM
        calls = [(_raw(t, f"tensors[{i}]"), _nccl_op(op_of, t)) for i, t in enumerate(tensors)]

        def body():
            with _weft_group():
                for (ptr, count, dtype), op in calls:
                    self._coll("ncclAllReduce", ptr, ptr, count, dtype, op)
        return self._run(body, tensors)

    def reduce(self, tensors, opts):
        tensor = _single(tensors, "reduce")
        op = _nccl_op(opts.reduceOp, tensor)
        ptr, count, dtype = _raw(tensor, "tensor")
        root = opts.rootRank
        return self._run(lambda: self._coll("ncclReduce", ptr, ptr, count, dtype, op, root), tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        output = _single(output_tensors, "reduce_scatter")
        inputs = _single(input_tensors, "reduce_scatter")
        self._check_parts(inputs, output, "input_list")
        flat = torch.cat([t.reshape(-1) for t in inputs])
        return self._reduce_scatter_flat(output, flat, opts, output_tensors)

    def _reduce_scatter_base(self, output, input, opts=None):
        if input.numel() != output.numel() * self.size():
            raise ValueError(f"input has {input.numel()} elements, expected output's {output.numel()} "
                             f"x {self.size()} ranks")
        return self._reduce_scatter_flat(output, input, opts, [output])

    def _reduce_scatter_flat(self, output, flat, opts, value):
        op = _nccl_op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM, output)
        out_ptr, count, dtype = _raw(output, "output")
        in_ptr, _, in_dtype = _raw(flat, "input")
        self._same_dtype(in_dtype, dtype)
        return self._run(lambda: self._coll("ncclReduceScatter", in_ptr, out_ptr, count, dtype, op), value)

    # --- data movement ---------------------------------------------------------------------

    def broadcast(self, tensors, opts):
        tensor = _single(tensors, "broadcast")
        ptr, count, dtype = _raw(tensor, "tensor")
        root = opts.rootRank
        return self._run(lambda: self._coll("ncclBroadcast", ptr, ptr, count, dtype, root), tensors)

    def allgather(self, output_tensors, input_tensors, opts=None):
        outputs = _single(output_tensors, "allgather")
        tensor = _single(input_tensors, "allgather")
        self._check_parts(outputs, tensor, "output_tensor_list")
        flat = torch.empty(tensor.numel() * self.size(), dtype=tensor.dtype)

        def body():
            self._all_gather(flat, tensor)
            for part, out in zip(flat.chunk(self.size()), outputs):
                out.copy_(part.view_as(out))
        return self._run(body, output_tensors)

    def _allgather_base(self, output, input, opts=None):
        if output.numel() != input.numel() * self.size():
            raise ValueError(f"output has {output.numel()} elements, expected input's {input.numel()} "
                             f"x {self.size()} ranks")
        return self._run(lambda: self._all_gather(output, input), [output])

    def _all_gather(self, output, input):
        in_ptr, count, dtype = _raw(input, "input")
        out_ptr, _, out_dtype = _raw(output, "output")
        self._same_dtype(dtype, out_dtype)
        self._coll("ncclAllGather", in_ptr, out_ptr, count, dtype)

    def gather(self, output_tensors, input_tensors, opts):
        tensor = _single(input_tensors, "gather")
        root = opts.rootRank
        if self.rank() == root:
            outputs = _single(output_tensors, "gather")
            self._check_parts(outputs, tensor, "gather_list")
            flat = torch.empty(tensor.numel() * self.size(), dtype=tensor.dtype)
        elif output_tensors:
            raise ValueError("gather_list must be given on the root only")
        in_ptr, count, dtype = _raw(tensor, "tensor")

        def body():
            if self.rank() != root:
                return self._coll("ncclGather", in_ptr, None, count, dtype, root)
            self._coll("ncclGather", in_ptr, flat.data_ptr(), count, dtype, root)
            for part, out in zip(flat.chunk(self.size()), outputs):
                out.copy_(part.view_as(out))
        return self._run(body, output_tensors)

    def scatter(self, output_tensors, input_tensors, opts):
        tensor = _single(output_tensors, "scatter")
        root = opts.rootRank
        flat = None
        if self.rank() == root:
            inputs = _single(input_tensors, "scatter")
            self._check_parts(inputs, tensor, "scatter_list")
            flat = torch.cat([t.reshape(-1) for t in inputs])
        elif input_tensors:
            raise ValueError("scatter_list must be given on the root only")
        out_ptr, count, dtype = _raw(tensor, "tensor")
        in_ptr = flat.data_ptr() if flat is not None else None
        return self._run(lambda: self._coll("ncclScatter", in_ptr, out_ptr, count, dtype, root), output_tensors)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            if input.numel() != output.numel() or input.numel() % n:
                raise ValueError(f"input and output need the same number of elements, a multiple of {n}")
            in_ptr, count, dtype = _raw(input, "input")
            out_ptr, _, _ = _raw(output, "output")
            return self._run(lambda: self._coll("ncclAlltoAll", in_ptr, out_ptr, count // n, dtype), [output])
        sends = list(input.split(list(input_split_sizes) or [input.shape[0] // n] * n))
        recvs = list(output.split(list(output_split_sizes) or [output.shape[0] // n] * n))
        return self._exchange(sends, recvs, [output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        if len(output_tensors) != self.size() or len(input_tensors) != self.size():
            raise ValueError(f"alltoall takes {self.size()} input and output tensors")
        return self._exchange(list(input_tensors), list(output_tensors), output_tensors)

    def _exchange(self, sends, recvs, value):
        """Grouped send/recv: sends[j] to rank j, recvs[j] from rank j."""
        send_args = [_raw(t, f"input part {j}") for j, t in enumerate(sends)]
        recv_args = [_raw(t, f"output part {j}") for j, t in enumerate(recvs)]

        def body():
            with _weft_group():
                for peer, (ptr, count, dtype) in enumerate(send_args):
                    self._coll("ncclSend", ptr, count, dtype, peer)
                for peer, (ptr, count, dtype) in enumerate(recv_args):
                    self._coll("ncclRecv", ptr, count, dtype, peer)
        return self._run(body, value)

    def send(self, tensors, dst_rank, tag=0):
        ptr, count, dtype = _raw(_single(tensors, "send"), "tensor")
        return self._run(lambda: self._coll("ncclSend", ptr, count, dtype, dst_rank), tensors)

    def recv(self, tensors, src_rank, tag=0):
        ptr, count, dtype = _raw(_single(tensors, "recv"), "tensor")
        return self._run(lambda: self._coll("ncclRecv", ptr, count, dtype, src_rank), tensors)

    def recv_anysource(self, tensors, tag=0):
        raise NotImplementedError("the weft backend cannot receive from any source: NCCL names the peer")

    def barrier(self, opts=None):
        token = torch.zeros(1, dtype=torch.int32)
        ptr = token.data_ptr()
        return self._run(lambda: self._coll("ncclAllReduce", ptr, ptr, 1, DataType.INT32, RedOp.SUM), [token])

    # --- checks ---------------------------------------------------------------------------------

    def _check_parts(self, parts, tensor, name):
        if len(parts) != self.size():
            raise ValueError(f"{name} has {len(parts)} tensors, expected one per rank ({self.size()})")
        for i, part in enumerate(parts):
            if part.numel() != tensor.numel() or part.dtype != tensor.dtype:
                raise ValueError(f"{name}[{i}] is {part.dtype} x {part.numel()}, expected "
                                 f"{tensor.dtype} x {tensor.numel()} like the other tensor")

    @staticmethod
    def _same_dtype(first, second):
        if first != second:
            raise TypeError(f"input is {first.name.lower()} but output is {second.name.lower()}")


def _create(store, rank, size, timeout):
    return ProcessGroupWeft(store, rank, size, timeout)


def register():
    """Registers the backend (done on import; calling it again is harmless)."""
    if not hasattr(dist.Backend, BACKEND_NAME.upper()):
        dist.Backend.register_backend(BACKEND_NAME, _create)


register()
