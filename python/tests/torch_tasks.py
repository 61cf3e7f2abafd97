"""Bodies of the torch backend tests, run on every rank: fn(world_group, ...)."""

import copy
import warnings

import torch
import torch.distributed as dist
import torch.nn.functional as F


def _rank_tensor(rank, count, dtype=torch.float32, scale=1):
    return (torch.arange(count, dtype=torch.float64) % 7 + rank * 10 + 1).mul(scale).to(dtype)


def _expect(got, expected, what):
    if not torch.equal(got, expected):
        raise AssertionError(f"rank {dist.get_rank()}: {what}: got {got}, expected {expected}")


def collectives(group, count):
    """Every torch.distributed call the backend implements, checked exactly."""
    rank, n = dist.get_rank(), dist.get_world_size()
    assert dist.get_backend() == "weft", dist.get_backend()
    inputs = [_rank_tensor(r, count) for r in range(n)]
    stacked = torch.stack(inputs)
    checks = 0
    for op, reference in [(dist.ReduceOp.SUM, stacked.sum(0)), (dist.ReduceOp.PRODUCT, stacked.prod(0)),
                          (dist.ReduceOp.MIN, stacked.min(0).values), (dist.ReduceOp.MAX, stacked.max(0).values),
                          (dist.ReduceOp.AVG, stacked.sum(0) / n)]:
        t = inputs[rank].clone()
        dist.all_reduce(t, op=op)
        _expect(t, reference, f"all_reduce {op}")
        checks += 1
    for dtype in (torch.int8, torch.uint8, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float64):
        t = _rank_tensor(rank, count, dtype)
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        _expect(t, torch.stack([_rank_tensor(r, count, dtype) for r in range(n)]).sum(0), f"all_reduce {dtype}")
        checks += 1
    flags = torch.tensor([rank == 0, True, False])
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    _expect(flags, torch.tensor([True, True, False]), "all_reduce MAX of bool")
    coalesced = [inputs[rank].clone(), inputs[rank][:3] * 2]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "will be deprecated": still part of 1.13's API
        dist.all_reduce_coalesced(coalesced)
    _expect(coalesced[0], stacked.sum(0), "all_reduce_coalesced[0]")
    _expect(coalesced[1], stacked.sum(0)[:3] * 2, "all_reduce_coalesced[1]")
    root = n - 1
    t = inputs[rank].clone()
    dist.broadcast(t, src=root)
    _expect(t, inputs[root], "broadcast")
    t = inputs[rank].clone()
    dist.reduce(t, dst=root)
    if rank == root:
        _expect(t, stacked.sum(0), "reduce")
    outputs = [torch.zeros(count) for _ in range(n)]
    dist.all_gather(outputs, inputs[rank])
    _expect(torch.stack(outputs), stacked, "all_gather")
    gathered = torch.zeros(n * count)
    dist.all_gather_into_tensor(gathered, inputs[rank])
    _expect(gathered, stacked.reshape(-1), "all_gather_into_tensor")
    mine = slice(rank * count, (rank + 1) * count)
    wide = [_rank_tensor(rank, n * count)[j * count:(j + 1) * count].clone() for j in range(n)]
    wide_sum = torch.stack([_rank_tensor(r, n * count) for r in range(n)]).sum(0)
    out = torch.zeros(count)
    dist.reduce_scatter(out, wide)
    _expect(out, wide_sum[mine], "reduce_scatter")
    out = torch.zeros(count)
    dist.reduce_scatter_tensor(out, _rank_tensor(rank, n * count))
    _expect(out, wide_sum[mine], "reduce_scatter_tensor")
    gather_list = [torch.zeros(count) for _ in range(n)] if rank == root else None
    dist.gather(inputs[rank], gather_list, dst=root)
    if rank == root:
        _expect(torch.stack(gather_list), stacked, "gather")
    out = torch.zeros(count)
    dist.scatter(out, [inputs[j] for j in range(n)] if rank == root else None, src=root)
    _expect(out, inputs[rank], "scatter")
    checks += 12
    return checks + _all_to_all(rank, n, count) + _point_to_point(rank, n, count)


def _all_to_all(rank, n, count):
    send = _rank_tensor(rank, n * count)
    out = torch.zeros(n * count)
    dist.all_to_all_single(out, send)
    expected = torch.cat([_rank_tensor(r, n * count)[rank * count:(rank + 1) * count] for r in range(n)])
    _expect(out, expected, "all_to_all_single")
    # Uneven: rank r sends r + j + 1 elements to rank j.
    send_sizes = [rank + j + 1 for j in range(n)]
    recv_sizes = [r + rank + 1 for r in range(n)]
    send = _rank_tensor(rank, sum(send_sizes))
    out = torch.zeros(sum(recv_sizes))
    dist.all_to_all_single(out, send, output_split_sizes=recv_sizes, input_split_sizes=send_sizes)
    parts = []
    for r in range(n):
        theirs = [r + j + 1 for j in range(n)]
        start = sum(theirs[:rank])
        parts.append(_rank_tensor(r, sum(theirs))[start:start + theirs[rank]])
    _expect(out, torch.cat(parts), "all_to_all_single uneven")
    outs = [torch.zeros(count) for _ in range(n)]
    dist.all_to_all(outs, [_rank_tensor(rank, count, scale=j + 1) for j in range(n)])
    _expect(torch.stack(outs), torch.stack([_rank_tensor(r, count, scale=rank + 1) for r in range(n)]), "all_to_all")
    return 3


def _point_to_point(rank, n, count):
    """A ring: even ranks send first, odd ranks receive first (blocking calls)."""
    right, left = (rank + 1) % n, (rank - 1) % n
    got = torch.zeros(count)
    if rank % 2 == 0:
        dist.send(_rank_tensor(rank, count), dst=right)
        dist.recv(got, src=left)
    else:
        dist.recv(got, src=left)
        dist.send(_rank_tensor(rank, count), dst=right)
    _expect(got, _rank_tensor(left, count), "send/recv ring")
    dist.barrier()
    return 2


def errors(group):
    """Bad calls raise at once, naming what is wrong; the group stays usable."""
    messages = []
    for index, call in enumerate((lambda: dist.all_reduce(torch.zeros(4, 2).t()),
                 lambda: dist.all_reduce(torch.zeros(2), op=dist.ReduceOp.BAND),
                 lambda: dist.all_reduce(torch.zeros(2, dtype=torch.int16)),
                 lambda: dist.all_reduce(torch.zeros(2, dtype=torch.bool)),
                 # found by the library, on the worker thread: raised by the wait
                 lambda: dist.broadcast(torch.zeros(2), src=dist.get_world_size()))):
        try:
            call()
        except (ValueError, TypeError, RuntimeError) as err:
            messages.append(str(err))
        else:
            raise AssertionError(f"bad call {index} did not raise")
    t = torch.ones(3)
    dist.all_reduce(t)
    _expect(t, torch.full((3,), float(dist.get_world_size())), "all_reduce after errors")
    return messages


def _model():
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).double()


def ddp_steps(group, steps, per_rank_batch):
    """DDP over "weft" against the same training in one process on the whole batch.

    Ranks start from different weights (DDP must broadcast rank 0's); tiny
    buckets make every parameter its own asynchronous allreduce. Returns the
    largest gradient difference seen and the final parameters.
    """
    rank, n = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(1234)
    reference = _model()
    torch.manual_seed(1234 + rank)
    model = _model()
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=0.0001)
    for p, q in zip(model.parameters(), reference.parameters()):
        _expect(p.detach(), q.detach(), "parameters after DDP's broadcast")
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.1)
    ref_optimizer = torch.optim.SGD(reference.parameters(), lr=0.1)
    data = torch.Generator().manual_seed(99)
    worst = 0.0
    for _ in range(steps):
        x = torch.randn(n * per_rank_batch, 8, generator=data, dtype=torch.float64)
        y = torch.randn(n * per_rank_batch, 4, generator=data, dtype=torch.float64)
        shard = slice(rank * per_rank_batch, (rank + 1) * per_rank_batch)
        optimizer.zero_grad()
        F.mse_loss(ddp(x[shard]), y[shard]).backward()
        ref_optimizer.zero_grad()
        F.mse_loss(reference(x), y).backward()
        for p, q in zip(model.parameters(), reference.parameters()):
            worst = max(worst, (p.grad - q.grad).abs().max().item())
            if not torch.allclose(p.grad, q.grad, rtol=1e-10, atol=1e-12):
                raise AssertionError(f"rank {rank}: DDP gradient differs from one process's by "
                                     f"{(p.grad - q.grad).abs().max().item()}")
        optimizer.step()
        ref_optimizer.step()
    return worst, [p.detach().clone() for p in copy.deepcopy(model).parameters()]
