"""torch.distributed all_reduce of CPU tensors: backend "weft" against Gloo.

    WEFT_LIBRARY=build/lib/libnccl.so.2 /usr/bin/python3 python/bench/torch_allreduce.py [--ranks 2 4]

Each rank process holds a Gloo default group and a "weft" group side by side.
For every size, rounds alternate Gloo and weft (so both see the same machine
load) and every timed call is a blocking dist.all_reduce (SUM, float32) between
barriers of its own group. A call's time is the slowest rank's; the table gives
the median over the calls, in microseconds, and the algorithm bandwidth
(bytes / time) of that median. One more call per size and backend, untimed,
checks the result.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SIZES = [256, 4096, 65536, 1 << 20, 4 << 20]  # float32 elements: 1 KiB .. 16 MiB


def _time_calls(tensor, group, calls):
    times = []
    for _ in range(calls):
        dist.barrier(group=group)
        start = time.perf_counter()
        dist.all_reduce(tensor, group=group)
        times.append(time.perf_counter() - start)
    slowest = torch.tensor(times, dtype=torch.float64)
    dist.all_reduce(slowest, op=dist.ReduceOp.MAX, group=group)  # each call's slowest rank
    return slowest.tolist()


def _rank(rank, nranks, init_file, rounds, results):
    import weft.torch_backend  # noqa: F401
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=nranks)
    groups = {"gloo": dist.group.WORLD, "weft": dist.new_group(backend="weft")}
    table = {}
    for count in SIZES:
        tensor = torch.ones(count, dtype=torch.float32)
        calls = max(3, min(50, (8 << 20) // (count * 4)))
        samples = {name: [] for name in groups}
        for name, group in groups.items():  # warm up: connections, buffers
            _time_calls(tensor, group, 2)
        for _ in range(rounds):
            for name, group in groups.items():
                samples[name] += _time_calls(tensor, group, calls)
        for name, group in groups.items():  # the timed path gives right answers
            check = torch.full((count,), float(rank + 1))
            dist.all_reduce(check, group=group)
            assert torch.all(check == nranks * (nranks + 1) / 2), f"{name}: wrong all_reduce result"
        table[count] = {name: statistics.median(s) for name, s in samples.items()}
    if rank == 0:
        results.put(table)
    dist.destroy_process_group()


def run(nranks, rounds):
    with tempfile.TemporaryDirectory() as tmp:
        results = mp.get_context("spawn").SimpleQueue()
        mp.spawn(_rank, args=(nranks, os.path.join(tmp, "init"), rounds, results), nprocs=nranks)
        return results.get()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds per size")
    args = parser.parse_args()
    import weft
    print(f"library: {weft.library_path()} ({weft.weft_version()}); torch {torch.__version__}")
    print("| ranks | bytes | gloo median (us) | weft median (us) | gloo GB/s | weft GB/s | weft / gloo time |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for nranks in args.ranks:
        for count, medians in run(nranks, args.rounds).items():
            nbytes = count * 4
            gloo, ours = medians["gloo"], medians["weft"]
            print(f"| {nranks} | {nbytes} | {gloo * 1e6:.1f} | {ours * 1e6:.1f} | {nbytes / gloo / 1e9:.3f} | "
                  f"{nbytes / ours / 1e9:.3f} | {ours / gloo:.2f} |", flush=True)


if __name__ == "__main__":
    main()
