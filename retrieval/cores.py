"""A serving process's Python threads on one CPU; its native work on any.

A process's request threads share Python's lock, and numpy, sqlite and the engine's client release it around every
call: with eight searches in flight on two cores the lock changes hands often, and each time the thread that let it
go wakes on the other core, a switch and a cold cache. Pinned, a search request takes less CPU and more are served
(bench/http_load.py --pinned, docs/operating.md).

So gunicorn's worker keeps its Python threads on one CPU (`pin`, from its `post_worker_init` hook: the workers take
the CPUs in turn), and a thread leaves it while it runs native work that can use the other cores and needs no
Python (`anywhere`): the engine's statements, the local model's inference, a scan over many rows. A thread started
while its starter is pinned stays pinned.
"""

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager

log = logging.getLogger(__name__)

_pinned: tuple[set[int], set[int]] | None = None  # (the CPUs this process may use, the one its Python threads keep)
_local = threading.local()


def pin(worker: int) -> None:
    """Keep this thread, and the threads it starts from now on, on one CPU: the `worker`th (round) of those this
    process may use. Nothing to do with one, or where the OS has no per-thread affinity (macOS) or refuses it (a
    sandbox): the threads then run wherever the OS puts them, as before."""
    global _pinned
    if not hasattr(os, "sched_setaffinity"):
        return
    try:
        allowed = os.sched_getaffinity(0)  # (0: this thread, on Linux)
        if len(allowed) < 2:
            return
        core = {sorted(allowed)[worker % len(allowed)]}
        os.sched_setaffinity(0, core)
    except OSError as exc:
        log.warning("LOOM_PIN_PYTHON_THREADS: this worker's threads stay unpinned (%s)", exc)
        return
    _pinned = (allowed, core)


def pinned() -> set[int] | None:
    """The CPU this process's Python threads keep, if `pin` chose one."""
    return _pinned[1] if _pinned else None


@contextmanager
def anywhere(when: bool = True) -> Iterator[None]:
    """While inside (and `when`), this thread may run on every CPU the process may use, and the threads it starts
    keep them; after, it is where it was."""
    if _pinned is None or not when or getattr(_local, "away", False):
        yield
        return
    was = os.sched_getaffinity(0)
    _local.away = True
    os.sched_setaffinity(0, _pinned[0])
    try:
        yield
    finally:
        os.sched_setaffinity(0, was)
        _local.away = False
