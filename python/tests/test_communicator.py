"""Communicators: unique ids, init (rank, all, config), split, finalize,
destroy, abort, and the errors users see."""

import pickle

import pytest

np = pytest.importorskip("numpy", reason="NumPy is not installed (Debian: python3-numpy)")

import weft  # noqa: E402
import comm_tasks  # noqa: E402
from ranks import run_once  # noqa: E402


def test_unique_id_travels_as_bytes_and_pickle():
    uid = weft.UniqueId.create()
    assert len(bytes(uid)) == 128
    assert pickle.loads(pickle.dumps(uid)) == uid
    assert weft.UniqueId.from_bytes(bytes(uid)) == uid
    assert weft.UniqueId.create() != uid
    with pytest.raises(ValueError, match="128 bytes"):
        weft.UniqueId(b"short")


def test_init_all_and_grouped_calls():
    comms = weft.Communicator.init_all(3)
    try:
        assert [c.rank for c in comms] == [0, 1, 2]
        assert all(c.size == 3 and c.backend == "host" and c.device == -1 for c in comms)
        inputs = [np.arange(10, dtype=np.int32) * (r + 1) for r in range(3)]
        with weft.group():
            outputs = [c.all_reduce(x) for c, x in zip(comms, inputs)]
        for out in outputs:
            assert np.array_equal(out, np.arange(10, dtype=np.int32) * 6)
    finally:
        for c in comms:
            c.destroy()
    assert all(c.closed for c in comms)


def test_init_rank_error_carries_the_library_message():
    with pytest.raises(weft.WeftError) as info:
        weft.Communicator(2, weft.UniqueId.create(), 5)
    assert info.value.result == weft.Result.INVALID_ARGUMENT
    assert info.value.function == "ncclCommInitRank"
    assert "rank" in info.value.detail and "5" in info.value.detail, info.value.detail


def test_group_end_without_start():
    with pytest.raises(RuntimeError, match="without a matching group_start"):
        weft.group_end()


def test_split(pool):
    assert pool.run(comm_tasks.split) == [True] * pool.nranks


def test_library_errors_carry_get_last_error(pool):
    broadcast, op, send = pool.run(comm_tasks.library_errors)[0]
    assert broadcast[0] == weft.Result.INVALID_ARGUMENT and broadcast[1] == "ncclBroadcast"
    assert "root" in broadcast[2] and str(pool.nranks) in broadcast[2], broadcast
    assert op[0] == weft.Result.INVALID_ARGUMENT and "op" in op[2], op
    assert send[0] == weft.Result.INVALID_ARGUMENT and "peer" in send[2], send
    assert "ncclInvalidArgument" in broadcast[3]


def test_argument_errors_name_the_argument(pool):
    messages = pool.run(comm_tasks.argument_errors)[0]
    assert messages["count"].startswith("ValueError") and "recvbuf has 7 elements" in messages["count"]
    assert messages["type"].startswith("TypeError") and "float64" in messages["type"]
    assert "read-only" in messages["readonly"]
    assert "not C-contiguous" in messages["strided"]
    assert messages["bool"].startswith("TypeError") and "bool" in messages["bool"]
    assert "GPU memory" in messages["gpu"] and "host backend" in messages["gpu"]
    assert "not a multiple" in messages["split"]
    assert "'mean'" in messages["op"]
    assert "list" in messages["not_array"]


def test_pre_mul_sum(pool):
    assert all(pool.run(comm_tasks.pre_mul_sum))


def test_finalize_then_destroy():
    messages = run_once(2, comm_tasks.finalize_then_destroy, mode="id")
    assert all("destroyed" in m for m in messages), messages


def test_abort_unblocks_a_waiting_collective():
    elapsed, result, message = run_once(2, comm_tasks.abort_unblocks, mode="id")[0]
    assert elapsed < 2.5, elapsed
    assert isinstance(result, weft.Result) and result != weft.Result.SUCCESS
    assert "ncclAllReduce" in message
