#!/usr/bin/env python3
"""PyTorch's own build on Weft: two processes on GPU 0 (issue 18, item 4).

PyTorch loads libnccl.so.2 itself; Weft's is put first with LD_PRELOAD and
LD_LIBRARY_PATH, and each worker checks from /proc/self/maps that it is the
one loaded. NCCL refuses two ranks on one GPU; Weft runs them. Each worker:

  ddp          one DistributedDataParallel step of a small model, gradients
               against a single-process reference (both ranks' data, averaged)
  collectives  all_reduce (sum, max, avg; float32, float16, int64),
               all_gather_into_tensor, reduce_scatter_tensor, broadcast,
               barrier, send/recv, all checked exactly or within float rounding
  abort        rank 0 starts an all_reduce rank 1 never joins, then aborts its
               process group: the abort must return within 10 s

Prints PASS/FAIL lines; exit 0 only when both workers passed everything.

usage: scripts/torch-gpu-check.py --lib DIR   (DIR holds Weft's libnccl.so.2)
"""

import argparse
import os
import socket
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launcher(lib):
    lib = os.path.abspath(lib)
    nccl = os.path.join(lib, "libnccl.so.2")
    if not os.path.exists(nccl):
        print(f"FAIL setup: {nccl} does not exist")
        return 1
    env = dict(os.environ)
    env["LD_PRELOAD"] = nccl + (":" + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
    env["WEFT_EXPECT_LIB"] = os.path.realpath(nccl)
    env["MASTER_ADDR"] = "127.0.0.1"
    env["MASTER_PORT"] = str(free_port())
    env["WEFT_DONE_FILE"] = f"/tmp/weft-torch-check-{os.getpid()}.done"
    # The abort check leaves an operation failed on purpose: PyTorch's
    # watchdog must not end the process for it before the check reports.
    env.setdefault("TORCH_NCCL_ASYNC_ERROR_HANDLING", "0")
    procs = [subprocess.Popen([sys.executable, __file__, "--worker", str(r)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(2)]
    ok = True
    deadline = time.time() + 200  # one for both workers, inside gpu-check.sh's 240 s
    for r, p in enumerate(procs):
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.time()))
        except subprocess.TimeoutExpired:
            p.kill()
            out, _ = p.communicate()
            out += f"\nFAIL rank {r}: not done within 200 s\n"
        for line in out.splitlines():
            print(f"[rank {r}] {line}" if not line.startswith(("PASS", "FAIL")) else f"{line} (rank {r})")
        ok = ok and p.returncode == 0 and "FAIL" not in out
    try:
        os.unlink(env["WEFT_DONE_FILE"])
    except OSError:
        pass
    print("PASS all" if ok else "FAIL some check (see above)")
    return 0 if ok else 1


def worker(rank):
    import torch
    import torch.distributed as dist
    import torch.nn as nn

    failures = []

    def check(name, fn):
        try:
            fn()
            print(f"PASS {name}", flush=True)
        except Exception as e:  # noqa: BLE001 - every failure is reported by name
            failures.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)

    def loaded_nccl():
        with open("/proc/self/maps") as maps:
            return sorted({line.split()[-1] for line in maps if "libnccl" in line})

    expected = os.environ["WEFT_EXPECT_LIB"]
    torch.cuda.set_device(0)
    dev = torch.device("cuda", 0)
    dist.init_process_group("nccl", init_method=f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}",
                            rank=rank, world_size=2)
    # The communicator is made at the first collective.
    warm = torch.ones(1, device=dev)
    dist.all_reduce(warm)
    torch.cuda.synchronize()

    def which_library():
        libs = loaded_nccl()
        print(f"libnccl mapped: {libs}; torch.cuda.nccl.version() = {torch.cuda.nccl.version()}", flush=True)
        if [os.path.realpath(p) for p in libs] != [expected]:
            raise AssertionError(f"expected only {expected}, found {libs}")
        if warm.item() != 2:
            raise AssertionError(f"first all_reduce gave {warm.item()}, expected 2")

    def ddp_step():
        def make_model():
            torch.manual_seed(0)
            return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8)).to(dev)

        def data(r):
            g = torch.Generator().manual_seed(100 + r)
            return torch.randn(16, 32, generator=g).to(dev), torch.randn(16, 8, generator=g).to(dev)

        ddp = nn.parallel.DistributedDataParallel(make_model(), device_ids=[0])
        x, y = data(rank)
        nn.functional.mse_loss(ddp(x), y).backward()
        torch.cuda.synchronize()
        # The reference: one process, no communication, both ranks' data.
        reference = make_model()
        grads = []
        for r in range(2):
            reference.zero_grad()
            xr, yr = data(r)
            nn.functional.mse_loss(reference(xr), yr).backward()
            grads.append([p.grad.clone() for p in reference.parameters()])
        for i, (p, g0, g1) in enumerate(zip(ddp.module.parameters(), *grads)):
            want = (g0 + g1) / 2
            if not torch.allclose(p.grad, want, rtol=1e-5, atol=1e-6):
                raise AssertionError(f"parameter {i}: max difference {(p.grad - want).abs().max().item()}")

    def collectives():
        n = 2
        base = torch.arange(1000, device=dev, dtype=torch.float64) % 13
        inputs = [base + 100 * r + 1 for r in range(n)]
        for dtype in (torch.float32, torch.float16, torch.int64):
            t = inputs[rank].to(dtype).clone()
            dist.all_reduce(t)
            want = (inputs[0] + inputs[1]).to(dtype)
            if not torch.equal(t, want):
                raise AssertionError(f"all_reduce sum {dtype}")
        t = inputs[rank].float().clone()
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        if not torch.equal(t, torch.maximum(inputs[0], inputs[1]).float()):
            raise AssertionError("all_reduce max")
        t = inputs[rank].float().clone()
        dist.all_reduce(t, op=dist.ReduceOp.AVG)
        if not torch.allclose(t, ((inputs[0] + inputs[1]) / 2).float()):
            raise AssertionError("all_reduce avg")
        out = torch.empty(n * 1000, device=dev)
        dist.all_gather_into_tensor(out, inputs[rank].float())
        if not torch.equal(out, torch.cat(inputs).float()):
            raise AssertionError("all_gather_into_tensor")
        full = torch.cat([inputs[rank], inputs[rank] * 2]).float()
        part = torch.empty(1000, device=dev)
        dist.reduce_scatter_tensor(part, full)
        want = sum(torch.cat([inputs[r], inputs[r] * 2]) for r in range(n)).float()[rank * 1000:(rank + 1) * 1000]
        if not torch.equal(part, want):
            raise AssertionError("reduce_scatter_tensor")
        t = inputs[rank].float().clone()
        dist.broadcast(t, src=1)
        if not torch.equal(t, inputs[1].float()):
            raise AssertionError("broadcast")
        dist.barrier()
        peer = 1 - rank
        got = torch.empty(1000, device=dev)
        if rank == 0:
            dist.send(inputs[0].float(), dst=peer)
            dist.recv(got, src=peer)
        else:
            dist.recv(got, src=peer)
            dist.send(inputs[1].float(), dst=peer)
        if not torch.equal(got, inputs[peer].float()):
            raise AssertionError("send/recv")
        torch.cuda.synchronize()

    def abort_hung_call():
        done = os.environ["WEFT_DONE_FILE"]
        if rank == 1:  # never joins; stays alive so that only the abort can end rank 0's wait
            deadline = time.time() + 60
            while not os.path.exists(done) and time.time() < deadline:
                time.sleep(0.1)
            if not os.path.exists(done):
                raise AssertionError("rank 0 never finished its abort")
            return
        t = torch.ones(1 << 20, device=dev)
        dist.all_reduce(t, async_op=True)  # its kernel waits for rank 1
        time.sleep(1.0)
        start = time.time()
        try:
            pg = dist.group.WORLD
            if hasattr(dist.distributed_c10d, "_abort_process_group"):
                dist.distributed_c10d._abort_process_group(pg)
            else:
                pg._get_backend(dev).abort()
        finally:
            open(done, "w").close()
        took = time.time() - start
        print(f"abort returned in {took:.3f} s", flush=True)
        if took > 10:
            raise AssertionError(f"abort took {took:.1f} s")

    check("library", which_library)
    check("ddp", ddp_step)
    check("collectives", collectives)
    check("abort", abort_hung_call)
    sys.stdout.flush()
    os._exit(1 if failures else 0)  # the aborted group must not be torn down again at exit


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--lib")
    parser.add_argument("--worker", type=int)
    args = parser.parse_args()
    if args.worker is not None:
        worker(args.worker)
    if not args.lib:
        parser.error("--lib DIR is required")
    sys.exit(launcher(args.lib))


if __name__ == "__main__":
    main()
