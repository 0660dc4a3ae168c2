"""ClickHouse outages, logged as they begin and as they end, never once per statement that meets them; and what a
log line may say of an engine (never a bound parameter, never a password)."""

import logging
import re
import threading
import time

from urllib3.exceptions import ReadTimeoutError

from retrieval import metrics

log = logging.getLogger("retrieval.store.clickhouse")  # the engine's lines, wherever they are written


class Outages:
    """Which engines failed their last statement, since when: an outage is logged as it begins and as it ends, not
    once per request that meets it (a short outage under load once wrote thousands of lines)."""

    def __init__(self):
        self.since: dict[str, tuple[float, int]] = {}  # target: (when it began, statements refused since)
        self.lock = threading.Lock()

    def began(self, dsn: str, reason: str) -> None:
        with self.lock:
            began, refused = self.since.get(dsn, (time.monotonic(), 0))
            if not refused:
                log.error("ClickHouse at %s is unavailable: %s", redact(dsn), reason)
                metrics.outages.inc()
            self.since[dsn] = began, refused + 1

    def ended(self, dsn: str) -> None:
        if not self.since:  # the common case: no lock
            return
        with self.lock:
            outage = self.since.pop(dsn, None)
        if outage is not None:
            log.warning(
                "ClickHouse at %s answers again, after %.1f s (%d statements refused meanwhile)",
                redact(dsn),
                time.monotonic() - outage[0],
                outage[1],
            )


def reason(exc: BaseException) -> str:
    """Why the engine did not answer, in a few words ("connection refused", "no answer in time"). The driver's
    own text names the request's URL with its query string, which carries the statement's bound parameters (a
    user's query among them): no log line or error says it."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror.lower()
        if isinstance(seen, ReadTimeoutError | TimeoutError):
            return "no answer in time"
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__


def redact(dsn: str) -> str:
    return re.sub(r"//[^@/]*@", "//***@", dsn)
