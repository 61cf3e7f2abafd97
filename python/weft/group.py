"""ncclGroupStart / ncclGroupEnd, and keeping grouped buffers alive.

Inside a group the library only queues operations; the outermost group end
runs them. Arrays the package made for a queued operation (outputs it
allocated, DLPack capsules it read) are held here until then, so that they
cannot be freed while queued.
"""

import contextlib
import threading

from ._capi import api
from .errors import check

_state = threading.local()


def _pending():
    if not hasattr(_state, "depth"):
        _state.depth = 0
        _state.keep = []
    return _state


def in_group():
    """Whether the calling thread is inside group_start()/group_end()."""
    return _pending().depth > 0


def keep_until_group_end(*objects):
    """Holds `objects` until the outermost group end (no-op outside a group)."""
    state = _pending()
    if state.depth > 0:
        state.keep.extend(objects)


def group_start():
    """Starts (or nests) a group on the calling thread: ncclGroupStart."""
    check("ncclGroupStart", api.ncclGroupStart())
    _pending().depth += 1


def group_end():
    """Ends a group; the outermost end runs every queued operation: ncclGroupEnd."""
    state = _pending()
    if state.depth == 0:
        raise RuntimeError("group_end() without a matching group_start()")
    try:
        check("ncclGroupEnd", api.ncclGroupEnd())
    finally:
        state.depth -= 1
        if state.depth == 0:
            state.keep.clear()


@contextlib.contextmanager
def group():
    """`with weft.group(): ...` runs the operations queued inside together.

    The group is ended even when the body raises, so the thread is never left
    inside a group; the body's exception is the one that propagates.
    """
    group_start()
    try:
        yield
    except BaseException:
        try:
            group_end()
        except Exception:  # the body's error explains more than the group end's
            pass
        raise
    group_end()
