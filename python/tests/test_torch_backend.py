"""The torch.distributed backend "weft" on 2 and 4 spawned processes: every
call it implements, its errors, and DDP training checked against one process."""

import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (Debian: python3-torch)")

import torch_tasks  # noqa: E402
from ranks import RankPool  # noqa: E402


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}ranks")
def torch_pool(request, tmp_path_factory):
    ranks = RankPool(request.param, mode="torch", init_file=str(tmp_path_factory.mktemp("store") / "init"))
    yield ranks
    ranks.close()


def test_loads_weft_not_nvidia(torch_pool):
    import weft
    assert all(path == weft.library_path() for path in torch_pool.library_paths), torch_pool.library_paths


@pytest.mark.parametrize("count", [1, 1000, 70_000])
def test_every_call(torch_pool, count):
    checked = torch_pool.run(torch_tasks.collectives, count)
    assert checked == [checked[0]] * torch_pool.nranks and checked[0] >= 25, checked


def test_errors_name_the_problem(torch_pool):
    messages = torch_pool.run(torch_tasks.errors)[0]
    assert "not contiguous" in messages[0]
    assert "BAND" in messages[1] or "no reduction" in messages[1]
    assert "torch.int16" in messages[2]
    assert "bool" in messages[3] and "SUM" in messages[3]
    assert "root is" in messages[4] and "ncclInvalidArgument" in messages[4], messages[4]


def test_ddp_matches_one_process(torch_pool):
    results = torch_pool.run(torch_tasks.ddp_steps, 3, 4)
    worst = max(w for w, _ in results)
    assert worst < 1e-12, worst
    first_params = results[0][1]
    for rank, (_, params) in enumerate(results):
        for p, q in zip(params, first_params):
            assert torch.equal(p, q), f"rank {rank}'s parameters differ from rank 0's after training"
