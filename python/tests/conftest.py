"""Test set-up: the package from this source tree, the host backend, rank pools."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The NumPy tests run on the host backend whatever the machine has; spawned
# ranks inherit it.
os.environ.setdefault("WEFT_BACKEND", "host")


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}ranks")
def pool(request):
    """2, then 4 processes, each with a weft.Communicator (shared by a module's tests)."""
    pytest.importorskip("numpy", reason="NumPy is not installed (Debian: python3-numpy)")
    from ranks import RankPool
    ranks = RankPool(request.param)
    yield ranks
    ranks.close()
