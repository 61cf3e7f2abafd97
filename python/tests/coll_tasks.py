"""Bodies of the collective tests, run on every rank: fn(comm, ...).

Each runs its collective over the types, ops and element counts it is given,
checks the result against reference.py, and returns the number of cases it
checked; failures are gathered and raised together so that one run reports
every broken case.
"""

import numpy as np

import weft
from fake_arrays import raw_dlpack_of
from reference import OPS, TYPES, all_inputs, decode, encode, reduce_values


def as_array(name, values):
    """(object for the API, its NumPy storage) holding `values` in type `name`."""
    storage = np.ascontiguousarray(encode(name, values))
    raw = TYPES[name][1]
    return (raw_dlpack_of(storage, raw) if raw else storage), storage


def empty(name, count):
    storage = np.zeros(count, dtype=TYPES[name][0])
    raw = TYPES[name][1]
    return (raw_dlpack_of(storage, raw) if raw else storage), storage


class Cases:
    """Collects mismatches; raise_if_any() reports them all."""

    def __init__(self, comm):
        self.comm = comm
        self.failures = []
        self.count = 0

    def check(self, label, name, storage, expected):
        self.count += 1
        got = decode(name, storage)
        if not np.array_equal(np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)):
            bad = np.flatnonzero(np.asarray(got, dtype=np.float64).ravel() != np.asarray(expected).ravel())
            first = bad[0] if bad.size else 0
            self.failures.append(f"{label} {name}: {bad.size} wrong elements, first at {first}: "
                                 f"got {np.ravel(got)[first]}, expected {np.ravel(expected)[first]}")

    def check_none(self, label, value):
        """Non-root ranks of rooted collectives get no output."""
        self.count += 1
        if value is not None:
            self.failures.append(f"{label}: returned {value!r} on a non-root rank, expected None")

    def done(self):
        if self.failures:
            raise AssertionError(f"rank {self.comm.rank}: {len(self.failures)} of {self.count} cases wrong:\n" +
                                 "\n".join(self.failures[:30]))
        return self.count


def all_reduce(comm, names, counts, ops=OPS):
    cases = Cases(comm)
    for name in names:
        for op in ops:
            for count in counts:
                inputs = all_inputs(name, op, comm.size, count)
                expected = reduce_values(op, inputs)
                send, _ = as_array(name, inputs[comm.rank])
                recv, recv_storage = empty(name, count)
                comm.all_reduce(send, recv, op=op)
                cases.check(f"all_reduce {op} count {count}", name, recv_storage, expected)
                inplace, inplace_storage = as_array(name, inputs[comm.rank])
                comm.all_reduce(inplace, inplace, op=op)
                cases.check(f"all_reduce in place {op} count {count}", name, inplace_storage, expected)
                if TYPES[name][1] is None:
                    allocated = comm.all_reduce(send, op=op)
                    cases.check(f"all_reduce allocated {op} count {count}", name, allocated, expected)
    return cases.done()


def broadcast(comm, names, counts):
    cases = Cases(comm)
    for name in names:
        for root in sorted({0, comm.size - 1}):
            for count in counts:
                inputs = all_inputs(name, "sum", comm.size, count, seed=root)
                recv, recv_storage = empty(name, count)
                send = as_array(name, inputs[root])[0] if comm.rank == root else None
                comm.broadcast(send, recv, root=root)
                cases.check(f"broadcast root {root} count {count}", name, recv_storage, inputs[root])
                inplace, storage = as_array(name, inputs[comm.rank])
                comm.broadcast(inplace, inplace, root=root)
                cases.check(f"broadcast in place root {root} count {count}", name, storage, inputs[root])
    return cases.done()


def reduce(comm, names, counts, ops=OPS):
    cases = Cases(comm)
    for name in names:
        for op in ops:
            for root in sorted({0, comm.size - 1}):
                for count in counts:
                    inputs = all_inputs(name, op, comm.size, count, seed=root)
                    send, _ = as_array(name, inputs[comm.rank])
                    recv, recv_storage = empty(name, count) if comm.rank == root else (None, None)
                    result = comm.reduce(send, recv, op=op, root=root)
                    if comm.rank == root:
                        cases.check(f"reduce {op} root {root} count {count}", name, recv_storage,
                                    reduce_values(op, inputs))
                    else:
                        cases.check_none(f"reduce {op} root {root}", result)
    return cases.done()


def all_gather(comm, names, counts):
    cases = Cases(comm)
    for name in names:
        for count in counts:
            inputs = all_inputs(name, "sum", comm.size, count)
            send, _ = as_array(name, inputs[comm.rank])
            recv, recv_storage = empty(name, count * comm.size)
            comm.all_gather(send, recv)
            cases.check(f"all_gather count {count}", name, recv_storage, np.concatenate(inputs))
            if TYPES[name][1] is None:
                allocated = comm.all_gather(send)
                assert allocated.shape == (comm.size, count), allocated.shape
                cases.check(f"all_gather allocated count {count}", name, allocated, np.stack(inputs))
    return cases.done()


def reduce_scatter(comm, names, counts, ops=OPS):
    cases = Cases(comm)
    for name in names:
        for op in ops:
            for count in counts:
                inputs = all_inputs(name, op, comm.size, count * comm.size)
                part = slice(comm.rank * count, (comm.rank + 1) * count)
                expected = reduce_values(op, inputs)[part]
                send, _ = as_array(name, inputs[comm.rank])
                recv, recv_storage = empty(name, count)
                comm.reduce_scatter(send, recv, op=op)
                cases.check(f"reduce_scatter {op} count {count}", name, recv_storage, expected)
    return cases.done()


def alltoall(comm, names, counts):
    cases = Cases(comm)
    for name in names:
        for count in counts:
            inputs = all_inputs(name, "sum", comm.size, count * comm.size)
            mine = slice(comm.rank * count, (comm.rank + 1) * count)
            expected = np.concatenate([inputs[peer][mine] for peer in range(comm.size)])
            send, _ = as_array(name, inputs[comm.rank])
            recv, recv_storage = empty(name, count * comm.size)
            comm.alltoall(send, recv)
            cases.check(f"alltoall count {count}", name, recv_storage, expected)
    return cases.done()


def gather(comm, names, counts):
    cases = Cases(comm)
    for name in names:
        for root in sorted({0, comm.size - 1}):
            for count in counts:
                inputs = all_inputs(name, "sum", comm.size, count, seed=root)
                send, _ = as_array(name, inputs[comm.rank])
                recv, recv_storage = empty(name, count * comm.size) if comm.rank == root else (None, None)
                result = comm.gather(send, recv, root=root)
                if comm.rank == root:
                    cases.check(f"gather root {root} count {count}", name, recv_storage, np.concatenate(inputs))
                else:
                    cases.check_none(f"gather root {root}", result)
    return cases.done()


def scatter(comm, names, counts):
    cases = Cases(comm)
    for name in names:
        for root in sorted({0, comm.size - 1}):
            for count in counts:
                inputs = all_inputs(name, "sum", comm.size, count * comm.size, seed=root)
                send = as_array(name, inputs[root])[0] if comm.rank == root else None
                recv, recv_storage = empty(name, count)
                comm.scatter(send, recv, root=root)
                expected = inputs[root][comm.rank * count:(comm.rank + 1) * count]
                cases.check(f"scatter root {root} count {count}", name, recv_storage, expected)
    return cases.done()


def send_recv(comm, names, counts):
    """A ring shift, a send to self, and two messages to one peer matched in order."""
    cases = Cases(comm)
    right, left = (comm.rank + 1) % comm.size, (comm.rank - 1) % comm.size
    for name in names:
        for count in counts:
            inputs = all_inputs(name, "sum", comm.size, count)
            second = all_inputs(name, "sum", comm.size, count, seed=7)
            send, _ = as_array(name, inputs[comm.rank])
            send2, _ = as_array(name, second[comm.rank])
            recv, recv_storage = empty(name, count)
            recv2, recv2_storage = empty(name, count)
            to_self, self_storage = empty(name, count)
            with weft.group():
                comm.send(send, right)
                comm.send(send2, right)
                comm.recv(recv, left)
                comm.recv(recv2, left)
                comm.send(send, comm.rank)
                comm.recv(to_self, comm.rank)
            cases.check(f"recv from {left} count {count}", name, recv_storage, inputs[left])
            cases.check(f"second recv from {left} count {count}", name, recv2_storage, second[left])
            cases.check(f"recv from self count {count}", name, self_storage, inputs[comm.rank])
    return cases.done()


def grouped_allocations(comm, count):
    """Outputs allocated inside a group are filled at its end (and kept alive until then)."""
    cases = Cases(comm)
    inputs = all_inputs("float32", "sum", comm.size, count)
    with weft.group():
        sums = [comm.all_reduce(encode("float32", inputs[comm.rank]) * k) for k in (1, 2, 3)]
        gathered = comm.all_gather(encode("float32", inputs[comm.rank]))
    for k, result in zip((1, 2, 3), sums):
        cases.check(f"grouped all_reduce x{k}", "float32", result, reduce_values("sum", inputs) * k)
    cases.check("grouped all_gather", "float32", gathered, np.stack(inputs))
    return cases.done()
