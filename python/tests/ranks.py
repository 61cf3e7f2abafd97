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
import os
import sys
import traceback

_CONTEXT = multiprocessing.get_context("spawn")  # no fork after the library's threads start


class RankFailure(AssertionError):
    pass


def _rank_main(rank, nranks, id_queue, conn, make_comm):
    # Test modules (fn's) import from the tests folder; spawn gives the child
    # the parent's sys.path, and the package path comes from the environment.
    try:
        import weft
        if rank == 0:
            uid = weft.UniqueId.create()
            for _ in range(nranks - 1):
                id_queue.put(uid)
        else:
            uid = id_queue.get(timeout=60)
        comm = weft.Communicator(nranks, uid, rank) if make_comm else None
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
            conn.send(("ok", fn(comm, *args) if make_comm else fn(rank, nranks, uid, *args)))
        except BaseException:
            conn.send(("error", traceback.format_exc()))
    if comm is not None and not comm.closed:
        comm.destroy()


class RankPool:
    """`nranks` processes, each with a communicator (or, with make_comm=False, the
    unique id: fn(rank, nranks, uid, *args) then opens what it likes)."""

    def __init__(self, nranks, make_comm=True, timeout=120):
        self.nranks = nranks
        self.timeout = timeout
        id_queue = _CONTEXT.Queue()
        self._conns = []
        self._procs = []
        for rank in range(nranks):
            parent, child = _CONTEXT.Pipe()
            proc = _CONTEXT.Process(target=_rank_main, args=(rank, nranks, id_queue, child, make_comm), daemon=True)
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


def run_once(nranks, fn, *args, make_comm=True, timeout=120):
    """A pool for one function: for tests that may leave ranks in a bad state."""
    pool = RankPool(nranks, make_comm=make_comm, timeout=timeout)
    try:
        return pool.run(fn, *args)
    finally:
        pool.close()


def package_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


if package_root() not in sys.path:
    sys.path.insert(0, package_root())
