"""Process-local copies of what ClickHouse holds, each kept a bounded time.

Some reads run on every search but change rarely (a namespace's configuration, its
calibration and noise level, which namespaces have outcome events, the key axis).
Each keeps its answers in one `TtlCache`, so every copy expires the same way and
`forget_all()` drops them all at once: after a calibration is published, and
between tests. A change made in this process replaces its copy at once (`put`);
another process sees it within the cache's seconds.
"""

import time
import weakref
from collections.abc import Callable, Hashable


class TtlCache:
    def __init__(self, seconds: float | Callable[[], float]):
        """`seconds`: how long a copy serves, or a function that says (a setting read when it is asked)."""
        self._seconds = seconds
        self._held: dict[Hashable, tuple[float, object]] = {}
        self._forgotten = 0  # how many times the copies were dropped
        _CACHES.add(self)

    def get(self, key: Hashable, read: Callable[[], object]):
        """The copy of `key` while it is fresh, else `read()`'s answer, kept. A `read` that raises keeps nothing, nor
        one under way as the copies were dropped (it may have read what the change that dropped them replaced)."""
        held = self._held.get(key)
        seconds = self._seconds() if callable(self._seconds) else self._seconds
        if held is not None and time.monotonic() - held[0] < seconds:
            return held[1]
        forgotten = self._forgotten
        answer = read()
        return self.put(key, answer) if forgotten == self._forgotten else answer

    def put(self, key: Hashable, value):
        self._held[key] = (time.monotonic(), value)
        return value

    def last(self, key: Hashable, default=None):
        """The last copy of `key` at any age: what a read that failed falls back on."""
        held = self._held.get(key)
        return held[1] if held is not None else default

    def items(self) -> list[tuple[Hashable, object]]:
        """Every copy held, at any age."""
        return [(key, held[1]) for key, held in list(self._held.items())]

    def forget(self) -> None:
        self._forgotten += 1
        self._held.clear()


_CACHES: "weakref.WeakSet[TtlCache]" = weakref.WeakSet()


def forget_all() -> None:
    """Drop every copy this process holds: the next read of each goes to ClickHouse."""
    for cache in list(_CACHES):
        cache.forget()
