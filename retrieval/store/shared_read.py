"""One read at a time of a piece of engine state, its outcome shared by the requests queued behind it.

A process's searches often need the same answer at once (a namespace's write counts, its vector mirror's delta).
Each reading its own queues the statements on the engine; sharing one read is right only for a caller that asked
before the read began (a read that began at or after `asked` saw every write acknowledged before then). A waiter
takes the read's failure as well as its answer, at once: with the engine frozen, the queue fails together instead of
each retrying in turn. Waiting is the request's time: it is charged to its ClickHouse budget (`clickhouse.wait_for`).
"""

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from retrieval.store import clickhouse

T = TypeVar("T")


@dataclass
class _Read(Generic[T]):
    began: float  # time.monotonic() as it began
    outcome: Future = field(default_factory=Future)


class SharedRead(Generic[T]):
    def __init__(self):
        self._lock = threading.Lock()
        self._running: _Read | None = None
        self._last: _Read | None = None  # the last to end, answered or failed

    @property
    def began(self) -> float:
        """When the last read (under way or ended) began; -inf before the first."""
        latest = self._running or self._last
        return latest.began if latest is not None else -math.inf

    def since(self, asked: float, read: Callable[[], T]) -> tuple[T, float]:
        """The outcome of a read that began at or after `asked` (a time.monotonic()), and when it began: the last
        read's, the one under way's, else a new one's, run here once the one under way has ended. A failed read
        raises its error in every caller it answers."""
        while True:
            with self._lock:
                running = self._running
                shared = next((r for r in (self._last, running) if r is not None and r.began >= asked), None)
                if shared is None and running is None:
                    mine = self._running = _Read(time.monotonic())
                    break
            awaited = shared or running
            clickhouse.wait_for(lambda timeout, awaited=awaited: bool(wait([awaited.outcome], timeout).done))
            if shared is not None:
                return shared.outcome.result(), shared.began
        try:
            answer = read()
        except BaseException as exc:
            self._end(mine)
            mine.outcome.set_exception(exc)
            raise
        self._end(mine)
        mine.outcome.set_result(answer)
        return answer, mine.began

    def _end(self, read: _Read) -> None:
        # Before its outcome is set: a waiter it wakes finds the read ended, not still under way.
        with self._lock:
            self._running, self._last = None, read
