"""Test set-up: the package from this source tree, the host backend, rank pools."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The NumPy tests run on the host backend whatever the machine has; spawned
# ranks inherit it.
os.environ.setdefault("WEFT_BACKEND", "host")

_pools = {}


@pytest.fixture(params=[2, 4], ids=lambda n: f"{n}ranks")
def pool(request):
    """A RankPool of 2, then 4 processes, each with a communicator."""
    pytest.importorskip("numpy")
    from ranks import RankPool
    nranks = request.param
    existing = _pools.get(nranks)
    if existing is None or not existing.alive:
        _pools[nranks] = RankPool(nranks)
    return _pools[nranks]


def pytest_sessionfinish(session, exitstatus):
    for pool in _pools.values():
        pool.close()
