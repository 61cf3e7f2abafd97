"""Ranks as spawned processes for the tests.

A RankPool starts `nranks` processes. Rank 0 makes the unique id and hands
it to the others through a multiprocessing queue; every rank opens a
communicator (host backend) and then runs the functions the test sends it,
each called as fn(comm, *args) on every rank at once. A failure on any rank
is raised in the test with that rank's traceback; a rank that does not
answer in time fails the test and the pool is killed (the next test starts a
new one).
"""

import multiprocessing
import traceback

_CONTEXT = multiprocessing.get_context("spawn")  # no fork after the library's threads start


class RankFailure(AssertionError):
    pass


def _open(mode, rank, nranks, id_queue, init_file):
    """What each task gets as its first argument, by mode."""
    if mode == "torch":
        import torch.distributed as dist
        import weft.torch_backend  # noqa: F401  (registers "weft")
        dist.init_process_group("weft", init_method=f"file://{init_file}", rank=rank, world_size=nranks)
        return dist.group.WORLD
    import weft
    if rank == 0:
        uid = weft.UniqueId.create()
        for _ in range(nranks - 1):
            id_queue.put(uid)
    else:
        uid = id_queue.get(timeout=60)
    return weft.Communicator(nranks, uid, rank) if mode == "comm" else (rank, nranks, uid)


def _close(mode, handle):
    if mode == "torch":
        import torch.distributed as dist
        dist.destroy_process_group()
    elif mode == "comm" and not handle.closed:
        handle.destroy()


def _rank_main(rank, nranks, id_queue, conn, mode, init_file):
    try:
        handle = _open(mode, rank, nranks, id_queue, init_file)
        import weft
        conn.send(("ok", weft.library_path()))
    except BaseException:
        conn.send(("error", traceback.format_exc()))
        return
    while True:
        task = conn.recv()
        if task is None:
            break
        fn, args = task
        try:
            conn.send(("ok", fn(handle, *args)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
    _close(mode, handle)


class RankPool:
    """`nranks` processes; each task runs as fn(first, *args) on every rank, where
    `first` depends on `mode`: "comm", a weft.Communicator; "id", (rank, nranks,
    unique id) for tasks that open communicators themselves (one use: a unique
    id serves one communicator); "torch", the WORLD group of
    init_process_group("weft") (a file store in `init_file`, a path that must
    not exist yet)."""

    def __init__(self, nranks, mode="comm", timeout=120, init_file=None):
        self.nranks = nranks
        self.timeout = timeout
        id_queue = _CONTEXT.Queue()
        self._conns = []
        self._procs = []
        for rank in range(nranks):
            parent, child = _CONTEXT.Pipe()
            proc = _CONTEXT.Process(target=_rank_main, args=(rank, nranks, id_queue, child, mode, init_file), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        self.library_paths = self._collect("start-up")

    def _collect(self, what):
        results = []
        failures = []
        for rank, conn in enumerate(self._conns):
            if not conn.poll(self.timeout):
                self.kill()
                raise RankFailure(f"rank {rank} of {self.nranks} did not answer within {self.timeout} s ({what})")
            try:
                status, value = conn.recv()
            except EOFError:
                self.kill()
                raise RankFailure(f"rank {rank} of {self.nranks} died ({what}), exit code "
                                  f"{self._procs[rank].exitcode}") from None
            if status == "ok":
                results.append(value)
            else:
                failures.append(f"--- rank {rank} ---\n{value}")
        if failures:
            raise RankFailure(f"{what} failed on {len(failures)} of {self.nranks} ranks:\n" + "\n".join(failures))
        return results

    def run(self, fn, *args):
        """Runs fn on every rank; returns the per-rank results in rank order."""
        if not self._procs:
            raise RankFailure("the pool was killed by an earlier failure")
        for conn in self._conns:
            conn.send((fn, args))
        return self._collect(getattr(fn, "__name__", repr(fn)))

    @property
    def alive(self):
        return bool(self._procs) and all(p.is_alive() for p in self._procs)

    def close(self):
        for conn in self._conns:
            try:
                conn.send(None)
            except (BrokenPipeError, OSError):
                pass
        for proc in self._procs:
            proc.join(30)
        self.kill()

    def kill(self):
        for proc in self._procs:
            if proc.is_alive():
                proc.kill()
            proc.join(5)
        self._procs = []


def run_once(nranks, fn, *args, mode="comm", timeout=120):
    """A pool for one function: for tests that may leave ranks in a bad state."""
    pool = RankPool(nranks, mode=mode, timeout=timeout)
    try:
        return pool.run(fn, *args)
    finally:
        pool.close()
