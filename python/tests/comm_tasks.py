"""Bodies of the communicator tests, run on every rank."""

import threading
import time

import numpy as np

import weft
from fake_arrays import FakeCudaArray


def split(comm):
    """Colors by parity, keys reversing the order; a rank outside every color gets None."""
    sub = comm.split(comm.rank % 2, key=-comm.rank)
    members = [r for r in range(comm.size) if r % 2 == comm.rank % 2]
    assert sub.size == len(members), (sub.size, members)
    assert sub.rank == sorted(members, reverse=True).index(comm.rank), sub.rank
    total = sub.all_reduce(np.array([comm.rank], dtype=np.int64))
    assert total[0] == sum(members), (total, members)
    sub.destroy()
    nobody = comm.split(None if comm.rank == 0 else 1)
    if comm.rank == 0:
        assert nobody is None
    else:
        assert nobody.size == comm.size - 1
        # Used before it is destroyed: a communicator destroyed right after the
        # split can remove its shared-memory FIFOs before a slower peer maps them.
        total = nobody.all_reduce(np.array([comm.rank], dtype=np.int64))
        assert total[0] == sum(range(1, comm.size)), total
        nobody.destroy()
    return sub.closed


def finalize_then_destroy(ident):
    rank, nranks, uid = ident
    comm = weft.Communicator(nranks, uid, rank, config=weft.Config(comm_name="finalize-test", max_ctas=2))
    assert "rank" in comm.describe()
    assert comm.async_error() == weft.Result.SUCCESS
    comm.all_reduce(np.ones(4, dtype=np.float32))
    comm.finalize()
    comm.destroy()
    comm.destroy()  # closing twice is a no-op
    try:
        comm.all_reduce(np.ones(4, dtype=np.float32))
    except ValueError as err:
        return str(err)
    raise AssertionError("a destroyed communicator accepted a collective")


def abort_unblocks(ident):
    """Rank 0 waits in an all_reduce rank 1 never joins; another thread aborts it."""
    rank, nranks, uid = ident
    comm = weft.Communicator(nranks, uid, rank)
    if rank != 0:
        time.sleep(3)  # long enough for rank 0 to block and abort
        comm.abort()
        return None
    timer = threading.Timer(0.5, comm.abort)
    timer.start()
    started = time.monotonic()
    try:
        comm.all_reduce(np.ones(1 << 16, dtype=np.float32))
    except weft.WeftError as err:
        timer.join()
        return time.monotonic() - started, err.result, str(err)
    raise AssertionError("the all_reduce returned although its peer never joined")


def library_errors(comm):
    """Errors the library finds carry ncclGetLastError's message."""
    found = []
    x = np.ones(8, dtype=np.float32)
    for call in (lambda: comm.broadcast(x, x, root=comm.size),
                 lambda: comm.all_reduce(x, x, op=99),
                 lambda: comm.send(x, peer=-1)):
        try:
            call()
        except weft.WeftError as err:
            found.append((err.result, err.function, err.detail, str(err)))
        else:
            raise AssertionError("a bad call succeeded")
    return found


def argument_errors(comm):
    """Errors this package finds before calling the library, by exception type."""
    x = np.ones(8, dtype=np.float32)
    frozen = np.ones(8, dtype=np.float32)
    frozen.flags.writeable = False
    cases = {
        "count": lambda: comm.all_reduce(x, np.ones(7, dtype=np.float32)),
        "type": lambda: comm.all_reduce(x, np.ones(8, dtype=np.float64)),
        "readonly": lambda: comm.all_reduce(x, frozen),
        "strided": lambda: comm.all_reduce(np.ones(16, dtype=np.float32)[::2]),
        "bool": lambda: comm.all_reduce(np.ones(8, dtype=bool)),
        "gpu": lambda: comm.all_reduce(FakeCudaArray(0x7f0000000000, (8,), "<f4")),
        "split": lambda: comm.reduce_scatter(np.ones(comm.size * 3 + 1, dtype=np.float32)),
        "op": lambda: comm.all_reduce(x, op="mean"),
        "not_array": lambda: comm.all_reduce([1.0, 2.0]),
    }
    messages = {}
    for name, call in cases.items():
        try:
            call()
        except (ValueError, TypeError) as err:
            messages[name] = f"{type(err).__name__}: {err}"
        else:
            raise AssertionError(f"{name}: no error")
    x2 = comm.all_reduce(x)  # the communicator is still fine
    assert np.all(x2 == comm.size)
    return messages


def pre_mul_sum(comm):
    op = comm.create_pre_mul_sum(0.5, weft.DataType.FLOAT64)
    out = comm.all_reduce(np.full(5, 2.0 * (comm.rank + 1)), op=op)
    comm.destroy_op(op)
    expected = sum(r + 1 for r in range(comm.size))
    assert np.all(out == expected), (out, expected)
    return True
