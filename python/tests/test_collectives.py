"""Every collective and send/recv across 2 and 4 spawned processes, every NCCL
type (NumPy's natively; bfloat16 and fp8 as raw bits through DLPack), every op,
counts from one element to several pipeline steps (the library's step is
128 KiB), checked exactly against a reference on every rank."""

import pytest

pytest.importorskip("numpy")

import coll_tasks  # noqa: E402
from reference import NATIVE, RAW, TYPES  # noqa: E402

ALL_TYPES = list(TYPES)
COUNTS = [1, 1000, 40_000]  # 40,000 float64 elements span three 128 KiB steps


def _run(pool, fn, *args):
    checked = pool.run(fn, *args)
    assert all(n > 0 for n in checked), checked
    return checked


@pytest.mark.parametrize("fn", [coll_tasks.all_reduce, coll_tasks.reduce, coll_tasks.reduce_scatter],
                         ids=lambda f: f.__name__)
def test_reductions_every_type_and_op(pool, fn):
    checked = _run(pool, fn, ALL_TYPES, COUNTS)
    assert checked[0] >= len(ALL_TYPES) * 5


@pytest.mark.parametrize("fn", [coll_tasks.broadcast, coll_tasks.all_gather, coll_tasks.alltoall,
                                coll_tasks.gather, coll_tasks.scatter, coll_tasks.send_recv],
                         ids=lambda f: f.__name__)
def test_data_movement_every_type(pool, fn):
    _run(pool, fn, ALL_TYPES, COUNTS)


def test_outputs_allocated_inside_a_group(pool):
    _run(pool, coll_tasks.grouped_allocations, 5000)


def test_type_lists_cover_nccl():
    import weft
    assert len(NATIVE) == 9 and len(RAW) == 3
    assert len(TYPES) == len(weft.DataType)
